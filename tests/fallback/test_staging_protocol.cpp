// What the staging engine accepts from the wire: the control-message and key codecs (round trips, every
// truncation, every malformed field, random bytes), and a live engine fed hostile control messages by a raw
// peer: each is refused with an error answer (or dropped and counted), nothing is written, nothing crashes.
#include "fallback/control_msg.h"
#include "fallback/region.h"
#include "loop_fixture.h"
#include "transport/wire.h"

#include <random>

namespace gdx::test {
namespace {

std::vector<fb::CtrlMsg> samples() {
    static const uint8_t rkey[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const uint8_t data[5] = {9, 8, 7, 6, 5};
    std::vector<fb::CtrlMsg> v;
    auto add = [&](fb::CtrlType t) -> fb::CtrlMsg & {
        v.emplace_back();
        v.back().type = t;
        return v.back();
    };
    add(fb::CtrlType::Want) = {fb::CtrlType::Want, 3, 0, 7};
    fb::CtrlMsg &g = add(fb::CtrlType::Grant);
    g.pool = 1, g.slots = {4, 5}, g.nslots = 16, g.addr = 0x1000, g.slot_size = 4096, g.rkey = rkey;
    fb::CtrlMsg &f = add(fb::CtrlType::Filled);
    f.pool = 1, f.slot = 5, f.token = 0x100000002ull, f.region = 77, f.offset = 12, f.length = 4000;
    fb::CtrlMsg &d = add(fb::CtrlType::Done);
    d.pool = 1, d.slot = 5, d.status = GDX_ERR_IO, d.keep = true, d.token = 42;
    add(fb::CtrlType::Recall).pool = 2;
    fb::CtrlMsg &r = add(fb::CtrlType::Return);
    r.pool = 2, r.slots = {9};
    fb::CtrlMsg &q = add(fb::CtrlType::GetReq);
    q.token = 1, q.region = 2, q.offset = 3, q.length = 4, q.addr = 5, q.rkey = rkey;
    fb::CtrlMsg &gd = add(fb::CtrlType::GetDone);
    gd.status = GDX_ERR_ACCESS_DENIED, gd.token = 6;
    fb::CtrlMsg &sp = add(fb::CtrlType::SmallPut);
    sp.token = 7, sp.region = 8, sp.offset = 9, sp.data = data;
    fb::CtrlMsg &sq = add(fb::CtrlType::SmallGetReq);
    sq.token = 10, sq.region = 11, sq.offset = 12, sq.length = 13;
    fb::CtrlMsg &sd = add(fb::CtrlType::SmallGetData);
    sd.token = 14, sd.data = data;
    fb::CtrlMsg &spn = add(fb::CtrlType::SmallPutNotify);
    spn.token = 15, spn.region = 16, spn.offset = 17, spn.value = 0xfeedfacecafe0001ull, spn.data = data;
    add(fb::CtrlType::Notify).value = UINT64_MAX;
    return v;
}

TEST(StagingCodec, EveryControlMessageRoundTrips) {
    for (const fb::CtrlMsg &m : samples()) {
        std::vector<uint8_t> bytes;
        fb::encode_ctrl(m, &bytes);
        fb::CtrlMsg d;
        std::string why;
        ASSERT_EQ(fb::decode_ctrl(bytes, &d, &why), GDX_OK) << fb::ctrl_type_name(m.type) << ": " << why;
        EXPECT_EQ(d.type, m.type);
        EXPECT_EQ(d.pool, m.pool);
        EXPECT_EQ(d.slot, m.slot);
        EXPECT_EQ(d.status, m.status);
        EXPECT_EQ(d.keep, m.keep);
        EXPECT_EQ(d.token, m.token);
        EXPECT_EQ(d.region, m.region);
        EXPECT_EQ(d.offset, m.offset);
        EXPECT_EQ(d.addr, m.addr);
        EXPECT_EQ(d.value, m.value);
        EXPECT_EQ(d.slots, m.slots);
        EXPECT_TRUE(std::equal(d.rkey.begin(), d.rkey.end(), m.rkey.begin(), m.rkey.end()));
        EXPECT_TRUE(std::equal(d.data.begin(), d.data.end(), m.data.begin(), m.data.end()));
        // Every strict prefix is refused (the variable tails of SMALL_* accept shorter data, not shorter headers).
        size_t fixed = bytes.size() - m.data.size();
        for (size_t n = 0; n < fixed; ++n)
            EXPECT_EQ(fb::decode_ctrl({bytes.data(), n}, &d, &why), GDX_ERR_PROTOCOL)
                << fb::ctrl_type_name(m.type) << " cut at " << n;
    }
}

TEST(StagingCodec, MalformedFieldsAreRefused) {
    std::vector<uint8_t> ok;
    fb::encode_ctrl(samples()[3], &ok); // DONE
    fb::CtrlMsg d;
    std::string why;
    std::vector<uint8_t> b;
    auto refused = [&](size_t at, uint8_t value) {
        b = ok;
        b[at] = value;
        return fb::decode_ctrl(b, &d, &why) == GDX_ERR_PROTOCOL;
    };
    b = ok;
    b[0] = fb::kCtrlVersion + 1;
    EXPECT_EQ(fb::decode_ctrl(b, &d, &why), GDX_ERR_UNSUPPORTED) << "a version not ours: " << why;
    EXPECT_TRUE(refused(1, 0)) << "type 0";
    EXPECT_TRUE(refused(1, 200)) << "unknown type";
    EXPECT_TRUE(refused(2, 1)) << "reserved header";
    EXPECT_TRUE(refused(12, 2)) << "keep flag";
    EXPECT_TRUE(refused(13, 1)) << "reserved body";
    EXPECT_TRUE(refused(8, 0x7f)) << "positive status";
    std::vector<uint8_t> longer = ok;
    longer.push_back(0);
    EXPECT_EQ(fb::decode_ctrl(longer, &d, &why), GDX_ERR_PROTOCOL) << "trailing bytes";
    fb::CtrlMsg g = samples()[1];
    std::vector<uint8_t> many;
    fb::encode_ctrl(g, &many);
    tp::wire::store_le16(many.data() + 6, 60000); // slot count
    EXPECT_EQ(fb::decode_ctrl(many, &d, &why), GDX_ERR_PROTOCOL);
}

TEST(StagingCodec, NotificationMessagesAreCheckedAsStrictlyAsTheOthers) {
    fb::CtrlMsg n;
    n.type = fb::CtrlType::Notify;
    n.value = 42;
    std::vector<uint8_t> ok;
    fb::encode_ctrl(n, &ok);
    ASSERT_EQ(ok.size(), 16u) << "header, reserved u32, value u64";
    fb::CtrlMsg d;
    std::string why;
    ASSERT_EQ(fb::decode_ctrl(ok, &d, &why), GDX_OK) << why;
    EXPECT_EQ(d.type, fb::CtrlType::Notify);
    EXPECT_EQ(d.value, 42u);
    std::vector<uint8_t> b = ok;
    b[5] = 1; // reserved
    EXPECT_EQ(fb::decode_ctrl(b, &d, &why), GDX_ERR_PROTOCOL);
    EXPECT_NE(why.find("reserved"), std::string::npos) << why;
    b = ok;
    b.push_back(0);
    EXPECT_EQ(fb::decode_ctrl(b, &d, &why), GDX_ERR_PROTOCOL) << "a NOTIFY carries no data";
    b = ok;
    b[1] = fb::kMaxCtrlType + 1;
    EXPECT_EQ(fb::decode_ctrl(b, &d, &why), GDX_ERR_PROTOCOL) << "the type after NOTIFY is unknown";
    // SMALL_PUT_NOTIFY: the value sits between the offset and the data, so a SMALL_PUT's bytes relabelled as one
    // lose 8 bytes of data to the value; the round trip keeps every field.
    fb::CtrlMsg sp;
    sp.type = fb::CtrlType::SmallPutNotify;
    sp.token = 1, sp.region = 2, sp.offset = 3, sp.value = 4;
    const uint8_t data[3] = {7, 8, 9};
    sp.data = data;
    fb::encode_ctrl(sp, &b);
    ASSERT_EQ(b.size(), fb::kSmallPutNotifyOverhead + 3);
    ASSERT_EQ(fb::decode_ctrl(b, &d, &why), GDX_OK) << why;
    EXPECT_EQ(d.value, 4u);
    EXPECT_EQ(d.length, 3u);
    EXPECT_EQ(d.data[2], 9);
}

TEST(StagingCodec, RandomBytesAreDecodedOrRefusedNeverTrusted) {
    std::mt19937_64 rng(7);
    std::vector<uint8_t> b;
    fb::CtrlMsg d;
    std::string why;
    for (int i = 0; i < 200000; ++i) {
        b.resize(rng() % 64);
        for (uint8_t &x : b) x = static_cast<uint8_t>(rng());
        if (b.size() >= 2 && i % 2 == 0) b[0] = fb::kCtrlVersion, b[1] = static_cast<uint8_t>(1 + rng() % fb::kMaxCtrlType);
        gdx_status_t st = fb::decode_ctrl(b, &d, &why);
        ASSERT_TRUE(st == GDX_OK || st == GDX_ERR_PROTOCOL ||
                    (st == GDX_ERR_UNSUPPORTED && b.size() >= 4 && b[0] != fb::kCtrlVersion));
    }
}

// ---- keys ----------------------------------------------------------------------------------------------------

class StagingKeys : public LoopPairTest {};

TEST_F(StagingKeys, KeysRoundTripAndEveryBadFieldIsRefused) {
    opt_a.chunk = 4096;
    opt_a.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr) && (addr / 4096) % 2 == 1; };
    start();
    HostBuf buf;
    make_buf(a, b, 3 * 4096 + 100, 1, &buf, tp::kAccessLocalRead | tp::kAccessRemoteRead);
    std::vector<uint8_t> key;
    ASSERT_EQ(a.engine->pack_key(*buf.reg, &key), GDX_OK);
    const fb::RemoteRegion &r = *buf.remote;
    EXPECT_EQ(r.id(), buf.reg->id());
    EXPECT_EQ(r.base(), reinterpret_cast<uintptr_t>(buf.mem.data()));
    EXPECT_EQ(r.length(), buf.mem.size());
    EXPECT_EQ(r.access(), tp::kAccessRemoteRead);
    EXPECT_EQ(r.frag_size(), 4096u);
    EXPECT_EQ(r.kind(), mem::MemKind::Host);
    EXPECT_EQ(r.device(), -1);
    EXPECT_FALSE(r.direct(0, buf.mem.size()) && r.direct(0, 1) && r.direct(8191, 1)) << "chunks lost";

