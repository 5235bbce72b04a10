#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace gdx::perf {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Waits (progressing) until cond() holds; fails after timeout_s without any progress event.
template <typename Cond>
gdx_status_t wait_for(DataPath &dp, double timeout_s, const char *what, std::string *why, Cond cond,
                      Control *keepalive = nullptr) {
    auto last = Clock::now(), checked = last;
    while (!cond()) {
        if (keepalive != nullptr && keepalive->keepalive(&dp, why) != GDX_OK) return GDX_ERR_CONNECTION_RESET;
        if (dp.progress() != 0) {
            last = Clock::now();
            continue;
        }
        // Quiet for a while: a peer that died is noticed by its endpoint (tcp, shm) well before the timeout.
        if (since(checked) > 0.1) {
            checked = Clock::now();
            gdx_status_t st = dp.connected(why);
            if (st != GDX_OK && st != GDX_INPROGRESS) return st;
        }
        if (since(last) > timeout_s) {
            *why = std::string("timed out after ") + std::to_string(static_cast<int>(timeout_s)) +
                   " s waiting for " + what + " (no progress; the peer may have stalled)";
            return GDX_ERR_TIMEOUT;
        }
    }
    return GDX_OK;
}

void merge_path(PathUsed *into, const PathUsed &other) {
    if (other.kind == "unknown") return;
    if (into->kind == "unknown") {
        *into = other;
        return;
    }
    if (!other.detail.empty() && other.detail != into->detail)
        into->detail = (into->detail.empty() ? "" : into->detail + " | ") + "echo: " + other.detail;
    if (into->kind != other.kind || into->via != other.via) {
        into->staged_share = (into->staged_share + other.staged_share) / 2;
        into->frag_size = std::max(into->frag_size, other.frag_size);
        into->depth = std::max(into->depth, other.depth);
        if (into->via.empty()) into->via = other.via;
        into->kind = into->staged_share <= 0 ? "direct" : into->staged_share >= 1 ? "staged" : "mixed";
    }
}

std::vector<std::string> path_fields(const PathUsed &p) {
    char share[32];
    std::snprintf(share, sizeof(share), "%.6f", p.staged_share);
    return {p.kind, p.via, num(p.frag_size), num(p.depth), share, p.detail};
}

PathUsed path_from_fields(const Message &m, size_t first) {
    PathUsed p;
    p.kind = m.field(first);
    p.via = m.field(first + 1);
    p.frag_size = m.u64(first + 2);
    p.depth = static_cast<unsigned>(m.u64(first + 3));
    p.staged_share = std::strtod(m.field(first + 4).c_str(), nullptr);
    p.detail = m.field(first + 5);
    if (p.kind.empty()) p.kind = "unknown";
    return p;
}

// Streams n operations keeping at most `window` in flight, then waits for all of them.
template <typename Op>
gdx_status_t stream(PairContext &c, uint64_t n, uint64_t window, Pending *p, const char *what, std::string *why,
                    Op op) {
    for (uint64_t i = 0; i < n; ++i) {
        if (p->outstanding >= static_cast<int64_t>(window)) {
            gdx_status_t st = wait_for(
                c.dp, c.opt.timeout_s, what, why, [&] { return p->outstanding < static_cast<int64_t>(window); },
                &c.ctl);
            if (st != GDX_OK) return st;
        } else if (i % 64 == 0 && c.ctl.keepalive(&c.dp, why) != GDX_OK) {
            return GDX_ERR_CONNECTION_RESET;
        }
        gdx_status_t st = post(c.dp, c.opt.timeout_s, what, why, op);
        if (st != GDX_OK) return st;
    }
    gdx_status_t st = wait_pending(c.dp, p, c.opt.timeout_s, what, why);
    if (st == GDX_OK && p->first_error != GDX_OK) {
        *why = std::string(what) + " completed with an error: " + gdx_status_string(p->first_error);
        st = p->first_error;
    }
    return st;
}

// Asks the server to check its buffer; a mismatch becomes exit code 3.
TestOutcome remote_check(PairContext &c, uint64_t seed, size_t off, size_t len, const std::string &where) {
    TestOutcome o;
    std::string why;
    Message m;
    if (c.ctl.call(Msg::Check, {num(seed), num(off), num(len)}, Msg::Ok, &m, &c.dp, &why) != GDX_OK) {
        o.exit_code = 1;
        o.message = why;
    } else if (m.field(0) == "bad") {
        o.exit_code = 3;
        o.message = "data validation failed at the receiver (" + where + "): " + m.field(2);
    }
    return o;
}

