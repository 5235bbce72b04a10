#include "session.h"

#include "bench.h"
#include "datapath.h"
#include "decisions.h"
#include "memory.h"

#include <algorithm>
#include <chrono>
#include <unistd.h>

namespace gdx::perf {

namespace {

std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
    return buf;
}

void error(const char *side, const std::string &msg) { std::fprintf(stderr, "gdx_perftest%s: %s\n", side, msg.c_str()); }

// Waits for the data path's connection (both sides progress while waiting).
gdx_status_t wait_connected(DataPath &dp, double timeout_s, std::string *why) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        gdx_status_t st = dp.connected(why);
        if (st == GDX_OK) return GDX_OK;
        if (st != GDX_INPROGRESS) return st;
        if (std::chrono::steady_clock::now() > deadline) {
            *why = dp.transport() + ": the endpoint did not connect within " + std::to_string(static_cast<int>(timeout_s)) +
                   " s";
            return GDX_ERR_TIMEOUT;
        }
    }
}

// The decision lines for this run's device pair, in the spirit of gdx_info -t.
std::vector<std::string> decision_lines(const Options &opt, const DataPath &dp, const MemSpec &local,
                                        const MemSpec &remote, const std::string &local_reach,
                                        const std::string &remote_reach, bool same_host) {
    std::vector<std::string> v;
    v.push_back("transport " + dp.transport() + " on " + dp.device() + " (-x " + opt.transport + "; peer " +
                (same_host ? "on this host" : "on another host") + ")");
    v.push_back("local " + local.text() + ": " + local_reach);
    v.push_back("remote " + remote.text() + ": " + remote_reach);
    v.push_back(std::string("path mode ") + path_mode_name(opt.path) +
                (opt.path == PathMode::Staged ? " (GDX_FAULT_P2P_EVERY=1: every fragment staged)"
                 : opt.path == PathMode::Direct ? " (GDX_GDR=yes, GDX_P2P=yes: staging is an error)"
                                                 : " (gdx decides per fragment)"));
    return v;
}

// Bytes a side allocates: the largest message, twice when a ping-pong test needs the landing region too.
uint64_t buffer_bytes(const Options &opt, uint64_t max_size) {
    bool lat = std::any_of(opt.tests.begin(), opt.tests.end(), test_is_latency);
    return lat ? 2 * max_size : max_size;
}

std::vector<int> gpus_of(const MemSpec &m) {
    if (m.kind == MemKindOpt::Host || m.kind == MemKindOpt::HostPinned) return {};
    return {m.gpu};
}

std::string join_lines(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &l : v) s += (s.empty() ? "" : "\n") + l;
    return s;
}

} // namespace

bool memory_available_here(const MemSpec &m, std::string *why) {
    if (gdx_ext_mem_check(ext_kind(m.kind), m.gpu) == GDX_OK) return true;
    *why = gdx_last_error(); // "memory kind 'cuda:1': GPU 1 does not exist (this machine has 1 GPU)"
    return false;
}

// ---- client ----------------------------------------------------------------------------------------------