    std::unique_ptr<fb::RemoteRegion> out;
    for (size_t n = 0; n < key.size(); ++n)
        ASSERT_EQ(fb::RemoteRegion::unpack({key.data(), n}, b.iface->md(), &out), GDX_ERR_PROTOCOL) << n;
    auto refused = [&](size_t at, std::initializer_list<uint8_t> bytes) {
        std::vector<uint8_t> k = key;
        size_t i = at;
        for (uint8_t v : bytes) k[i++] = v;
        return fb::RemoteRegion::unpack(k, b.iface->md(), &out) == GDX_ERR_PROTOCOL;
    };
    EXPECT_TRUE(refused(0, {0})) << "magic";
    EXPECT_TRUE(refused(4, {2})) << "version";
    EXPECT_TRUE(refused(6, {1})) << "reserved";
    EXPECT_TRUE(refused(8, {0, 0, 0, 0, 0, 0, 0, 0})) << "region id 0";
    EXPECT_TRUE(refused(24, {0, 0, 0, 0, 0, 0, 0, 0})) << "length 0";
    EXPECT_TRUE(refused(16, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})) << "wrapping range";
    EXPECT_TRUE(refused(32, {0, 4, 0, 0, 0, 0, 0, 0})) << "fragment size 1K";
    EXPECT_TRUE(refused(40, {1})) << "local access bit";
    EXPECT_TRUE(refused(44, {9})) << "kind";
    EXPECT_TRUE(refused(45, {99})) << "type";
    EXPECT_TRUE(refused(46, {0xfe, 0xff})) << "device -2";
    EXPECT_TRUE(refused(48, {0, 0, 0, 0})) << "no chunks";
    EXPECT_TRUE(refused(48, {0xff, 0xff, 0, 0})) << "too many chunks";
    EXPECT_TRUE(refused(52, {9})) << "rkey length";
    EXPECT_TRUE(refused(56, {1})) << "first chunk not at 0";
    EXPECT_TRUE(refused(56 + 16, {9})) << "unknown reach";
    std::vector<uint8_t> longer = key;
    longer.push_back(0);
    EXPECT_EQ(fb::RemoteRegion::unpack(longer, b.iface->md(), &out), GDX_ERR_PROTOCOL);
    EXPECT_EQ(fb::RemoteRegion::unpack(key, b.iface->md(), &out), GDX_OK);
}