TestOutcome local_check(PairContext &c, uint64_t seed, size_t off, size_t len, const std::string &where) {
    TestOutcome o;
    size_t bad = 0;
    std::string why;
    if (!c.buf.check(seed, off, len, &bad, &why)) {
        o.exit_code = 3;
        o.message = "data validation failed at the receiver (" + where + "): " + why;
    }
    return o;
}

TestOutcome fail(const std::string &msg, int code = 1) {
    TestOutcome o;
    o.exit_code = code;
    o.message = msg;
    return o;
}

} // namespace

uint64_t iteration_seed(Test t, uint64_t size, uint64_t iteration) {
    return (static_cast<uint64_t>(t) + 1) * 0x100000001b3ull ^ (size * 0x9e3779b97f4a7c15ull) ^ (iteration + 1);
}

void am_callback(void *arg, uint8_t id, const void *data, size_t len) {
    auto *s = static_cast<AmState *>(arg);
    auto check_and_land = [&](uint64_t iteration, size_t dst) {
        if (s->validate && s->mismatch.empty()) {
            size_t bad = pattern_find_mismatch(iteration_seed(s->test, s->size, iteration), 0,
                                               static_cast<const uint8_t *>(data), len);
            if (len != s->size) {
                s->mismatch = "active message of " + std::to_string(len) + " bytes, expected " + std::to_string(s->size);
            } else if (bad != SIZE_MAX) {
                char msg[200];
                std::snprintf(msg, sizeof(msg), "iteration %llu: first bad byte at offset %zu of the %zu-byte message",
                              static_cast<unsigned long long>(iteration), bad, len);
                s->mismatch = msg;
            }
        }
        // The payload lands in this side's buffer (its memory kind): that copy is part of receiving it.
        std::string why;
        if (s->buf != nullptr && s->error.empty() && len <= s->size &&
            s->buf->write_from_host(dst, data, len, &why) != GDX_OK)
            s->error = why;
    };
    switch (id) {
    case kAmData: {
        uint64_t k = s->data_count++;
        check_and_land(k / std::max<uint64_t>(s->window, 1), 0);
        break;
    }
    case kAmAck:
        if (len == 8) std::memcpy(&s->ack_value, data, 8);
        break;
    case kAmPing:
    case kAmPong: {
        uint64_t &count = id == kAmPing ? s->pings : s->pongs;
        if (s->test == Test::PutLat) {
            if (len == 8) std::memcpy(&s->last_value, data, 8);
        } else {
            check_and_land(count, s->region);
        }
        ++count;
        break;
    }
    default: break;
    }
}

// ---- client ----------------------------------------------------------------------------------------------

