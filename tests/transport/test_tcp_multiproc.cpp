// The tcp transport between processes: gdx_tcp_peer started with posix_spawn, a rendezvous through the
// bootstrap, 256 MiB transfers compared byte for byte, and peers that die (SIGKILL) or go silent (SIGSTOP)
// in the middle of a transfer: outstanding operations complete with an error, never hang.
#include "core/error.h"
#include "peer_blob.h"
#include "tcp_pair.h"
#include "transport/bootstrap.h"
#include "transport/tcp/tcp_internal.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

using namespace gdx;
using namespace gdx::test;

namespace {

const char *kPeer = GDX_TEST_BINARY_DIR "/tests/transport/gdx_tcp_peer";

struct Child {
    pid_t pid = -1;
    int out = -1; // its stdout
    ~Child() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        if (out >= 0) close(out);
    }
    // Exit code, or -1 when it did not exit within the guard (then it is killed).
    int wait_exit(std::chrono::seconds guard = std::chrono::seconds(300)) {
        auto end = std::chrono::steady_clock::now() + guard;
        int st = 0;
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > end) return -1;
            usleep(10000);
        }
        pid = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    // Reads stdout until a line starting with `prefix`; returns the rest of that line.
    std::string read_line(const std::string &prefix, std::chrono::seconds guard = std::chrono::seconds(60)) {
        std::string acc;
        auto end = std::chrono::steady_clock::now() + guard;
        while (std::chrono::steady_clock::now() < end) {
            pollfd p{out, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0) continue;
            char c;
            if (read(out, &c, 1) != 1) break;
            if (c != '\n') {
                acc += c;
                continue;
            }
            if (acc.rfind(prefix, 0) == 0) return acc.substr(prefix.size());
            acc.clear();
        }
        return "";
    }
};