// ---- a hostile peer against a live engine ------------------------------------------------------------------------

class HostilePeer : public LoopPairTest {
  protected:
    std::vector<fb::CtrlMsg> answers;
    std::vector<std::vector<uint8_t>> answer_bytes;
    HostBuf target; // b's region the raw peer aims at

    void SetUp() override {
        LoopPairTest::SetUp();
        opt_b.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr); }; // b's memory is staged
        ASSERT_NO_FATAL_FAILURE(start());
        // a's engine goes: its interface becomes a raw peer that sends whatever bytes the test wants.
        a.engine.reset();
        ASSERT_EQ(a.iface->set_am_handler(params_b.am_id, &HostilePeer::capture, this), GDX_OK);
        make_buf(b, b, 8192, 5, &target, tp::kAccessLocalRead | tp::kAccessLocalWrite | tp::kAccessRemoteWrite);
    }
    static void capture(void *arg, tp::Endpoint *, const void *data, size_t len) {
        auto *self = static_cast<HostilePeer *>(arg);
        self->answer_bytes.emplace_back(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
        fb::CtrlMsg m;
        std::string why;
        ASSERT_EQ(fb::decode_ctrl(self->answer_bytes.back(), &m, &why), GDX_OK) << why;
        self->answers.push_back(m);
    }
    // Sends raw bytes to b's engine and returns its answers.
    std::vector<fb::CtrlMsg> send_raw(const std::vector<uint8_t> &bytes) {
        answers.clear();
        answer_bytes.clear();
        EXPECT_EQ(a.ep->am_bcopy(params_b.am_id, bytes.data(), bytes.size()), GDX_OK);
        for (int i = 0; i < 4; ++i) {
            b.engine->progress();
            a.iface->progress();
        }
        return answers;
    }
    std::vector<fb::CtrlMsg> send(const fb::CtrlMsg &m) {
        std::vector<uint8_t> bytes;
        fb::encode_ctrl(m, &bytes);
        return send_raw(bytes);
    }
    uint64_t errors() { return b.engine->stats().protocol_errors; }
    void TearDown() override {
        EXPECT_EQ(first_mismatch(target.mem.data(), target.mem.size(), 5), -1) << "a refused message wrote anyway";
        LoopPairTest::TearDown();
    }
};

