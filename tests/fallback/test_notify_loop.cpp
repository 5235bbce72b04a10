// Put with notification in the staging engine, over the in-process loop transport: every value is seen only once
// its put's bytes are in the target's buffer (checked at the moment it is seen), in issue order although later
// small puts complete before earlier large ones, on every path (direct, staged, mixed, staged by the peer only);
// a small staged put carries its value (no NOTIFY message); a failed put delivers nothing and holds nothing back.
#include "loop_fixture.h"

#include "core/error.h"

#include <string>

namespace gdx::test {
namespace {

enum class Mode { Direct, Staged, Mixed, RemoteOnly };
const char *mode_name(Mode m) {
    static const char *const kNames[] = {"direct", "staged", "mixed", "remote_only"};
    return kNames[static_cast<int>(m)];
}

class NotifyLoop : public LoopPairTest {
  protected:
    HostBuf src, dst; // a's source, b's destination
    static constexpr size_t kBuf = 1 << 20;

    void configure(Mode m) {
        params_a.small_thresh = 8192; // the small path exists (the fixture's default turns it off)
        switch (m) {
        case Mode::Direct: break;
        case Mode::Staged: params_a.fault.p2p_every = 1; break;
        case Mode::Mixed: params_a.fault.p2p_every = 2; break;
        case Mode::RemoteOnly: opt_b.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr); }; break;
        }
    }
    void start_with_buffers() {
        ASSERT_NO_FATAL_FAILURE(start());
        ASSERT_NO_FATAL_FAILURE(make_buf(a, b, kBuf, 11, &src));
        ASSERT_NO_FATAL_FAILURE(make_buf(b, a, kBuf, 22, &dst));
    }

    struct Put {
        size_t soff, doff, len;
        uint64_t value;
        fb::Request req;
    };
    // Puts of these sizes, one after the other in both buffers (64 bytes apart), values 100, 101, ...
    std::vector<Put> plan(std::initializer_list<size_t> sizes) {
        std::vector<Put> v(sizes.size());
        size_t at = 3, i = 0;
        for (size_t len : sizes) {
            v[i].soff = at + 5;
            v[i].doff = at;
            v[i].len = len;
            v[i].value = 100 + i;
            at += len + 64;
            ++i;
        }
        return v;
    }
    // Takes b's notifications; each must be the next expected value, with its put's bytes already in place.
    void take_values(std::vector<Put> &puts, size_t *next) {
        fb::Notification n;
        while (b.engine->notify_peek(*b.ep, &n)) {
            b.engine->notify_pop(*b.ep);
            ASSERT_LT(*next, puts.size()) << "a value nobody sent: " << n.value;
            const Put &p = puts[*next];
            ASSERT_EQ(n.value, p.value) << "values out of issue order";
            ASSERT_EQ(first_mismatch(dst.mem.data() + p.doff, p.len, 11, p.soff), -1)
                << "value " << n.value << " seen before its " << p.len << " bytes were all there";
            ++*next;
        }
    }
    // A small and a large put with notification, both expected to fail with `expect`: no value may reach b.
    void fail_both(gdx_status_t expect) {
        std::vector<Put> puts = plan({100, 100000});
        for (Put &p : puts)
            ASSERT_EQ(a.engine->put_notify(*a.ep, *src.reg, p.soff, *dst.remote, p.doff, p.len, p.value, &p.req),
                      GDX_INPROGRESS);
        for (Put &p : puts) {
            ASSERT_TRUE(wait(p.req));
            EXPECT_EQ(p.req.status, expect) << p.len;
        }
        run_until([] { return false; }, {}, 2000); // long enough for a value that was going to come
        fb::Notification n;
        EXPECT_FALSE(b.engine->notify_peek(*b.ep, &n)) << "a failed put delivered value " << n.value;
        EXPECT_EQ(b.engine->stats().notify_received, 0u);
    }
    // Issues every put at once, then progresses until all completed and every value was taken.
    void run_all(std::vector<Put> &puts) {
        for (Put &p : puts)
            ASSERT_EQ(a.engine->put_notify(*a.ep, *src.reg, p.soff, *dst.remote, p.doff, p.len, p.value, &p.req),
                      GDX_INPROGRESS)
                << last_error();
        size_t next = 0;
        auto all_done = [&] {
            for (const Put &p : puts)
                if (p.req.status == GDX_INPROGRESS) return false;
            return next == puts.size();
        };
        for (long round = 0; round < 2000000 && !all_done(); ++round) {
            a.engine->progress();
            b.engine->progress();
            ASSERT_NO_FATAL_FAILURE(take_values(puts, &next));
        }
        ASSERT_TRUE(all_done()) << next << " of " << puts.size() << " values seen";
    }
};

class NotifyModes : public NotifyLoop, public ::testing::WithParamInterface<Mode> {};