void spawn(Child *c, std::vector<std::string> args, const std::vector<std::string> &extra_env = {}) {
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    std::vector<std::string> env;
    for (char **e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    args.insert(args.begin(), kPeer);
    std::vector<char *> argv, envp;
    for (auto &a : args) argv.push_back(a.data());
    for (auto &e : env) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    int rc = posix_spawn(&c->pid, kPeer, &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    c->out = fds[0];
    ASSERT_EQ(rc, 0) << "posix_spawn " << kPeer << ": " << strerror(rc);
}

} // namespace

TEST(TcpMultiProcess, TwoProcessesMoveEverySizeUpTo256MiBIntact) {
    Child target, check;
    ASSERT_NO_FATAL_FAILURE(spawn(&target, {"target", "--listen", "--bootstrap", "127.0.0.1:0", "--bytes", "256M",
                                            "--wakeup"}));
    std::string port = target.read_line("BOOTSTRAP_PORT=");
    ASSERT_FALSE(port.empty()) << "target did not start its bootstrap";
    ASSERT_NO_FATAL_FAILURE(spawn(&check, {"check", "--bootstrap", "127.0.0.1:" + port, "--bytes", "256M", "--seed", "7"}));
    EXPECT_EQ(check.wait_exit(), 0) << "the initiator found a mismatch or an error (its stderr says which)";
    EXPECT_EQ(target.wait_exit(), 0);
}

// The same with tcp lanes on both sides (whatever GDX_TCP_LANES=auto gives on this machine).
TEST(TcpMultiProcess, TwoProcessesMoveEverySizeUpTo256MiBIntactOverLanes) {
    const std::vector<std::string> lanes = {"GDX_TCP_LANES=4", "GDX_TCP_STRIPE_MIN=64K"};
    Child target, check;
    ASSERT_NO_FATAL_FAILURE(spawn(&target, {"target", "--listen", "--bootstrap", "127.0.0.1:0", "--bytes", "256M",
                                            "--wakeup"}, lanes));
    std::string port = target.read_line("BOOTSTRAP_PORT=");
    ASSERT_FALSE(port.empty()) << "target did not start its bootstrap";
    ASSERT_NO_FATAL_FAILURE(
        spawn(&check, {"check", "--bootstrap", "127.0.0.1:" + port, "--bytes", "256M", "--seed", "9"}, lanes));
    EXPECT_EQ(check.wait_exit(), 0) << "the initiator found a mismatch or an error (its stderr says which)";
    EXPECT_EQ(target.wait_exit(), 0);
}

namespace {

// This process as the initiator against a spawned target of `bytes`.
struct AgainstTarget {
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<tp::Endpoint> ep;
    std::vector<uint8_t> buf;
    std::unique_ptr<tp::MemHandle> mh;
    PeerBlob peer;
    Child target;

    void start(const Config &cfg, const std::string &bytes, size_t local_bytes,
               const std::vector<std::string> &target_env = {}) {
        ASSERT_EQ(tp::tcp::open_iface(cfg, &iface), GDX_OK);
        buf.assign(local_bytes, 0x5a);
        ASSERT_EQ(iface->md().mem_reg(buf.data(), buf.size(), mem::MemInfo{}, tp::kAccessAll, &mh), GDX_OK);
        ASSERT_EQ(iface->ep_create(&ep), GDX_OK);
        tp::Bootstrap::Options opt;
        opt.size = 2;
        opt.timeout = std::chrono::seconds(60);
        std::unique_ptr<tp::Bootstrap> boot;
        ASSERT_EQ(tp::Bootstrap::listen(opt, &boot), GDX_OK);
        ASSERT_NO_FATAL_FAILURE(spawn(&target, {"target", "--bootstrap", "127.0.0.1:" + std::to_string(boot->port()),
                                                "--bytes", bytes}, target_env));
        std::vector<std::vector<uint8_t>> all;
        ASSERT_EQ(boot->allgather(make_blob(*ep, *mh), &all), GDX_OK);
        ASSERT_EQ(parse_blob(*iface, all[1], ep->address().size(), &peer), GDX_OK);
        gdx_status_t st = ep->connect(peer.address);
        ASSERT_TRUE(st == GDX_OK || st == GDX_INPROGRESS);
        ASSERT_TRUE(progress_until({iface.get()}, [&] { return ep->state() != GDX_INPROGRESS; }));
        ASSERT_EQ(ep->state(), GDX_OK);
        ASSERT_EQ(boot->barrier(), GDX_OK);
    }
    // Lanes open on the first large put: one put of `len`, completed, and then every agreed lane up.
    void open_lanes(size_t len) {
        Waiter w;
        ASSERT_EQ(ep->put(buf.data(), len, mh.get(), peer.addr, *peer.rkey, &w), GDX_INPROGRESS);
        const auto &tep = dynamic_cast<const tp::tcp::TcpEndpoint &>(*ep);
        ASSERT_GT(tep.lane_count(), 0u);
        ASSERT_TRUE(progress_until({iface.get()}, [&] { return w.done() && tep.lanes_up() == tep.lane_count(); }));
        ASSERT_EQ(w.status, GDX_OK);
    }
    // Lanes up, the target stopped (SIGSTOP), then a put of the whole buffer: stripes in flight, none can land.
    void stop_target_and_put_striped(Waiter *put) {
        ASSERT_NO_FATAL_FAILURE(open_lanes(1u << 20));
        ASSERT_EQ(kill(target.pid, SIGSTOP), 0);
        ASSERT_EQ(ep->put(buf.data(), buf.size(), mh.get(), peer.addr, *peer.rkey, put), GDX_INPROGRESS);
        ASSERT_GT(dynamic_cast<const tp::tcp::TcpEndpoint &>(*ep).stripes_issued(), 0u);
    }
};

const Config::Overrides kLanes = {{"GDX_TCP_LANES", "4"}, {"GDX_TCP_STRIPE_MIN", "64K"}};
const std::vector<std::string> kLanesEnv = {"GDX_TCP_LANES=4", "GDX_TCP_STRIPE_MIN=64K"};

} // namespace

TEST(TcpMultiProcess, PeerKilledMidTransferFailsOutstandingOperations) {
    AgainstTarget t;
    ASSERT_NO_FATAL_FAILURE(t.start(Config::defaults(), "256M", 256u << 20));
    // Stop the target first so the 256 MiB put is certainly in the middle when the target dies: its socket
    // buffers fill and the transfer stalls part-way.
    ASSERT_EQ(kill(t.target.pid, SIGSTOP), 0);
    Waiter put, get;
    ASSERT_EQ(t.ep->put(t.buf.data(), t.buf.size(), t.mh.get(), t.peer.addr, *t.peer.rkey, &put), GDX_INPROGRESS);
    ASSERT_EQ(t.ep->get(t.buf.data(), 4096, t.mh.get(), t.peer.addr, *t.peer.rkey, &get), GDX_INPROGRESS);
    progress_until({t.iface.get()}, [] { return false; }, std::chrono::milliseconds(200));
    EXPECT_FALSE(put.done()) << "the put finished although its target is stopped";
    ASSERT_EQ(kill(t.target.pid, SIGKILL), 0);
    ASSERT_TRUE(progress_until({t.iface.get()}, [&] { return put.done() && get.done(); }))
        << "operations still outstanding after the peer died";
    EXPECT_NE(put.status, GDX_OK);
    EXPECT_NE(get.status, GDX_OK);
    EXPECT_EQ(put.status, GDX_ERR_CONNECTION_RESET) << gdx_status_string(put.status);
    EXPECT_NE(t.ep->state(), GDX_OK);
    EXPECT_EQ(t.target.wait_exit(), 128 + SIGKILL);
}

// Killed while stripes are in flight on the lanes: the lanes see the reset, the endpoint fails, the put
// completes with the error.
TEST(TcpMultiProcess, PeerKilledMidStripedTransferFailsOutstandingOperations) {
    AgainstTarget t;
    ASSERT_NO_FATAL_FAILURE(t.start(config_with(kLanes), "256M", 256u << 20, kLanesEnv));
    Waiter put;
    ASSERT_NO_FATAL_FAILURE(t.stop_target_and_put_striped(&put));
    progress_until({t.iface.get()}, [] { return false; }, std::chrono::milliseconds(200));
    EXPECT_FALSE(put.done()) << "the put finished although its target is stopped";
    ASSERT_EQ(kill(t.target.pid, SIGKILL), 0);
    ASSERT_TRUE(progress_until({t.iface.get()}, [&] { return put.done(); }))
        << "a striped put still outstanding after the peer died";
    EXPECT_EQ(put.status, GDX_ERR_CONNECTION_RESET) << gdx_status_string(put.status);
    EXPECT_NE(t.ep->state(), GDX_OK);
    EXPECT_EQ(t.target.wait_exit(), 128 + SIGKILL);
}

// Stopped (no reset ever comes) while stripes are in flight, with GDX_PEER_SILENCE_TIMEOUT set: the lanes' or the
// connection's silence clock ends it.
TEST(TcpMultiProcess, StoppedPeerIsDeclaredDeadOnTheLanesBySilenceTimeout) {
    Config::Overrides ov = kLanes;
    ov["GDX_PEER_SILENCE_TIMEOUT"] = "1s";
    AgainstTarget t;
    ASSERT_NO_FATAL_FAILURE(t.start(config_with(ov), "64M", 64u << 20, kLanesEnv));
    Waiter put;
    ASSERT_NO_FATAL_FAILURE(t.stop_target_and_put_striped(&put));
    ASSERT_TRUE(progress_until({t.iface.get()}, [&] { return put.done(); })) << "a silent peer was never declared dead";
    EXPECT_EQ(put.status, GDX_ERR_TIMEOUT) << gdx_status_string(put.status);
    kill(t.target.pid, SIGKILL);
    EXPECT_EQ(t.target.wait_exit(), 128 + SIGKILL);
}

TEST(TcpMultiProcess, StoppedPeerIsDeclaredDeadBySilenceTimeoutNotOnlyByReset) {
    AgainstTarget t;
    ASSERT_NO_FATAL_FAILURE(t.start(config_with({{"GDX_PEER_SILENCE_TIMEOUT", "1s"}}), "64M", 64u << 20));
    // SIGSTOP: the peer's kernel keeps the connection open and acknowledges what fits; no RST ever comes.
    ASSERT_EQ(kill(t.target.pid, SIGSTOP), 0);
    Waiter put;
    ASSERT_EQ(t.ep->put(t.buf.data(), t.buf.size(), t.mh.get(), t.peer.addr, *t.peer.rkey, &put), GDX_INPROGRESS);
    ASSERT_TRUE(progress_until({t.iface.get()}, [&] { return put.done(); }))
        << "a silent peer was never declared dead";
    EXPECT_EQ(put.status, GDX_ERR_TIMEOUT) << gdx_status_string(put.status);
    kill(t.target.pid, SIGKILL);
    EXPECT_EQ(t.target.wait_exit(), 128 + SIGKILL);
}

// A peer that does not progress (stopped here, like a rank computing for minutes) is alive while its kernel
// answers: without GDX_PEER_SILENCE_TIMEOUT its puts wait, for several GDX_PEER_TIMEOUTs, its receive window
// closed, and complete once it runs again; nothing is declared dead. Plain puts and striped ones.
TEST(TcpMultiProcess, StoppedPeerIsNotDeclaredDeadAndItsPutsCompleteWhenItResumes) {
    for (bool striped : {false, true}) {
        SCOPED_TRACE(striped ? "striped over lanes" : "one connection");
        Config::Overrides ov = striped ? kLanes : Config::Overrides{};
        ov["GDX_PEER_TIMEOUT"] = "1s";
        AgainstTarget t;
        ASSERT_NO_FATAL_FAILURE(t.start(config_with(ov), "64M", 64u << 20,
                                        striped ? kLanesEnv : std::vector<std::string>{}));
        Waiter put;
        if (striped) {
            ASSERT_NO_FATAL_FAILURE(t.stop_target_and_put_striped(&put));
        } else {
            ASSERT_EQ(kill(t.target.pid, SIGSTOP), 0);
            ASSERT_EQ(t.ep->put(t.buf.data(), t.buf.size(), t.mh.get(), t.peer.addr, *t.peer.rkey, &put),
                      GDX_INPROGRESS);
        }
        progress_until({t.iface.get()}, [&] { return put.done(); }, std::chrono::milliseconds(3500));
        EXPECT_FALSE(put.done()) << "a put to a stopped peer ended: " << gdx_status_string(put.status);
        EXPECT_EQ(t.ep->state(), GDX_OK) << "a stopped but live peer was declared dead";
        ASSERT_EQ(kill(t.target.pid, SIGCONT), 0);
        ASSERT_TRUE(progress_until({t.iface.get()}, [&] { return put.done(); })) << "the put never completed";
        EXPECT_EQ(put.status, GDX_OK) << gdx_status_string(put.status);
        EXPECT_EQ(t.ep->state(), GDX_OK);
        kill(t.target.pid, SIGKILL);
        EXPECT_EQ(t.target.wait_exit(), 128 + SIGKILL);
    }
}

TEST(Bootstrap, AllgatherAmongFourProcessesAndClearTimeouts) {
    // Rank 0 here; three spawned peers would need a bootstrap-only role, so this uses threads for ranks 1..3
    // (each its own io_context and sockets, as separate processes would have).
    tp::Bootstrap::Options opt;
    opt.size = 4;
    opt.timeout = std::chrono::seconds(60);
    std::unique_ptr<tp::Bootstrap> root;
    ASSERT_EQ(tp::Bootstrap::listen(opt, &root), GDX_OK);
    std::vector<std::thread> threads;
    std::vector<std::vector<std::vector<uint8_t>>> seen(4);
    for (int i = 1; i < 4; ++i)
        threads.emplace_back([&, i] {
            tp::Bootstrap::Options o;
            o.port = root->port();
            o.timeout = std::chrono::seconds(60);
            std::unique_ptr<tp::Bootstrap> b;
            ASSERT_EQ(tp::Bootstrap::join(o, &b), GDX_OK);
            std::vector<uint8_t> mine(static_cast<size_t>(b->rank()) * 1000, static_cast<uint8_t>(b->rank()));
            ASSERT_EQ(b->allgather(mine, &seen[b->rank()]), GDX_OK);
            ASSERT_EQ(b->barrier(), GDX_OK);
        });
    ASSERT_EQ(root->allgather({}, &seen[0]), GDX_OK);
    ASSERT_EQ(root->barrier(), GDX_OK);
    for (auto &t : threads) t.join();
    for (int r = 0; r < 4; ++r) {
        ASSERT_EQ(seen[r].size(), 4u) << r;
        for (int k = 0; k < 4; ++k)
            EXPECT_EQ(seen[r][k], std::vector<uint8_t>(static_cast<size_t>(k) * 1000, static_cast<uint8_t>(k)));
    }
    // Nobody listening: a clear timeout, bounded.
    tp::Bootstrap::Options lonely;
    lonely.port = root->port(); // closed after everyone joined
    lonely.timeout = std::chrono::milliseconds(300);
    std::unique_ptr<tp::Bootstrap> b;
    EXPECT_EQ(tp::Bootstrap::join(lonely, &b), GDX_ERR_TIMEOUT);
    EXPECT_NE(last_error().find("could not reach rank 0"), std::string::npos) << last_error();
    // Rank 0 waiting for processes that never come.
    tp::Bootstrap::Options wait3;
    wait3.size = 3;
    wait3.timeout = std::chrono::milliseconds(300);
    std::unique_ptr<tp::Bootstrap> r0;
    ASSERT_EQ(tp::Bootstrap::listen(wait3, &r0), GDX_OK);
    std::vector<std::vector<uint8_t>> out;
    EXPECT_EQ(r0->barrier(), GDX_ERR_TIMEOUT);
    EXPECT_NE(last_error().find("1 of 3 processes joined"), std::string::npos) << last_error();
    // mpirun variables malformed or absent.
    unsetenv("OMPI_COMM_WORLD_RANK");
    EXPECT_EQ(tp::Bootstrap::from_env("127.0.0.1", 1, std::chrono::seconds(1), &b), GDX_ERR_NOT_FOUND);
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    EXPECT_EQ(tp::Bootstrap::from_env("127.0.0.1", 1, std::chrono::seconds(1), &b), GDX_ERR_INVALID_PARAM);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
}