namespace {

// The decision lines of the pair: this run's, gdx_info -t's for this side's GPU/NIC, then the server's (when
// they differ).
void print_decisions(const Options &opt, Reporter &rep, const DataPath &dp, const MemSpec &local,
                     const MemSpec &remote, const Message &ready, bool same_host, bool print) {
    std::vector<std::string> lines = decision_lines(opt, dp, local, remote, dp.reach(), ready.field(2), same_host);
    std::vector<std::string> topo = topology_decisions(gpus_of(local), dp.transport(), dp.device());
    lines.insert(lines.end(), topo.begin(), topo.end());
    const std::string &server_lines = ready.field(4);
    for (size_t pos = 0; pos < server_lines.size();) {
        size_t nl = server_lines.find('\n', pos);
        std::string l = server_lines.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? server_lines.size() : nl + 1;
        if (std::find(lines.begin(), lines.end(), l) == lines.end()) lines.push_back("server: " + l);
    }
    for (const std::string &line : lines) {
        rep.add_note(line);
        if (print && !opt.quiet_decisions && !opt.csv) std::printf("# decision: %s\n", line.c_str());
    }
}

// Every (test, size) of the pair; 0, or the exit status of the first failure (reported to the server too).
int run_tests(const Options &opt, Control &ctl, Reporter &rep, PairContext &c, const MemSpec &local,
              const MemSpec &remote, bool same_host) {
    Progress progress;
    const std::string mems = local.text() + "->" + remote.text();
    for (Test t : opt.tests) {
        for (size_t i = 0; i < opt.sizes.size(); ++i) {
            progress.update(test_name(t), mems, opt.sizes[i], i, opt.sizes.size());
            TestOutcome o = client_test(c, t, opt.sizes[i]);
            progress.clear();
            if (o.exit_code != 0) {
                error("", o.message);
                ctl.notify_failure(o.message, &c.dp);
                return o.exit_code;
            }
            Row &r = o.row;
            r.local_mem = local.text();
            r.remote_mem = remote.text();
            sanity_check(&r, limit_for(r.transport, r.path, local, remote, same_host));
            rep.row(r);
            if ((opt.path == PathMode::Direct && r.path.staged_share > 0) ||
                (opt.path == PathMode::Staged && r.path.staged_share < 1)) {
                std::string msg = std::string("--path ") + path_mode_name(opt.path) + " was asked, but " + r.test +
                                  " " + size_text(r.size) + " took " + r.path.text();
                error("", msg);
                ctl.notify_failure(msg, &c.dp);
                return 1;
            }
        }
    }
    return 0;
}

int client_pair(const Options &opt, Control &ctl, Reporter &rep, bool same_host, const MemSpec &local,
                const MemSpec &remote, bool print_decisions_here) {
    std::string why;
    const uint64_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    if (!memory_available_here(local, &why)) {
        error("", why);
        return 1;
    }
    std::unique_ptr<Buffer> buf;
    std::unique_ptr<DataPath> dp;
    if (Buffer::allocate(local, buffer_bytes(opt, max_size), &buf, &why) != GDX_OK ||
        DataPath::open(opt.transport, opt.path, *buf, &dp, &why) != GDX_OK) {
        error("", why);
        return 1;
    }
    Options spec = opt;
    spec.mem_pairs = {{local, remote}};
    Message m;
    if (ctl.call(Msg::Spec, {spec.serialize(), dp->address(), dp->key()}, Msg::Ready, &m, dp.get(), &why) != GDX_OK ||
        dp->connect(m.field(0), m.field(1), &why) != GDX_OK || wait_connected(*dp, opt.timeout_s, &why) != GDX_OK) {
        error("", why);
        ctl.notify_failure(why, dp.get());
        return 1;
    }
    print_decisions(opt, rep, *dp, local, remote, m, same_host, print_decisions_here);
    rep.header(dp->transport(), dp->device(), local, remote);
    PairContext c{opt, ctl, *dp, *buf, max_size};
    return run_tests(opt, ctl, rep, c, local, remote, same_host);
}

} // namespace

int run_client(const Options &opt, Control &ctl, Reporter &rep) {
    std::string why;
    std::string gpu_why;
    const int gpus = gpu_count(&gpu_why);
    Message m;
    if (ctl.exchange(Message{Msg::Hello, {num(kProtocolVersion), host_name(), num(static_cast<uint64_t>(gpus))}}, &m,
                     nullptr, &why) != GDX_OK) {
        error("", why);
        return 1;
    }
    if (m.type != Msg::Hello) {
        error("", std::string("protocol error: expected HELLO from the server, got ") + msg_name(m.type));
        return 1;
    }
    if (m.u64(0) != kProtocolVersion) {
        error("", "the server speaks gdx_perftest protocol " + m.field(0) + ", this client " +
                      num(kProtocolVersion) + ": run the same gdx_perftest on both sides");
        return 1;
    }
    const bool same_host = opt.role == Role::Loopback || m.field(1) == host_name();

    auto pairs = opt.mem_pairs;
    if (pairs.empty()) {
        pairs.push_back({MemSpec{}, MemSpec{}});
        // --loopback on a GPU machine: GPU memory too (two GPUs: across them as well).
        if (opt.role == Role::Loopback && gpus > 0) {
            pairs.push_back({MemSpec{MemKindOpt::Cuda, 0}, MemSpec{MemKindOpt::Cuda, 0}});
            if (gpus > 1) pairs.push_back({MemSpec{MemKindOpt::Cuda, 0}, MemSpec{MemKindOpt::Cuda, 1}});
        } else if (opt.role == Role::Loopback) {
            std::string note = "GPU memory not measured: " + gpu_why;
            rep.add_note(note);
            if (!opt.csv) std::printf("# %s\n", note.c_str());
        }
    }
    int rc = 0;
    // A pair that fails is reported and dropped on both sides; the next one still runs (the README's main job
    // shows every pair it can). The exit status is the worst: 3 (data mismatch) over 1 (failure) over 0.
    for (size_t i = 0; i < pairs.size() && !ctl.broken(); ++i) {
        int r = client_pair(opt, ctl, rep, same_host, pairs[i].first, pairs[i].second, true);
        if (r == 3 || (r != 0 && rc == 0)) rc = r;
    }
    Message ignored;
    if (!ctl.broken() && ctl.exchange(Message{Msg::Bye, {}}, &ignored, nullptr, &why) != GDX_OK) {
        error("", why);
        rc = 1;
    }
    return rc;
}