TEST_P(NotifyModes, EachValueArrivesAfterItsBytesInIssueOrder) {
    configure(GetParam());
    ASSERT_NO_FATAL_FAILURE(start_with_buffers());
    // Large first, small after: the small ones complete first, and their values must wait for the large one's.
    // 8152 is the largest put whose value fits the small path's one message (8192 - 40), 8153 the smallest that
    // does not; 0 sends a value alone.
    std::vector<Put> puts = plan({70000, 1, 8152, 8153, 4096 * 5 + 3, 0, 200000, 16});
    ASSERT_NO_FATAL_FAILURE(run_all(puts));
    for (const Put &p : puts) {
        EXPECT_EQ(p.req.status, GDX_OK) << p.len << ": " << p.req.error;
        EXPECT_EQ(p.req.path.bytes_direct + p.req.path.bytes_staged, p.len) << "the request's report is a put's";
    }
    const fb::Stats sa = a.engine->stats(), sb = b.engine->stats();
    EXPECT_EQ(sa.notify_sent + sa.notify_small, puts.size());
    EXPECT_EQ(sb.notify_received, puts.size());
    EXPECT_EQ(sb.notify_waiting, 0u);
    if (GetParam() == Mode::Direct) {
        EXPECT_EQ(sa.notify_small, 0u) << "direct puts take no small path";
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, NotifyModes,
                         ::testing::Values(Mode::Direct, Mode::Staged, Mode::Mixed, Mode::RemoteOnly),
                         [](const auto &info) { return std::string(mode_name(info.param)); });

TEST_F(NotifyLoop, SmallStagedValueRidesWithItsData) {
    configure(Mode::Staged);
    ASSERT_NO_FATAL_FAILURE(start_with_buffers());
    std::vector<Put> one = plan({100});
    ASSERT_NO_FATAL_FAILURE(run_all(one));
    EXPECT_TRUE(one[0].req.path.small);
    EXPECT_EQ(a.engine->stats().notify_small, 1u);
    EXPECT_EQ(a.engine->stats().notify_sent, 0u) << "no NOTIFY message: the value went with the data";
    std::vector<Put> large = plan({100000});
    ASSERT_NO_FATAL_FAILURE(run_all(large));
    EXPECT_EQ(a.engine->stats().notify_sent, 1u);
    EXPECT_EQ(b.engine->stats().notify_received, 2u);
}

TEST_F(NotifyLoop, FailedCopyHereDeliversNoValue) {
    configure(Mode::Staged);
    params_a.fault.copy_every = 1; // every staging copy of the initiator fails
    ASSERT_NO_FATAL_FAILURE(start_with_buffers());
    ASSERT_NO_FATAL_FAILURE(fail_both(GDX_ERR_IO));
}

TEST_F(NotifyLoop, FailedCopyAtThePeerDeliversNoValue) {
    configure(Mode::Staged);
    params_b.fault.copy_every = 1; // every copy of the target fails: the small one too (before its value is queued)
    ASSERT_NO_FATAL_FAILURE(start_with_buffers());
    ASSERT_NO_FATAL_FAILURE(fail_both(GDX_ERR_IO));
}

TEST_F(NotifyLoop, RefusedPutDeliversNothingAndHoldsNothingBack) {
    configure(Mode::Staged);
    ASSERT_NO_FATAL_FAILURE(start_with_buffers());
    HostBuf gone; // registered, its key given to a, then deregistered: b refuses what a puts there
    ASSERT_NO_FATAL_FAILURE(make_buf(b, a, 300000, 33, &gone));
    ASSERT_EQ(b.engine->mem_dereg(gone.reg), GDX_OK);
    std::vector<Put> puts = plan({8, 8, 200000, 200000, 16});
    const fb::RemoteRegion *target[] = {dst.remote.get(), gone.remote.get(), gone.remote.get(), dst.remote.get(),
                                        dst.remote.get()};
    for (size_t i = 0; i < puts.size(); ++i) {
        Put &p = puts[i];
        ASSERT_EQ(a.engine->put_notify(*a.ep, *src.reg, p.soff, *target[i], p.doff, p.len, p.value, &p.req),
                  GDX_INPROGRESS);
    }
    std::vector<uint64_t> seen;
    ASSERT_TRUE(run_until([&] {
        fb::Notification n;
        while (b.engine->notify_peek(*b.ep, &n)) {
            seen.push_back(n.value);
            b.engine->notify_pop(*b.ep);
        }
        for (const Put &p : puts)
            if (p.req.status == GDX_INPROGRESS) return false;
        return seen.size() >= 3;
    }));
    EXPECT_EQ(puts[0].req.status, GDX_OK);
    EXPECT_EQ(puts[1].req.status, GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(puts[2].req.status, GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(puts[3].req.status, GDX_OK);
    EXPECT_EQ(puts[4].req.status, GDX_OK);
    EXPECT_EQ(seen, (std::vector<uint64_t>{100, 103, 104}));
    EXPECT_EQ(first_mismatch(gone.mem.data(), gone.mem.size(), 33), -1) << "a refused put wrote";
}

} // namespace
} // namespace gdx::test