TestOutcome client_test(PairContext &c, Test t, uint64_t size) {
    const Options &opt = c.opt;
    const uint64_t iters = opt.iterations_for(t, size), warmup = opt.warmup_for(t, size),
                   window = opt.window_for(t, size);
    const std::string where_base = std::string(test_name(t)) + " " + size_text(size);
    std::string why;
    TestOutcome out;
    if ((t == Test::AmBw || t == Test::AmLat) && size > c.dp.max_am()) {
        out.skipped = true;
        out.message = where_base + ": skipped: larger than " + c.dp.transport() + "'s largest active message (" +
                      size_text(c.dp.max_am()) + ")";
        return out;
    }
    if (t == Test::AmBw || t == Test::AmLat) {
        std::string no = c.dp.am_unreachable(size);
        if (!no.empty()) {
            out.skipped = true;
            out.message = where_base + ": skipped: " + no;
            return out;
        }
    }
    Message m;
    if (c.ctl.call(Msg::Begin, {test_name(t), num(size), num(iters), num(warmup), num(window)}, Msg::Ok, &m, &c.dp,
                   &why) != GDX_OK)
        return fail(where_base + ": " + why);
    c.am.reset(t, size, window, opt.validate);
    c.dp.take_path_report(); // drop anything from setup
    Pending p;
    double timed = 0;
    std::vector<double> rtts;
    rtts.reserve(iters);
    const size_t S = c.region;
    const uint64_t total = warmup + iters;

    auto run_phase = [&](uint64_t first, uint64_t count) -> TestOutcome {
        // One phase: `count` iterations starting at `first`. Without validation they stream; with it each
        // iteration is filled, moved, and checked on its own.
        auto op = [&]() -> gdx_status_t {
            switch (t) {
            case Test::PutBw: return c.dp.put(0, size, 0, &p);
            case Test::GetBw: return c.dp.get(0, size, 0, &p);
            default: return c.dp.am(kAmData, 0, size, &p);
            }
        };
        const char *what = t == Test::PutBw ? "put completions" : t == Test::GetBw ? "get completions"
                                                                                  : "active-message sends";
        if (!opt.validate) {
            auto t0 = Clock::now();
            // A put completes when its bytes are in the destination buffer: no flush needed.
            gdx_status_t st = stream(c, count * window, window, &p, what, &why, op);
            if (st == GDX_OK && t == Test::AmBw) {
                uint64_t target = (first + count) * window;
                st = wait_for(
                    c.dp, opt.timeout_s, "the receiver's acknowledgement", &why,
                    [&] { return c.am.ack_value >= target; }, &c.ctl);
            }
            if (st != GDX_OK) return fail(where_base + ": " + why);
            if (first >= warmup) timed += since(t0);
            return {};
        }
        for (uint64_t it = first; it < first + count; ++it) {
            const uint64_t seed = iteration_seed(t, size, it);
            const std::string where = where_base + ", iteration " + std::to_string(it);
            if (t == Test::GetBw) {
                if (c.ctl.call(Msg::Fill, {num(seed), num(0), num(size)}, Msg::Ok, &m, &c.dp, &why) != GDX_OK)
                    return fail(where + ": " + why);
            } else if (c.buf.fill(seed, 0, size, &why) != GDX_OK) {
                return fail(where + ": cannot fill the source: " + why);
            }
            auto t0 = Clock::now();
            gdx_status_t st = stream(c, window, window, &p, what, &why, op);
            if (st == GDX_OK && t == Test::AmBw)
                st = wait_for(c.dp, opt.timeout_s, "the receiver's acknowledgement", &why,
                              [&] { return c.am.ack_value >= (it + 1) * window; });
            if (st != GDX_OK) return fail(where + ": " + why);
            if (it >= warmup) timed += since(t0);
            TestOutcome chk = t == Test::GetBw ? local_check(c, seed, 0, size, where)
                            : t == Test::PutBw ? remote_check(c, seed, 0, size, where)
                                               : TestOutcome{};
            if (chk.exit_code != 0) return chk;
        }
        return {};
    };

    if (test_is_latency(t)) {
        for (uint64_t it = 0; it < total; ++it) {
            const uint64_t seed = iteration_seed(t, size, it);
            const std::string where = where_base + ", iteration " + std::to_string(it);
            if (opt.validate && c.buf.fill(seed, 0, size, &why) != GDX_OK)
                return fail(where + ": cannot fill the source: " + why);
            auto t0 = Clock::now();
            gdx_status_t st;
            if (t == Test::PutLat) {
                // The put completes once its bytes are at the peer (staged ones too); then the peer is told.
                st = post(c.dp, opt.timeout_s, "put", &why, [&] { return c.dp.put(0, size, S, &p); });
                if (st == GDX_OK) st = wait_pending(c.dp, &p, opt.timeout_s, "the put's completion", &why);
                if (st == GDX_OK && p.first_error != GDX_OK) {
                    why = std::string("the put failed: ") + gdx_status_string(p.first_error);
                    st = p.first_error;
                }
                if (st == GDX_OK)
                    st = post(c.dp, opt.timeout_s, "ping", &why, [&] { return c.dp.am_signal(kAmPing, it); });
            } else {
                st = post(c.dp, opt.timeout_s, "ping", &why, [&] { return c.dp.am(kAmPing, 0, size, &p); });
            }
            if (st == GDX_OK)
                st = wait_for(c.dp, opt.timeout_s, "the pong", &why, [&] { return c.am.pongs > it; }, &c.ctl);
            if (st != GDX_OK) return fail(where + ": " + why);
            if (it >= warmup) rtts.push_back(since(t0));
            if (!c.am.error.empty()) return fail(where + ": " + c.am.error);
            if (opt.validate) {
                TestOutcome chk = local_check(c, seed, S, size, where);
                if (chk.exit_code != 0) return chk;
            }
            // Source buffers are reused next iteration: their sends must have completed.
            if (p.outstanding > 0 && wait_pending(c.dp, &p, opt.timeout_s, "send completions", &why) != GDX_OK)
                return fail(where + ": " + why);
        }
    } else {
        TestOutcome o = run_phase(0, warmup);
        if (o.exit_code == 0) o = run_phase(warmup, iters);
        if (o.exit_code != 0) return o;
    }
    if (!c.am.mismatch.empty()) return fail("data validation failed at the receiver (" + where_base + "): " +
                                            c.am.mismatch, 3);
    if (!c.am.error.empty()) return fail(where_base + ": " + c.am.error);

    // END: the server reports what it saw (validation in its handlers, its own path).
    if (c.ctl.call(Msg::End, {}, Msg::Ok, &m, &c.dp, &why) != GDX_OK) return fail(where_base + ": " + why);
    if (m.field(0) == "bad") return fail("data validation failed at the receiver (" + where_base + "): " +
                                         m.field(1), 3);

    Row &r = out.row;
    r.test = test_name(t);
    r.size = size;
    r.iterations = iters;
    r.warmup = warmup;
    r.window = window;
    r.transport = c.dp.transport();
    r.device = c.dp.device();
    r.path = c.dp.take_path_report();
    if (test_is_latency(t)) merge_path(&r.path, path_from_fields(m, 2));
    r.validated = opt.validate;
    if (test_is_latency(t)) {
        std::sort(rtts.begin(), rtts.end());
        double sum = 0;
        for (double v : rtts) sum += v;
        double avg = rtts.empty() ? 0 : sum / static_cast<double>(rtts.size());
        auto pct = [&](double q) {
            return rtts.empty() ? 0 : rtts[std::min(rtts.size() - 1, static_cast<size_t>(q * (rtts.size() - 1) + 0.5))];
        };
        r.has_latency = true;
        r.seconds = sum;
        r.lat_avg_us = avg / 2 * 1e6;
        r.lat_min_us = (rtts.empty() ? 0 : rtts.front()) / 2 * 1e6;
        r.lat_p50_us = pct(0.5) / 2 * 1e6;
        r.lat_p99_us = pct(0.99) / 2 * 1e6;
        r.lat_max_us = (rtts.empty() ? 0 : rtts.back()) / 2 * 1e6;
        r.bw_GBps = avg > 0 ? static_cast<double>(size) / (avg / 2) / 1e9 : 0;
        r.msg_rate_Mps = avg > 0 ? 1 / avg / 1e6 : 0;
    } else {
        r.seconds = timed;
        double bytes = static_cast<double>(size) * static_cast<double>(window) * static_cast<double>(iters);
        r.bw_GBps = timed > 0 ? bytes / timed / 1e9 : 0;
        r.msg_rate_Mps = timed > 0 ? static_cast<double>(window * iters) / timed / 1e6 : 0;
    }
    return out;
}

