// Issue 16 through the public C API, two contexts in this process over tcp and shm: registration of memory the
// process cannot access is refused with GDX_ERR_INVALID_ADDR and the cause; memory that goes away after
// registration fails the peer's request, not the process; a target that destroys its endpoint, or stops
// progressing, fails the initiator's staged requests within GDX_PEER_SILENCE_TIMEOUT + 1 s; every error has a reason.
#include "core/log.h"
#include "gdx/gdx.h"
#include "transport/transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace gdx::test {
namespace {

using Clock = std::chrono::steady_clock;

bool have(const char *tl) { return tp::find_component(tl) != nullptr; }

size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// An anonymous mapping the test can mprotect and unmap.
struct Map {
    uint8_t *p = nullptr;
    size_t n = 0;
    explicit Map(size_t bytes) : n(bytes) {
        void *v = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(v, MAP_FAILED);
        p = static_cast<uint8_t *>(v);
        std::memset(p, 0x5a, n);
    }
    ~Map() {
        if (p) munmap(p, n);
    }
    // Replaces [off, off+len) by an inaccessible mapping: the address stays reserved (nothing else lands there)
    // and every access faults — what "unmapped after registration" looks like to the copy.
    void revoke(size_t off, size_t len) {
        void *v = mmap(p + off, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        EXPECT_EQ(v, p + off);
    }
};

std::string last() { return gdx_last_error(); }

struct Buffers {
    std::vector<uint8_t> a, b;
    gdx_mem_t *ma = nullptr, *mb = nullptr;
    gdx_rkey_t *k = nullptr; // side 0's key of side 1's buffer
};

class Pair : public ::testing::TestWithParam<const char *> {

  protected:
    gdx_context_t *c[2] = {};
    gdx_ep_t *e[2] = {};

    void SetUp() override {
        if (!have(GetParam())) GTEST_SKIP() << "no " << GetParam() << " transport in this build";
    }
    void open(std::vector<std::pair<const char *, const char *>> extra = {}) {
        for (int i = 0; i < 2; ++i) {
            gdx_config_t *cfg = nullptr;
            ASSERT_EQ(gdx_config_create(&cfg), GDX_OK);
            ASSERT_EQ(gdx_config_set(cfg, "GDX_TLS", GetParam()), GDX_OK);
            ASSERT_EQ(gdx_config_set(cfg, "GDX_TCP_LANES", "0"), GDX_OK); // no helper threads: a side that
            for (auto [k, v] : extra) ASSERT_EQ(gdx_config_set(cfg, k, v), GDX_OK) << k; // stops progressing stops
            ASSERT_EQ(gdx_context_create(cfg, &c[i]), GDX_OK) << last();
            gdx_config_destroy(cfg);
            ASSERT_EQ(gdx_ep_create(c[i], &e[i]), GDX_OK) << last();
        }
        for (int i = 0; i < 2; ++i) {
            size_t n = 0;
            ASSERT_EQ(gdx_ep_address(e[1 - i], nullptr, &n), GDX_OK);
            std::vector<uint8_t> a(n);
            ASSERT_EQ(gdx_ep_address(e[1 - i], a.data(), &n), GDX_OK);
            ASSERT_EQ(gdx_ep_connect(e[i], a.data(), a.size()), GDX_OK) << last();
        }
        ASSERT_TRUE(run([&] { return gdx_ep_state(e[0]) != GDX_INPROGRESS && gdx_ep_state(e[1]) != GDX_INPROGRESS; }));
        ASSERT_EQ(gdx_ep_state(e[0]), GDX_OK) << last();
    }
    gdx_rkey_t *key_for(int side, gdx_mem_t *m) { // side's key of the other side's registration m
        size_t n = 0;
        EXPECT_EQ(gdx_mem_pack(m, nullptr, &n), GDX_OK);
        std::vector<uint8_t> k(n);
        EXPECT_EQ(gdx_mem_pack(m, k.data(), &n), GDX_OK);
        gdx_rkey_t *r = nullptr;
        EXPECT_EQ(gdx_rkey_unpack(e[side], k.data(), k.size(), &r), GDX_OK) << last();
        return r;
    }
    // Progresses both contexts (or only c[0]: `peer` false) until done() or `limit` passes.
    template <typename F> bool run(F done, std::chrono::milliseconds limit = std::chrono::seconds(20), bool peer = true) {
        auto end = Clock::now() + limit;
        while (!done() && Clock::now() < end) {
            gdx_progress(c[0]);
            if (peer && c[1]) gdx_progress(c[1]);
        }
        return done();
    }
    // A log file of the test's own (GDX_LOG_FILE for open()), empty to begin with.
    std::string log_file(const char *what) const {
        std::string path = testing::TempDir() + "/gdx_" + what + "_" + GetParam() + ".log";
        std::remove(path.c_str());
        return path;
    }
    // `n` bytes on each side, registered with every right, and side 0's key of side 1's.
    void buffers(size_t n, Buffers *bf) {
        bf->a.assign(n, 1);
        bf->b.assign(n, 2);
        ASSERT_EQ(gdx_mem_reg(c[0], bf->a.data(), n, GDX_ACCESS_ALL, &bf->ma), GDX_OK) << last();
        ASSERT_EQ(gdx_mem_reg(c[1], bf->b.data(), n, GDX_ACCESS_ALL, &bf->mb), GDX_OK) << last();
        bf->k = key_for(0, bf->mb);
    }

