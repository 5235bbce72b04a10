// gdx_put_notify / gdx_ep_notify_poll through the C API, two contexts in this process, host memory, over tcp and
// shm, with gdx's own choice of path, everything staged (GDX_FAULT_P2P_EVERY=1) and mixed (every other fragment
// staged): each value is seen only once its put's bytes are in the buffer (checked when it is seen), in issue
// order, small and large; a put that fails delivers nothing; the request behaves as gdx_put's.
#include "capi_pair.h"

#include <cstring>
#include <string>
#include <tuple>

namespace gdx::test {
namespace {

struct Put {
    size_t soff, doff, len;
    uint64_t value;
    gdx_request_t *req = nullptr;
};

// Puts of these sizes laid one after the other (64 bytes apart) in both buffers, values 1000, 1001, ...
std::vector<Put> plan(std::initializer_list<size_t> sizes) {
    std::vector<Put> v;
    size_t at = 1;
    for (size_t len : sizes) {
        v.push_back({at + 7, at, len, 1000 + v.size()});
        at += len + 64;
    }
    return v;
}

using Param = std::tuple<std::string, std::string>; // transport, path mode

class NotifyApi : public CApiPair, public ::testing::WithParamInterface<Param> {
  protected:
    void SetUp() override {
        CApiPair::SetUp();
        if (IsSkipped()) return;
        const std::string &tl = std::get<0>(GetParam());
        if (tp::find_component(tl) == nullptr) GTEST_SKIP() << "no " << tl << " transport in this build";
    }
    Settings mode() const {
        const std::string &m = std::get<1>(GetParam());
        if (m == "staged") return {{"GDX_FAULT_P2P_EVERY", "1"}};
        if (m == "mixed") return {{"GDX_FAULT_P2P_EVERY", "2"}, {"GDX_FRAG_SIZE", "host:64K"}};
        return {};
    }
    void open_pair() { ASSERT_NO_FATAL_FAILURE(open(std::get<0>(GetParam()).c_str(), mode(), {}, 4 << 20)); }