// ---- server ----------------------------------------------------------------------------------------------

int run_server(Options opt, Control &ctl, bool quiet) {
    const char *side = quiet ? " (peer)" : "";
    std::string why, gpu_why;
    Message m;
    const uint64_t gpus = static_cast<uint64_t>(gpu_count(&gpu_why));
    if (ctl.exchange(Message{Msg::Hello, {num(kProtocolVersion), host_name(), num(gpus)}}, &m, nullptr, &why) != GDX_OK) {
        char t[32];
        std::snprintf(t, sizeof(t), "%g", opt.timeout_s);
        error(side, std::string("no client connected within ") + t + " s (--timeout): " + why);
        return 1;
    }
    if (m.type != Msg::Hello || m.u64(0) != kProtocolVersion) {
        error(side, "the client is not a gdx_perftest of this version (protocol " + m.field(0) + ", this server " +
                        num(kProtocolVersion) + "): run the same gdx_perftest on both sides");
        return 1;
    }
    std::unique_ptr<Buffer> buf;
    std::unique_ptr<DataPath> dp;
    std::unique_ptr<PairContext> ctx;
    int failures = 0;
    auto drop_pair = [&] {
        ctx.reset();
        dp.reset();
        buf.reset();
        ++failures;
    };
    // Answers the request with the failure; the pair is dropped and the server waits for the next one.
    auto refuse = [&](const std::string &msg) {
        std::string ignored;
        ctl.reply(Msg::Error, {msg}, dp.get(), &ignored);
        if (!quiet) error(side, msg); // the client prints it as the server's answer
        drop_pair();
    };
    for (;;) {
        // The client's next request; the data path keeps progressing meanwhile.
        gdx_status_t st = ctl.exchange(Message{Msg::Idle, {}}, &m, dp.get(), &why);
        if (st != GDX_OK) {
            // Under --loopback / mpirun the client reports its own failure; a vanished client is then no news.
            if (!quiet) error(side, why);
            return 1;
        }
        switch (m.type) {
        case Msg::Idle: break; // a keepalive that crossed the end of a test
        case Msg::Spec: {
            ctx.reset();
            dp.reset();
            buf.reset();
            if (!apply_client_spec(m.field(0), &opt, &why)) {
                refuse(why);
                break;
            }
            const MemSpec local = opt.mem_pairs.empty() ? MemSpec{} : opt.mem_pairs[0].first;
            const MemSpec remote = opt.mem_pairs.empty() ? MemSpec{} : opt.mem_pairs[0].second;
            const uint64_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
            if (!memory_available_here(local, &why) ||
                Buffer::allocate(local, buffer_bytes(opt, max_size), &buf, &why) != GDX_OK ||
                DataPath::open(opt.transport, opt.path, *buf, &dp, &why) != GDX_OK ||
                dp->connect(m.field(1), m.field(2), &why) != GDX_OK) {
                refuse("server: " + why);
                break;
            }
            // Connected (its transports chosen): what this side's reach and decisions are is known now.
            const std::string decisions = join_lines(topology_decisions(gpus_of(local), dp->transport(), dp->device()));
            if (ctl.reply(Msg::Ready, {dp->address(), dp->key(), dp->reach(), dp->device(), decisions}, dp.get(), &why) !=
                GDX_OK) {
                error(side, why);
                return 1;
            }
            ctx.reset(new PairContext{opt, ctl, *dp, *buf, max_size});
            if (!quiet)
                std::printf("# client's run: %s -> %s (this side) over %s\n", remote.text().c_str(),
                            local.text().c_str(), dp->transport().c_str());
            std::fflush(stdout);
            break;
        }
        case Msg::Begin:
            if (!ctx) {
                refuse("protocol error: BEGIN before SPEC");
                break;
            }
            st = server_test(*ctx, m, &why);
            if (st == GDX_OK) break;
            if (ctl.broken()) { // nothing more can be exchanged
                if (!quiet) error(side, why);
                return 1;
            }
            if (st == GDX_ERR_CANCELED) {
                // The client failed and said so (under --loopback / mpirun it printed it already).
                if (!quiet) error(side, why);
            } else {
                error(side, why); // this side's own failure: print it, and tell the client
                ctl.notify_failure("server: " + why, dp.get());
            }
            drop_pair();
            break;
        case Msg::Bye: return failures == 0 ? 0 : 1;
        case Msg::Error:
            if (!quiet) error(side, "the client failed: " + m.field(0)); // the loopback client printed it already
            drop_pair();
            break;
        default: refuse(std::string("protocol error: unexpected ") + msg_name(m.type)); break;
        }
    }
}

} // namespace gdx::perf