  public:
    gdx_rkey_t *key(int side, gdx_mem_t *m) { return key_for(side, m); }
    template <typename F> bool go(F done, std::chrono::milliseconds limit, bool peer) { return run(done, limit, peer); }

  protected:
    void TearDown() override {
        for (int i = 0; i < 2; ++i) {
            if (e[i]) {
                gdx_status_t st = GDX_ERR_BUSY;
                for (auto end = Clock::now() + std::chrono::seconds(15); Clock::now() < end;) {
                    if ((st = gdx_ep_destroy(e[i])) != GDX_ERR_BUSY) break;
                    for (gdx_context_t *ctx : c)
                        if (ctx) gdx_progress(ctx);
                }
                EXPECT_EQ(st, GDX_OK) << last();
            }
        }
        for (gdx_context_t *&ctx : c) {
            if (ctx) gdx_context_destroy(ctx);
            ctx = nullptr;
        }
    }
};

// ---- class 1: registration checks -------------------------------------------------------------------------------

TEST_P(Pair, RegistrationRefusesMemoryTheProcessCannotAccess) {
    open();
    const size_t ps = page();
    gdx_mem_t *m = nullptr;
    auto refused = [&](void *addr, size_t len, unsigned access, const char *cause) {
        SCOPED_TRACE(cause);
        EXPECT_EQ(gdx_mem_reg(c[0], addr, len, access, &m), GDX_ERR_INVALID_ADDR) << last();
        EXPECT_NE(last().find(cause), std::string::npos) << last();
    };
    for (size_t len : {ps, 16 * ps, size_t(4) << 20}) { // below and above the probe's VMA-query threshold
        SCOPED_TRACE(len);
        Map unmapped(len + ps);
        munmap(unmapped.p, unmapped.n);
        refused(unmapped.p, len, GDX_ACCESS_ALL, "not (entirely) mapped");
        unmapped.p = nullptr;

        Map none(len);
        mprotect(none.p, len, PROT_NONE);
        refused(none.p, len, GDX_ACCESS_REMOTE_READ, "inaccessible");

        Map part(len + ps); // the last page PROT_NONE
        mprotect(part.p + len, ps, PROT_NONE);
        refused(part.p + ps / 2, len, GDX_ACCESS_ALL, "inaccessible");
        EXPECT_EQ(gdx_mem_reg(c[0], part.p, len, GDX_ACCESS_ALL, &m), GDX_OK) << "the accessible part";
        EXPECT_EQ(gdx_mem_dereg(m), GDX_OK);

        Map ro(len);
        mprotect(ro.p, len, PROT_READ);
        refused(ro.p, len, GDX_ACCESS_REMOTE_WRITE, "read-only");
        refused(ro.p, len, GDX_ACCESS_LOCAL_WRITE, "read-only");
        ASSERT_EQ(gdx_mem_reg(c[0], ro.p, len, GDX_ACCESS_REMOTE_READ | GDX_ACCESS_LOCAL_READ, &m), GDX_OK) << last();
        EXPECT_EQ(gdx_mem_dereg(m), GDX_OK);
    }
    refused(reinterpret_cast<void *>(0xffff800000000000ull), 4096, GDX_ACCESS_ALL, "not a user-space address");
    refused(reinterpret_cast<void *>(0x00007ffffffff000ull), 1ull << 40, GDX_ACCESS_ALL, "not");
}

// Memory that goes away after registration: the peer's put and get into it fail with a reason; the process
// survives, and the endpoint carries the next request. Direct (the transports' target paths: shm ring copies, tcp
// recv/send) and staged (the staging target's copy-outs, stage-outs and small-message copies).
void revoked(Pair &t, gdx_context_t **c, gdx_ep_t **e) {
    const size_t ps = page();
    Map src(64 * ps), dst(64 * ps);
    gdx_mem_t *ms = nullptr, *md = nullptr;
    ASSERT_EQ(gdx_mem_reg(c[0], src.p, src.n, GDX_ACCESS_ALL, &ms), GDX_OK) << last();
    ASSERT_EQ(gdx_mem_reg(c[1], dst.p, dst.n, GDX_ACCESS_ALL, &md), GDX_OK) << last();
    gdx_rkey_t *k = t.key(0, md);
    dst.revoke(0, 16 * ps);
    for (size_t len : {size_t(1000), 8 * ps}) { // the small-message path and the pipeline when staged
        for (bool put : {true, false}) {
            SCOPED_TRACE(std::string(put ? "put " : "get ") + std::to_string(len));
            gdx_request_t *r = nullptr;
            ASSERT_EQ(put ? gdx_put(e[0], ms, 0, k, ps, len, &r) : gdx_get(e[0], ms, 0, k, ps, len, &r), GDX_OK)
                << last();
            ASSERT_TRUE(t.go([&] { return gdx_request_test(r) != GDX_INPROGRESS; }, std::chrono::seconds(10), true));
            EXPECT_NE(gdx_request_test(r), GDX_OK);
            EXPECT_STRNE(gdx_request_error(r), "") << "an error status comes with its reason";
            gdx_request_free(r);
            // The endpoint goes on: a put into the part still mapped lands.
            std::memset(src.p, int(len & 0xff), 4 * ps);
            ASSERT_EQ(gdx_put(e[0], ms, 0, k, 32 * ps, 4 * ps, &r), GDX_OK) << last();
            ASSERT_TRUE(t.go([&] { return gdx_request_test(r) != GDX_INPROGRESS; }, std::chrono::seconds(10), true));
            EXPECT_EQ(gdx_request_test(r), GDX_OK) << gdx_request_error(r);
            EXPECT_STREQ(gdx_request_error(r), "");
            EXPECT_EQ(dst.p[32 * ps + 7], uint8_t(len & 0xff));
            gdx_request_free(r);
            EXPECT_EQ(gdx_ep_state(e[0]), GDX_OK);
        }
    }
    gdx_rkey_destroy(k);
    EXPECT_EQ(gdx_mem_dereg(ms), GDX_OK);
    EXPECT_EQ(gdx_mem_dereg(md), GDX_OK);
}

TEST_P(Pair, MemoryRevokedAfterRegistrationFailsTheRequestNotTheProcess) {
    open();
    revoked(*this, c, e);
}

TEST_P(Pair, MemoryRevokedAfterRegistrationFailsTheStagedRequestNotTheProcess) {
    open({{"GDX_FAULT_P2P_EVERY", "1"}, {"GDX_FRAG_SIZE", "host:16K"}});
    revoked(*this, c, e);
}

// ---- classes 3 and 4: a target that goes away or stops never leaves staged requests hanging -------------------

// Staged on both sides (GDX_FAULT_P2P_EVERY=1): every fragment waits on the peer for credits and copy-outs.
const std::vector<std::pair<const char *, const char *>> kStaged = {
    {"GDX_FAULT_P2P_EVERY", "1"}, {"GDX_PEER_SILENCE_TIMEOUT", "2s"}, {"GDX_FRAG_SIZE", "host:64K"}};
constexpr auto kBound = std::chrono::seconds(3); // GDX_PEER_SILENCE_TIMEOUT + 1 s

TEST_P(Pair, TargetDestroyingItsEndpointFailsTheInitiatorsStagedPutsPromptly) {
    open(kStaged);
    std::vector<uint8_t> a(4 << 20, 1), b(4 << 20, 2);
    gdx_mem_t *ma = nullptr, *mb = nullptr;
    ASSERT_EQ(gdx_mem_reg(c[0], a.data(), a.size(), GDX_ACCESS_ALL, &ma), GDX_OK) << last();
    ASSERT_EQ(gdx_mem_reg(c[1], b.data(), b.size(), GDX_ACCESS_ALL, &mb), GDX_OK) << last();
    gdx_rkey_t *k = key_for(0, mb);
    gdx_request_t *put = nullptr, *get = nullptr;
    ASSERT_EQ(gdx_put(e[0], ma, 0, k, 0, a.size(), &put), GDX_OK) << last();
    ASSERT_EQ(gdx_get(e[0], ma, 0, k, 0, 1 << 20, &get), GDX_OK) << last();
    // The target destroys its endpoint before it ever progressed: nothing of its own uses it.
    ASSERT_EQ(gdx_ep_destroy(e[1]), GDX_OK) << last();
    e[1] = nullptr;
    auto t0 = Clock::now();
    ASSERT_TRUE(run([&] { return gdx_request_test(put) != GDX_INPROGRESS && gdx_request_test(get) != GDX_INPROGRESS; },
                    std::chrono::seconds(10)))
        << "the initiator's staged requests still hang after 10 s";
    EXPECT_LT(Clock::now() - t0, kBound);
    for (gdx_request_t *r : {put, get}) {
        EXPECT_TRUE(gdx_request_test(r) == GDX_ERR_CONNECTION_RESET || gdx_request_test(r) == GDX_ERR_TIMEOUT)
            << gdx_status_string(gdx_request_test(r));
        EXPECT_STRNE(gdx_request_error(r), "");
        gdx_request_free(r);
    }
    gdx_rkey_destroy(k);
    EXPECT_EQ(gdx_mem_dereg(ma), GDX_OK) << last();
    EXPECT_EQ(gdx_mem_dereg(mb), GDX_OK) << last();
}

// The target stops (as under SIGSTOP: it never progresses again; no helper threads, GDX_TCP_LANES=0), before the
// initiator posts, or after part of the transfer. Every staged request fails with GDX_ERR_TIMEOUT within
// GDX_PEER_SILENCE_TIMEOUT + 1 s, with a reason; then the initiator's endpoint and memory are released.
void stopped_target(Pair &t, gdx_context_t **c, gdx_ep_t **e, int warm) {
    std::vector<uint8_t> a(2 << 20, 1), b(2 << 20, 2);
    gdx_mem_t *ma = nullptr, *mb = nullptr;
    ASSERT_EQ(gdx_mem_reg(c[0], a.data(), a.size(), GDX_ACCESS_ALL, &ma), GDX_OK) << last();
    ASSERT_EQ(gdx_mem_reg(c[1], b.data(), b.size(), GDX_ACCESS_ALL, &mb), GDX_OK) << last();
    gdx_rkey_t *k = t.key(0, mb);
    std::vector<gdx_request_t *> reqs;
    for (int i = 0; i < 8; ++i) {
        gdx_request_t *r = nullptr;
        size_t off = size_t(i) * (256 << 10);
        ASSERT_EQ(i % 2 ? gdx_get(e[0], ma, off, k, off, 256 << 10, &r) : gdx_put(e[0], ma, off, k, off, 256 << 10, &r),
                  GDX_OK)
            << last();
        reqs.push_back(r);
    }
    for (int i = 0; i < warm; ++i) { // part of the transfer with the target alive
        gdx_progress(c[0]);
        gdx_progress(c[1]);
    }
    auto t0 = Clock::now();
    bool all_done = t.go(
        [&] {
            for (gdx_request_t *r : reqs)
                if (gdx_request_test(r) == GDX_INPROGRESS) return false;
            return true;
        },
        std::chrono::seconds(10), /*peer=*/false);
    ASSERT_TRUE(all_done) << "staged requests to a stopped peer still hang after 10 s";
    EXPECT_LT(Clock::now() - t0, kBound);
    for (gdx_request_t *r : reqs) {
        gdx_status_t st = gdx_request_test(r);
        if (st != GDX_OK) { // some may have finished before the stop
            EXPECT_EQ(st, GDX_ERR_TIMEOUT) << gdx_request_error(r);
            EXPECT_NE(std::string(gdx_request_error(r)).find("silent"), std::string::npos) << gdx_request_error(r);
        }
        gdx_request_free(r);
    }
    gdx_rkey_destroy(k);
    EXPECT_EQ(gdx_mem_dereg(ma), GDX_OK) << last(); // released: not BUSY forever
    // The target resumes: its own copy-outs finish (their answers go nowhere) and its memory is released.
    gdx_status_t st = GDX_ERR_BUSY;
    for (auto end = Clock::now() + kBound; st == GDX_ERR_BUSY && Clock::now() < end;) {
        gdx_progress(c[1]);
        st = gdx_mem_dereg(mb);
    }
    EXPECT_EQ(st, GDX_OK) << last();
}

// The target stops (as under SIGSTOP: it never progresses again; no helper threads, GDX_TCP_LANES=0), before the
// initiator posts, or after part of the transfer. Every staged request fails with GDX_ERR_TIMEOUT within
// GDX_PEER_SILENCE_TIMEOUT + 1 s, with a reason; then the initiator's endpoint and memory are released.
TEST_P(Pair, StoppedTargetIsDeclaredDeadOnTheStagedPathBeforeThePost) {
    open(kStaged);
    stopped_target(*this, c, e, 0);
}

TEST_P(Pair, StoppedTargetIsDeclaredDeadOnTheStagedPathMidTransfer) {
    open(kStaged);
    stopped_target(*this, c, e, 5);
}

// A retry loop on a retryable BUSY writes no log line at ERROR (it wrote 1.3 M lines in 3 s), and the reason
// is still there for the caller.
TEST_P(Pair, RetryableBusyIsNotLoggedAsAnError) {
    std::string path = log_file("busy");
    open({{"GDX_LOG_FILE", path.c_str()}});
    Buffers bf;
    ASSERT_NO_FATAL_FAILURE(buffers(1 << 20, &bf));
    gdx_request_t *r = nullptr;
    ASSERT_EQ(gdx_put(e[0], bf.ma, 0, bf.k, 0, bf.a.size(), &r), GDX_OK) << last();
    for (int i = 0; i < 20000; ++i) {
        ASSERT_EQ(gdx_mem_dereg(bf.ma), GDX_ERR_BUSY);
        ASSERT_EQ(gdx_ep_destroy(e[0]), GDX_ERR_BUSY);
    }
    EXPECT_NE(last().find("still"), std::string::npos) << last();
    ASSERT_TRUE(run([&] { return gdx_request_test(r) != GDX_INPROGRESS; }));
    EXPECT_EQ(gdx_request_test(r), GDX_OK) << gdx_request_error(r);
    gdx_request_free(r);
    gdx_rkey_destroy(bf.k);
    EXPECT_EQ(gdx_mem_dereg(bf.ma), GDX_OK);
    EXPECT_EQ(gdx_mem_dereg(bf.mb), GDX_OK);
    FILE *f = std::fopen(path.c_str(), "r");
    size_t lines = 0;
    if (f) {
        for (int ch; (ch = std::fgetc(f)) != EOF;) lines += ch == '\n';
        std::fclose(f);
    }
    EXPECT_LT(lines, 100u) << "a retry loop filled " << path;
}

// Requests the target refuses (here: a key whose registration is gone) are logged at WARN once per peer and
// status, with the cause, then at debug: both transports through the one helper (transport/refusal_log.h). Each
// request still fails with its reason.
TEST_P(Pair, RefusedRequestsAreLoggedAtWarnOncePerPeer) {
    std::string path = log_file("refused");
    log::reset_once_keys(); // over shm both sides are this process: earlier tests' refusals name the same pid
    open({{"GDX_LOG_FILE", path.c_str()}});
    Buffers bf;
    ASSERT_NO_FATAL_FAILURE(buffers(1 << 20, &bf));
    ASSERT_EQ(gdx_mem_dereg(bf.mb), GDX_OK); // the key now opens nothing at the target
    for (int i = 0; i < 40; ++i) {
        gdx_request_t *r = nullptr;
        size_t off = size_t(i) * 4096;
        size_t len = 1000 + size_t(i);
        ASSERT_EQ(i % 2 ? gdx_get(e[0], bf.ma, off, bf.k, off, len, &r) : gdx_put(e[0], bf.ma, off, bf.k, off, len, &r),
                  GDX_OK)
            << last();
        ASSERT_TRUE(run([&] { return gdx_request_test(r) != GDX_INPROGRESS; }));
        EXPECT_EQ(gdx_request_test(r), GDX_ERR_ACCESS_DENIED) << gdx_request_error(r);
        EXPECT_STRNE(gdx_request_error(r), "");
        gdx_request_free(r);
    }
    gdx_rkey_destroy(bf.k);
    EXPECT_EQ(gdx_mem_dereg(bf.ma), GDX_OK);
    std::ifstream f(path);
    size_t refused = 0, failed = 0;
    for (std::string line; std::getline(f, line);) {
        if (line.find(" WARN ") == std::string::npos) continue;
        refused += line.find("refused") != std::string::npos;
        failed += line.find("failed at") != std::string::npos;
    }
    EXPECT_EQ(refused, 1u) << "the target's WARN lines for 40 refused requests (" << path << ")";
    EXPECT_LE(failed, 1u) << "the initiator's WARN lines for 40 failed requests (" << path << ")";
}

INSTANTIATE_TEST_SUITE_P(Tl, Pair, ::testing::Values("tcp", "shm"));

} // namespace
} // namespace gdx::test