// A peer built with an older control protocol (version 1: before PING, PONG and BYE had their own number) is given
// up at its first message, with the versions named, instead of having each message refused as malformed.
TEST_F(HostilePeer, AnOlderProtocolVersionIsNamedAndThePeerGivenUp) {
    fb::CtrlMsg want;
    want.type = fb::CtrlType::Want;
    want.count = 1;
    std::vector<uint8_t> bytes;
    fb::encode_ctrl(want, &bytes);
    bytes[0] = 1;
    uint64_t before = errors();
    EXPECT_TRUE(send_raw(bytes).empty()) << "an old peer's request is not served";
    EXPECT_EQ(errors(), before) << "not counted as a malformed message";
    EXPECT_EQ(b.engine->peer_state(*b.ep), GDX_ERR_UNSUPPORTED);
    EXPECT_NE(last_error().find("protocol version mismatch: peer 1, we 2"), std::string::npos) << last_error();
    // What b asks of that peer fails at once, with the same reason.
    HostBuf mine;
    make_buf(b, b, 4096, 6, &mine);
    fb::Request req;
    ASSERT_EQ(b.engine->put(*b.ep, *mine.reg, 0, *target.remote, 0, 4096, &req), GDX_INPROGRESS);
    for (int i = 0; i < 4 && req.status == GDX_INPROGRESS; ++i) b.engine->progress();
    EXPECT_EQ(req.status, GDX_ERR_UNSUPPORTED);
    EXPECT_NE(req.error.find("protocol version mismatch: peer 1, we 2"), std::string::npos) << req.error;
}

TEST_F(HostilePeer, GarbageIsCountedAndDropped) {
    uint64_t before = errors();
    EXPECT_TRUE(send_raw({1, 2, 3}).empty());
    EXPECT_TRUE(send_raw({}).empty());
    EXPECT_EQ(errors(), before + 2);
}

