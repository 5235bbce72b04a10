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

// Issues n operations keeping at most `window` in flight, then waits for all of them.
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
        if (gdx_status_t st = op(); st != GDX_OK) return st;
    }
    return wait_pending(c.dp, p, c.opt.timeout_s, what, why);
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

struct Run {
    Test t;
    uint64_t size, iters, warmup, window;
    std::string where; // "put_bw 4K"
};

// put_bw / get_bw, iterations [first, first+count): without validation they stream; with it each iteration is
// filled, moved and checked on its own. Adds the measured time of iterations past the warm-up to *timed.
TestOutcome bandwidth_phase(PairContext &c, const Run &r, uint64_t first, uint64_t count, double *timed) {
    std::string why;
    Pending p(c.dp);
    auto op = [&]() -> gdx_status_t {
        return r.t == Test::PutBw ? c.dp.put(0, r.size, 0, &p, &why) : c.dp.get(0, r.size, 0, &p, &why);
    };
    const char *what = r.t == Test::PutBw ? "put completions" : "get completions";
    if (!c.opt.validate) {
        auto t0 = Clock::now();
        // A put completes when its bytes are in the destination buffer: no flush needed.
        if (stream(c, count * r.window, r.window, &p, what, &why, op) != GDX_OK) return fail(r.where + ": " + why);
        if (first >= r.warmup) *timed += since(t0);
        return {};
    }
    Message m;
    for (uint64_t it = first; it < first + count; ++it) {
        const uint64_t seed = iteration_seed(r.t, r.size, it);
        const std::string where = r.where + ", iteration " + std::to_string(it);
        if (r.t == Test::GetBw) {
            if (c.ctl.call(Msg::Fill, {num(seed), num(0), num(r.size)}, Msg::Ok, &m, &c.dp, &why) != GDX_OK)
                return fail(where + ": " + why);
        } else if (c.buf.fill(seed, 0, r.size, &why) != GDX_OK) {
            return fail(where + ": cannot fill the source: " + why);
        }
        auto t0 = Clock::now();
        if (stream(c, r.window, r.window, &p, what, &why, op) != GDX_OK) return fail(where + ": " + why);
        if (it >= r.warmup) *timed += since(t0);
        TestOutcome chk = r.t == Test::GetBw ? local_check(c, seed, 0, r.size, where)
                                             : remote_check(c, seed, 0, r.size, where);
        if (chk.exit_code != 0) return chk;
    }
    return {};
}

// put_lat: each iteration puts [0, S) into the peer's [S, 2S) with notification `it`, and waits for the peer's
// echo (its put of what landed, into our [S, 2S), with the same value). The round trip ends when the echo's
// notification is seen here, i.e. when its bytes are here. Our request is waited for after the clock stops (the
// source is refilled next iteration only once it completed).
TestOutcome latency_run(PairContext &c, const Run &r, std::vector<double> *rtts) {
    const size_t S = c.region;
    std::string why;
    Pending p(c.dp);
    for (uint64_t it = 0; it < r.warmup + r.iters; ++it) {
        const uint64_t seed = iteration_seed(r.t, r.size, it);
        const std::string where = r.where + ", iteration " + std::to_string(it);
        if (c.opt.validate && c.buf.fill(seed, 0, r.size, &why) != GDX_OK)
            return fail(where + ": cannot fill the source: " + why);
        auto t0 = Clock::now();
        if (c.dp.put_notify(0, r.size, S, it, &p, &why) != GDX_OK) return fail(where + ": " + why);
        uint64_t value = 0;
        bool seen = false;
        auto pong = [&] { return seen || (seen = c.dp.notifications(&value, 1) == 1); };
        if (wait_for(c.dp, c.opt.timeout_s, "the echo's notification", &why, pong, &c.ctl) != GDX_OK)
            return fail(where + ": " + why);
        const double rtt = since(t0);
        if (value != it)
            return fail(where + ": protocol error: the echo carried notification " + std::to_string(value) +
                        ", expected " + std::to_string(it));
        if (wait_pending(c.dp, &p, c.opt.timeout_s, "the ping's completion", &why) != GDX_OK)
            return fail(where + ": " + why);
        if (it >= r.warmup) rtts->push_back(rtt);
        if (c.opt.validate) {
            TestOutcome chk = local_check(c, seed, S, r.size, where);
            if (chk.exit_code != 0) return chk;
        }
    }
    return {};
}