    // Side 1 takes what arrived: each value must be the next one issued, its put's bytes already in place.
    void take(const std::vector<Put> &puts, size_t *next) {
        uint64_t v[3];
        size_t n;
        while ((n = gdx_ep_notify_poll(e[1], v, 3)) > 0) {
            for (size_t i = 0; i < n; ++i) {
                ASSERT_LT(*next, puts.size()) << "a value nobody sent: " << v[i];
                const Put &p = puts[*next];
                ASSERT_EQ(v[i], p.value) << "values out of issue order";
                ASSERT_EQ(first_mismatch(mem[1].data() + p.doff, p.len, 10, p.soff), -1)
                    << "value " << v[i] << " seen before its " << p.len << " bytes were all in the buffer";
                ++*next;
            }
        }
    }
};

TEST_P(NotifyApi, EachValueArrivesAfterItsBytesInIssueOrder) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    // Large ones first: the small ones after them complete first, and their values wait (issue order).
    std::vector<Put> puts = plan({1 << 20, 8, 1, 8192, 8193, 300000, 0, 70000, 64});
    for (Put &p : puts)
        ASSERT_EQ(gdx_put_notify(e[0], m[0], p.soff, k[0], p.doff, p.len, p.value, &p.req), GDX_OK)
            << p.len << ": " << gdx_last_error();
    size_t next = 0;
    auto all_done = [&] {
        for (const Put &p : puts)
            if (gdx_request_test(p.req) == GDX_INPROGRESS) return false;
        return next == puts.size();
    };
    for (long round = 0; round < 20000000 && !all_done(); ++round) {
        gdx_progress(c[0]);
        gdx_progress(c[1]);
        ASSERT_NO_FATAL_FAILURE(take(puts, &next));
    }
    ASSERT_TRUE(all_done()) << next << " of " << puts.size() << " values seen";
    for (Put &p : puts) {
        EXPECT_EQ(gdx_request_test(p.req), GDX_OK) << p.len << ": " << gdx_request_error(p.req);
        gdx_path_info_t info;
        ASSERT_EQ(gdx_request_path(p.req, &info), GDX_OK);
        EXPECT_EQ(info.bytes_direct + info.bytes_staged, p.len) << info.text;
        if (std::get<1>(GetParam()) == "staged") {
            EXPECT_EQ(info.bytes_direct, 0u) << info.text;
        }
        gdx_request_free(p.req);
    }
    uint64_t extra;
    EXPECT_EQ(gdx_ep_notify_poll(e[1], &extra, 1), 0u);
    EXPECT_EQ(gdx_ep_notify_poll(e[0], &extra, 1), 0u) << "the initiator was notified of its own puts";
}

TEST_P(NotifyApi, APingPongSeesEachValueOnce) {
    // put_lat's pattern in gdx_perftest: a put with notification, the peer answers with one of its own.
    ASSERT_NO_FATAL_FAILURE(open_pair());
    for (uint64_t it = 0; it < 20; ++it) {
        const size_t len = it % 2 == 0 ? 8 : 100000;
        gdx_request_t *ping = nullptr, *pong = nullptr;
        ASSERT_EQ(gdx_put_notify(e[0], m[0], 0, k[0], 0, len, it, &ping), GDX_OK) << gdx_last_error();
        uint64_t v = UINT64_MAX;
        ASSERT_TRUE(run([&] { return v != UINT64_MAX || gdx_ep_notify_poll(e[1], &v, 1) == 1; })) << "ping " << it;
        EXPECT_EQ(v, it);
        ASSERT_EQ(gdx_put_notify(e[1], m[1], 0, k[1], 0, len, v, &pong), GDX_OK) << gdx_last_error();
        v = UINT64_MAX;
        ASSERT_TRUE(run([&] { return v != UINT64_MAX || gdx_ep_notify_poll(e[0], &v, 1) == 1; })) << "pong " << it;
        EXPECT_EQ(v, it);
        ASSERT_TRUE(run([&] { return gdx_request_test(ping) != GDX_INPROGRESS && gdx_request_test(pong) != GDX_INPROGRESS; }));
        EXPECT_EQ(gdx_request_test(ping), GDX_OK);
        EXPECT_EQ(gdx_request_test(pong), GDX_OK);
        gdx_request_free(ping);
        gdx_request_free(pong);
    }
    EXPECT_EQ(first_mismatch(mem[1].data(), 100000, 10), -1) << "the pings did not land";
    EXPECT_EQ(first_mismatch(mem[0].data(), 100000, 10), -1) << "the echo brought back other bytes";
}

TEST_F(CApiPair, NotifyArgumentsAreChecked) {
    open("tcp");
    gdx_request_t *r = nullptr;
    EXPECT_EQ(gdx_put_notify(e[0], m[0], 0, k[0], (1 << 20) - 10, 11, 1, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(std::strstr(gdx_last_error(), "outside"), nullptr) << gdx_last_error();
    EXPECT_EQ(gdx_put_notify(e[0], m[0], 0, k[1], 0, 8, 1, &r), GDX_ERR_INVALID_PARAM) << "another endpoint's key";
    EXPECT_EQ(gdx_put_notify(nullptr, m[0], 0, k[0], 0, 8, 1, &r), GDX_ERR_INVALID_PARAM);
    uint64_t v;
    EXPECT_EQ(gdx_ep_notify_poll(nullptr, &v, 1), 0u);
    EXPECT_EQ(gdx_ep_notify_poll(e[0], nullptr, 4), 0u);
    EXPECT_EQ(gdx_ep_notify_poll(e[0], &v, 0), 0u);
}

// Failures: parametrized by the transport only (everything is staged, whatever the path mode would be).
class NotifyFailure : public CApiPair, public ::testing::WithParamInterface<std::string> {
  protected:
    void SetUp() override {
        CApiPair::SetUp();
        if (!IsSkipped() && tp::find_component(GetParam()) == nullptr)
            GTEST_SKIP() << "no " << GetParam() << " transport in this build";
    }
};

TEST_P(NotifyFailure, APutThatFailsDeliversNothingAndHoldsNothingBack) {
    // Staged, so the refusal is the staging engine's (a direct put into a deregistered range is the transport's
    // check: tests/transport).
    ASSERT_NO_FATAL_FAILURE(open(GetParam().c_str(), {{"GDX_FAULT_P2P_EVERY", "1"}}));
    // A registration of side 1 whose key side 0 holds, deregistered: what side 0 puts there is refused when it
    // arrives (the staging engine's check).
    std::vector<uint8_t> gone_buf(1 << 20);
    fill_pattern(gone_buf.data(), gone_buf.size(), 33);
    gdx_mem_t *gone = nullptr;
    gdx_rkey_t *gone_key = nullptr;
    ASSERT_EQ(gdx_mem_reg(c[1], gone_buf.data(), gone_buf.size(), GDX_ACCESS_ALL, &gone), GDX_OK);
    ASSERT_NO_FATAL_FAILURE(unpack(0, gone, &gone_key));
    ASSERT_EQ(gdx_mem_dereg(gone), GDX_OK);
    std::vector<Put> puts = plan({8, 8, 200000, 200000, 16});
    const bool to_gone[] = {false, true, true, false, false};
    for (size_t i = 0; i < puts.size(); ++i) {
        Put &p = puts[i];
        ASSERT_EQ(gdx_put_notify(e[0], m[0], p.soff, to_gone[i] ? gone_key : k[0], p.doff, p.len, p.value, &p.req),
                  GDX_OK);
    }
    std::vector<uint64_t> seen;
    ASSERT_TRUE(run([&] {
        uint64_t v;
        while (gdx_ep_notify_poll(e[1], &v, 1) == 1) seen.push_back(v);
        for (const Put &p : puts)
            if (gdx_request_test(p.req) == GDX_INPROGRESS) return false;
        return seen.size() >= 3;
    }));
    for (size_t i = 0; i < puts.size(); ++i) {
        EXPECT_EQ(gdx_request_test(puts[i].req), to_gone[i] ? GDX_ERR_ACCESS_DENIED : GDX_OK) << i;
        if (to_gone[i]) {
            EXPECT_STRNE(gdx_request_error(puts[i].req), "");
        }
        gdx_request_free(puts[i].req);
    }
    EXPECT_EQ(seen, (std::vector<uint64_t>{1000, 1003, 1004}));
    EXPECT_EQ(first_mismatch(gone_buf.data(), gone_buf.size(), 33), -1) << "a refused put wrote";
    gdx_rkey_destroy(gone_key);
}

TEST_P(NotifyFailure, ACopyFailureAtThePeerDeliversNothing) {
    // Every staging copy of the target fails: the puts fail there, after the data arrived, and no value is seen.
    ASSERT_NO_FATAL_FAILURE(open(GetParam().c_str(), {{"GDX_FAULT_P2P_EVERY", "1"}}, {{"GDX_FAULT_COPY_EVERY", "1"}}));
    for (size_t len : {size_t(8), size_t(300000)}) {
        gdx_request_t *r = nullptr;
        ASSERT_EQ(gdx_put_notify(e[0], m[0], 0, k[0], 0, len, 7, &r), GDX_OK);
        ASSERT_TRUE(run([&] { return gdx_request_test(r) != GDX_INPROGRESS; })); // both sides progress
        EXPECT_EQ(gdx_request_test(r), GDX_ERR_IO) << len;
        gdx_request_free(r);
        long rounds = 0;
        run([&] { return ++rounds > 20000; }); // time for a value that was going to come
        uint64_t v;
        EXPECT_EQ(gdx_ep_notify_poll(e[1], &v, 1), 0u) << len << ": a failed put delivered " << v;
    }
}

INSTANTIATE_TEST_SUITE_P(Over, NotifyFailure, ::testing::Values(std::string("tcp"), std::string("shm")),
                         [](const auto &info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Over, NotifyApi,
                         ::testing::Combine(::testing::Values(std::string("tcp"), std::string("shm")),
                                            ::testing::Values(std::string("default"), std::string("staged"),
                                                              std::string("mixed"))),
                         [](const auto &info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

} // namespace
} // namespace gdx::test