TEST_F(HostilePeer, FilledIsCheckedBeforeAnythingIsCopied) {
    fb::CtrlMsg f;
    f.type = fb::CtrlType::Filled;
    f.pool = 0;
    f.slot = 0;
    f.token = 99;
    f.region = target.reg->id();
    f.length = 100;
    auto ans = send(f); // no slot was ever granted to this peer
    ASSERT_EQ(ans.size(), 1u);
    EXPECT_EQ(ans[0].type, fb::CtrlType::Done);
    EXPECT_EQ(ans[0].status, GDX_ERR_PROTOCOL);
    EXPECT_EQ(ans[0].token, 99u);

    fb::CtrlMsg want;
    want.type = fb::CtrlType::Want;
    want.pool = 0;
    want.count = 1;
    ans = send(want);
    ASSERT_EQ(ans.size(), 1u);
    ASSERT_EQ(ans[0].type, fb::CtrlType::Grant);
    ASSERT_EQ(ans[0].slots.size(), 1u);
    uint16_t slot = ans[0].slots[0];
    f.slot = slot;

    struct Case {
        uint64_t region, offset, length;
        gdx_status_t expect;
        const char *what;
    } cases[] = {
        {0x1234, 0, 100, GDX_ERR_ACCESS_DENIED, "unknown region"},
        {target.reg->id(), 8100, 100, GDX_ERR_ACCESS_DENIED, "past the end"},
        {target.reg->id(), UINT64_MAX - 10, 100, GDX_ERR_ACCESS_DENIED, "wrapping offset"},
        {target.reg->id(), 0, 0, GDX_ERR_PROTOCOL, "zero length"},
        {target.reg->id(), 0, 1 << 20, GDX_ERR_ACCESS_DENIED, "longer than the region"},
    };
    for (const Case &c : cases) {
        f.region = c.region, f.offset = c.offset, f.length = c.length;
        uint64_t before = errors();
        ans = send(f);
        ASSERT_EQ(ans.size(), 1u) << c.what;
        EXPECT_EQ(ans[0].status, c.expect) << c.what;
        EXPECT_TRUE(ans[0].keep) << c.what << ": the slot stays the peer's";
        EXPECT_EQ(errors(), before + 1) << c.what;
    }
    f.slot = static_cast<uint16_t>(slot + 1); // not granted
    f.region = target.reg->id(), f.offset = 0, f.length = 10;
    ans = send(f);
    ASSERT_EQ(ans.size(), 1u);
    EXPECT_EQ(ans[0].status, GDX_ERR_PROTOCOL);
    fb::CtrlMsg ret;
    ret.type = fb::CtrlType::Return;
    ret.pool = 0;
    ret.slots = {static_cast<uint16_t>(slot + 1)};
    uint64_t before = errors();
    EXPECT_TRUE(send(ret).empty());
    EXPECT_EQ(errors(), before + 1) << "returning a slot never granted";
}

TEST_F(HostilePeer, GetAndSmallRequestsAreCheckedToo) {
    fb::CtrlMsg q;
    q.type = fb::CtrlType::GetReq;
    q.token = 5;
    q.region = target.reg->id(); // registered without remote read
    q.length = 100;
    q.addr = 0x1000;
    std::vector<uint8_t> rkey(a.iface->md().rkey_packed_size(), 0);
    q.rkey = rkey;
    auto ans = send(q);
    ASSERT_EQ(ans.size(), 1u);
    EXPECT_EQ(ans[0].type, fb::CtrlType::GetDone);
    EXPECT_EQ(ans[0].status, GDX_ERR_ACCESS_DENIED);

    fb::CtrlMsg sp;
    sp.type = fb::CtrlType::SmallPut;
    sp.token = 6;
    sp.region = target.reg->id();
    sp.offset = 8190;
    uint8_t data[10] = {};
    sp.data = data;
    ans = send(sp);
    ASSERT_EQ(ans.size(), 1u);
    EXPECT_EQ(ans[0].type, fb::CtrlType::Done);
    EXPECT_EQ(ans[0].status, GDX_ERR_ACCESS_DENIED);

    fb::CtrlMsg sq;
    sq.type = fb::CtrlType::SmallGetReq;
    sq.token = 7;
    sq.region = target.reg->id();
    sq.length = 10;
    ans = send(sq);
    ASSERT_EQ(ans.size(), 1u);
    EXPECT_EQ(ans[0].type, fb::CtrlType::SmallGetData);
    EXPECT_EQ(ans[0].status, GDX_ERR_ACCESS_DENIED);
    EXPECT_TRUE(ans[0].data.empty());
}

TEST_F(HostilePeer, AnswersToNothingAreDropped) {
    uint64_t before = errors();
    for (fb::CtrlType t : {fb::CtrlType::Done, fb::CtrlType::GetDone, fb::CtrlType::SmallGetData}) {
        fb::CtrlMsg m;
        m.type = t;
        m.token = 0x700000001ull;
        EXPECT_TRUE(send(m).empty());
    }
    fb::CtrlMsg g;
    g.type = fb::CtrlType::Grant;
    g.nslots = 4;
    g.slot_size = 4096;
    g.addr = 0x1000;
    g.slots = {7}; // beyond the pool it describes
    std::vector<uint8_t> rkey(a.iface->md().rkey_packed_size(), 0);
    g.rkey = rkey;
    EXPECT_TRUE(send(g).empty());
    EXPECT_EQ(errors(), before + 4);
}

} // namespace
} // namespace gdx::test