// ---- server ----------------------------------------------------------------------------------------------

gdx_status_t server_test(PairContext &c, const Message &begin, std::string *why) {
    auto parsed = parse_test(begin.field(0));
    const uint64_t size = begin.u64(1), iters = begin.u64(2), warmup = begin.u64(3), window = begin.u64(4);
    if (!parsed || size == 0 || size > c.region || iters == 0 || window == 0) {
        *why = "bad BEGIN from the client (test '" + begin.field(0) + "', size " + begin.field(1) + ")";
        std::string ignored;
        c.ctl.reply(Msg::Error, {*why}, &c.dp, &ignored);
        return GDX_ERR_PROTOCOL;
    }
    const Test t = *parsed;
    c.am.reset(t, size, window, c.opt.validate);
    c.dp.take_path_report();
    gdx_status_t st = c.ctl.reply(Msg::Ok, {}, &c.dp, why);
    if (st != GDX_OK) return st;
    const uint64_t total = (warmup + iters) * window;
    uint64_t answered = 0;
    uint64_t next_ack = c.opt.validate ? window : (warmup > 0 ? warmup * window : total);
    Pending p;
    std::string local_mismatch;
    c.ctl.start(Message{Msg::Idle, {}}); // the client's next request arrives through this exchange
    for (;;) {
        c.dp.progress();
        // am_bw: acknowledge the end of each phase (each iteration when validating); the client waits for it.
        if (t == Test::AmBw && next_ack <= total && c.am.data_count >= next_ack) {
            const uint64_t n = next_ack;
            st = post(c.dp, c.opt.timeout_s, "acknowledgement", why, [&] { return c.dp.am_signal(kAmAck, n); });
            if (st != GDX_OK) return st;
            next_ack = c.opt.validate ? n + window : (n < total ? total : total + 1);
        }
        if (test_is_latency(t) && c.am.pings > answered) {
            // Echo: what landed in [S, 2S) goes back to the client's [S, 2S).
            const size_t S = c.region;
            if (t == Test::PutLat && c.opt.validate && local_mismatch.empty()) {
                size_t bad = 0;
                std::string w;
                if (!c.buf.check(iteration_seed(t, size, answered), S, size, &bad, &w))
                    local_mismatch = "iteration " + std::to_string(answered) + ": " + w;
            }
            if (t == Test::PutLat) {
                st = post(c.dp, c.opt.timeout_s, "put", why, [&] { return c.dp.put(S, size, S, &p); });
                if (st == GDX_OK) st = wait_pending(c.dp, &p, c.opt.timeout_s, "the put's completion", why);
                if (st == GDX_OK && p.first_error != GDX_OK) {
                    *why = std::string("the put failed: ") + gdx_status_string(p.first_error);
                    st = p.first_error;
                }
                if (st == GDX_OK)
                    st = post(c.dp, c.opt.timeout_s, "pong", why,
                              [&] { return c.dp.am_signal(kAmPong, c.am.last_value); });
            } else {
                st = post(c.dp, c.opt.timeout_s, "pong", why, [&] { return c.dp.am(kAmPong, S, size, &p); });
                if (st == GDX_OK && p.outstanding > 0)
                    st = wait_pending(c.dp, &p, c.opt.timeout_s, "send completions", why);
            }
            if (st != GDX_OK) return st;
            ++answered;
        }
        if (!c.ctl.done()) continue;
        Message m;
        st = c.ctl.finish(&m, why);
        if (st != GDX_OK) return st;
        if (m.type == Msg::Idle) {
            // The client's keepalive in a long phase: nothing to do but wait again.
        } else if (m.type == Msg::Fill) {
            std::string w;
            st = c.buf.fill(m.u64(0), m.u64(1), m.u64(2), &w) == GDX_OK ? c.ctl.reply(Msg::Ok, {}, &c.dp, why)
                                                                         : c.ctl.reply(Msg::Error, {"fill: " + w}, &c.dp, why);
        } else if (m.type == Msg::Check) {
            size_t bad = 0;
            std::string w;
            bool good = c.buf.check(m.u64(0), m.u64(1), m.u64(2), &bad, &w);
            st = c.ctl.reply(Msg::Ok, good ? std::vector<std::string>{"good"} : std::vector<std::string>{"bad", num(bad), w},
                             &c.dp, why);
        } else if (m.type == Msg::End) {
            if (p.outstanding > 0) wait_pending(c.dp, &p, c.opt.timeout_s, "send completions", why);
            if (!c.am.error.empty()) {
                *why = c.am.error;
                std::string ignored;
                c.ctl.reply(Msg::Error, {c.am.error}, &c.dp, &ignored);
                return GDX_ERR_IO;
            }
            std::string bad = !c.am.mismatch.empty() ? c.am.mismatch : local_mismatch;
            std::vector<std::string> f{bad.empty() ? "good" : "bad", bad};
            for (auto &x : path_fields(c.dp.take_path_report())) f.push_back(x);
            return c.ctl.reply(Msg::Ok, f, &c.dp, why);
        } else if (m.type == Msg::Error) {
            *why = "client: " + m.field(0);
            return GDX_ERR_CANCELED;
        } else {
            *why = std::string("protocol error: unexpected ") + msg_name(m.type) + " during " + test_name(t);
            std::string ignored;
            c.ctl.reply(Msg::Error, {*why}, &c.dp, &ignored);
            return GDX_ERR_PROTOCOL;
        }
        if (st != GDX_OK) return st;
        c.ctl.start(Message{Msg::Idle, {}});
    }
}

} // namespace gdx::perf