void fill_latency(Row *row, std::vector<double> rtts) {
    std::sort(rtts.begin(), rtts.end());
    double sum = 0;
    for (double v : rtts) sum += v;
    const double avg = rtts.empty() ? 0 : sum / static_cast<double>(rtts.size());
    auto pct = [&](double q) {
        return rtts.empty() ? 0 : rtts[std::min(rtts.size() - 1, static_cast<size_t>(q * (rtts.size() - 1) + 0.5))];
    };
    row->has_latency = true;
    row->seconds = sum;
    row->lat_avg_us = avg / 2 * 1e6;
    row->lat_min_us = (rtts.empty() ? 0 : rtts.front()) / 2 * 1e6;
    row->lat_p50_us = pct(0.5) / 2 * 1e6;
    row->lat_p99_us = pct(0.99) / 2 * 1e6;
    row->lat_max_us = (rtts.empty() ? 0 : rtts.back()) / 2 * 1e6;
    row->bw_GBps = avg > 0 ? static_cast<double>(row->size) / (avg / 2) / 1e9 : 0;
    row->msg_rate_Mps = avg > 0 ? 1 / avg / 1e6 : 0;
}

} // namespace

uint64_t iteration_seed(Test t, uint64_t size, uint64_t iteration) {
    return (static_cast<uint64_t>(t) + 1) * 0x100000001b3ull ^ (size * 0x9e3779b97f4a7c15ull) ^ (iteration + 1);
}

// ---- client ----------------------------------------------------------------------------------------------

TestOutcome client_test(PairContext &c, Test t, uint64_t size) {
    const Options &opt = c.opt;
    const Run r{t,
                size,
                opt.iterations_for(t, size),
                opt.warmup_for(t, size),
                opt.window_for(t, size),
                std::string(test_name(t)) + " " + size_text(size)};
    std::string why;
    Message m;
    if (c.ctl.call(Msg::Begin, {test_name(t), num(size), num(r.iters), num(r.warmup), num(r.window)}, Msg::Ok, &m,
                   &c.dp, &why) != GDX_OK)
        return fail(r.where + ": " + why);
    c.dp.take_path_report(); // drop anything from setup
    double timed = 0;
    std::vector<double> rtts;
    rtts.reserve(r.iters);
    TestOutcome o = t == Test::PutLat ? latency_run(c, r, &rtts) : bandwidth_phase(c, r, 0, r.warmup, &timed);
    if (o.exit_code == 0 && t != Test::PutLat) o = bandwidth_phase(c, r, r.warmup, r.iters, &timed);
    if (o.exit_code != 0) return o;

    // END: the server reports what it saw (validation of the pings, its own path).
    if (c.ctl.call(Msg::End, {}, Msg::Ok, &m, &c.dp, &why) != GDX_OK) return fail(r.where + ": " + why);
    if (m.field(0) == "bad") return fail("data validation failed at the receiver (" + r.where + "): " + m.field(1), 3);

    Row &row = o.row;
    row.test = test_name(t);
    row.size = size;
    row.iterations = r.iters;
    row.warmup = r.warmup;
    row.window = r.window;
    row.path = c.dp.take_path_report();
    row.transport = row.path.transport.empty() ? c.dp.transport() : row.path.transport;
    row.device = c.dp.device();
    if (t == Test::PutLat) merge_path(&row.path, path_from_fields(m, 2));
    row.validated = opt.validate;
    if (t == Test::PutLat) {
        fill_latency(&row, std::move(rtts));
    } else {
        row.seconds = timed;
        const double bytes = static_cast<double>(size) * static_cast<double>(r.window) * static_cast<double>(r.iters);
        row.bw_GBps = timed > 0 ? bytes / timed / 1e9 : 0;
        row.msg_rate_Mps = timed > 0 ? static_cast<double>(r.window * r.iters) / timed / 1e6 : 0;
    }
    return o;
}

// ---- server ----------------------------------------------------------------------------------------------

namespace {

// put_lat's echo of every ping that arrived: what landed in [S, 2S) goes back to the client's [S, 2S) with the
// ping's value. The previous echo's request must have completed before its source is read again.
gdx_status_t echo_pings(PairContext &c, Test t, uint64_t size, Pending *p, uint64_t *answered, std::string *mismatch,
                        std::string *why) {
    const size_t S = c.region;
    uint64_t value = 0;
    while (c.dp.notifications(&value, 1) == 1) {
        if (p->outstanding > 0)
            if (gdx_status_t st = wait_pending(c.dp, p, c.opt.timeout_s, "the previous echo", why); st != GDX_OK)
                return st;
        if (c.opt.validate && mismatch->empty()) {
            size_t bad = 0;
            std::string w;
            if (!c.buf.check(iteration_seed(t, size, *answered), S, size, &bad, &w))
                *mismatch = "iteration " + std::to_string(*answered) + ": " + w;
        }
        if (gdx_status_t st = c.dp.put_notify(S, size, S, value, p, why); st != GDX_OK) return st;
        ++*answered;
    }
    return GDX_OK;
}

// One request of the client during a test (FILL, CHECK, END, a keepalive); *ended once END was answered.
gdx_status_t serve_request(PairContext &c, Test t, const Message &m, Pending *p, const std::string &mismatch,
                           bool *ended, std::string *why) {
    std::string w;
    switch (m.type) {
    case Msg::Idle: return GDX_OK; // the client's keepalive in a long phase: nothing to do but wait again
    case Msg::Fill:
        return c.buf.fill(m.u64(0), m.u64(1), m.u64(2), &w) == GDX_OK ? c.ctl.reply(Msg::Ok, {}, &c.dp, why)
                                                                       : c.ctl.reply(Msg::Error, {"fill: " + w}, &c.dp, why);
    case Msg::Check: {
        size_t bad = 0;
        bool good = c.buf.check(m.u64(0), m.u64(1), m.u64(2), &bad, &w);
        return c.ctl.reply(Msg::Ok, good ? std::vector<std::string>{"good"} : std::vector<std::string>{"bad", num(bad), w},
                           &c.dp, why);
    }
    case Msg::End: {
        *ended = true;
        if (p->outstanding > 0 && wait_pending(c.dp, p, c.opt.timeout_s, "the last echo", &w) != GDX_OK) {
            *why = w;
            std::string ignored;
            c.ctl.reply(Msg::Error, {w}, &c.dp, &ignored);
            return GDX_ERR_IO;
        }
        std::vector<std::string> f{mismatch.empty() ? "good" : "bad", mismatch};
        for (auto &x : path_fields(c.dp.take_path_report())) f.push_back(x);
        return c.ctl.reply(Msg::Ok, f, &c.dp, why);
    }
    case Msg::Error: *why = "client: " + m.field(0); return GDX_ERR_CANCELED;
    default: {
        *why = std::string("protocol error: unexpected ") + msg_name(m.type) + " during " + test_name(t);
        std::string ignored;
        c.ctl.reply(Msg::Error, {*why}, &c.dp, &ignored);
        return GDX_ERR_PROTOCOL;
    }
    }
}

} // namespace

gdx_status_t server_test(PairContext &c, const Message &begin, std::string *why) {
    auto parsed = parse_test(begin.field(0));
    const uint64_t size = begin.u64(1), iters = begin.u64(2), window = begin.u64(4);
    if (!parsed || size == 0 || size > c.region || iters == 0 || window == 0) {
        *why = "bad BEGIN from the client (test '" + begin.field(0) + "', size " + begin.field(1) + ")";
        std::string ignored;
        c.ctl.reply(Msg::Error, {*why}, &c.dp, &ignored);
        return GDX_ERR_PROTOCOL;
    }
    const Test t = *parsed;
    c.dp.take_path_report();
    gdx_status_t st = c.ctl.reply(Msg::Ok, {}, &c.dp, why);
    if (st != GDX_OK) return st;
    uint64_t answered = 0;
    Pending p(c.dp);
    std::string mismatch;
    bool ended = false;
    c.ctl.start(Message{Msg::Idle, {}}); // the client's next request arrives through this exchange
    while (!ended) {
        c.dp.progress();
        if (t == Test::PutLat && (st = echo_pings(c, t, size, &p, &answered, &mismatch, why)) != GDX_OK) return st;
        if (!c.ctl.done()) continue;
        Message m;
        if ((st = c.ctl.finish(&m, why)) != GDX_OK) return st;
        if ((st = serve_request(c, t, m, &p, mismatch, &ended, why)) != GDX_OK) return st;
        if (!ended) c.ctl.start(Message{Msg::Idle, {}});
    }
    return GDX_OK;
}

} // namespace gdx::perf
