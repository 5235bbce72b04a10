// Wire format, packed keys, tcp address blobs and the remote-key table: exact bytes and every refusal; the level
// of a refusal's log line (refusal_log.h).
#include "transport/refusal_log.h"
#include "transport/rkey_table.h"
#include "transport/tcp/tcp_address.h"
#include "transport/transport.h"
#include "transport/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace gdx;
using namespace gdx::tp;

namespace {
const wire::Limits kLimits{1u << 30, 1u << 20, kMaxAmId};

std::vector<uint8_t> encoded(const wire::FrameHeader &h) {
    std::vector<uint8_t> b(wire::kHeaderSize);
    wire::encode_header(h, b.data());
    return b;
}
gdx_status_t decode(const std::vector<uint8_t> &b, wire::FrameHeader *h, std::string *why) {
    return wire::decode_header(b, kLimits, h, why);
}
} // namespace

TEST(Wire, HeaderBytesAreLittleEndianAtDocumentedOffsets) {
    auto b = encoded({wire::MsgType::Put, GDX_OK, 0x0102030405060708ull, 0x1112131415161718ull, 0x2122232425262728ull,
                      0x33});
    const uint8_t expect[wire::kHeaderSize] = {
        0x44, 0x58, 1,    3,    0,    0,    0,    0,    0x08, 0x07, 0x06, 0x05, 0x04, 0x03,
        0x02, 0x01, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, 0x28, 0x27, 0x26, 0x25,
        0x24, 0x23, 0x22, 0x21, 0x33, 0,    0,    0,    0,    0,    0,    0};
    EXPECT_EQ(0, std::memcmp(b.data(), expect, sizeof(expect)));
    wire::FrameHeader h;
    std::string why;
    ASSERT_EQ(decode(b, &h, &why), GDX_OK) << why;
    EXPECT_EQ(h.type, wire::MsgType::Put);
    EXPECT_EQ(h.op_id, 0x0102030405060708ull);
    EXPECT_EQ(h.key_id, 0x1112131415161718ull);
    EXPECT_EQ(h.addr, 0x2122232425262728ull);
    EXPECT_EQ(h.length, 0x33u);
}

TEST(Wire, EveryMalformedFieldIsRefusedWithAReason) {
    wire::FrameHeader h;
    std::string why;
    auto put = encoded({wire::MsgType::Put, GDX_OK, 1, 2, 0x1000, 16});
    struct Case {
        const char *name;
        std::vector<uint8_t> bytes;
        const char *why_has;
    };
    std::vector<Case> cases;
    auto mutate = [&](const char *name, size_t off, uint8_t v, const char *why_has) {
        auto b = put;
        b[off] = v;
        cases.push_back({name, b, why_has});
    };
    mutate("magic", 0, 0, "magic");
    mutate("version", 2, 9, "version 9");
    mutate("type 0", 3, 0, "unknown message type");
    mutate("type 200", 3, 200, "unknown message type");
    mutate("status in request", 4, 1, "status");
    cases.push_back({"truncated", std::vector<uint8_t>(put.begin(), put.begin() + 39), "39 bytes"});
    cases.push_back({"oversized put", encoded({wire::MsgType::Put, GDX_OK, 1, 2, 0, (1ull << 30) + 1}), "exceeds"});
    cases.push_back({"wrapping range", encoded({wire::MsgType::Put, GDX_OK, 1, 2, ~0ull - 3, 16}), "wraps"});
    cases.push_back({"put op id 0", encoded({wire::MsgType::Put, GDX_OK, 0, 2, 0, 16}), "op id 0"});
    cases.push_back({"am id", encoded({wire::MsgType::Am, GDX_OK, 0, kMaxAmId, 0, 1}), "AM id"});
    cases.push_back({"am size", encoded({wire::MsgType::Am, GDX_OK, 0, 1, 0, (1u << 20) + 1}), "exceeds"});
    cases.push_back({"am addr", encoded({wire::MsgType::Am, GDX_OK, 0, 1, 5, 1}), "non-zero"});
    cases.push_back({"ack length", encoded({wire::MsgType::PutAck, GDX_OK, 1, 0, 0, 1}), "non-zero"});
    cases.push_back({"reply status", encoded({wire::MsgType::PutAck, 77, 1, 0, 0, 0}), "invalid status"});
    cases.push_back({"reply inprogress", encoded({wire::MsgType::PutAck, GDX_INPROGRESS, 1, 0, 0, 0}), "invalid status"});
    cases.push_back({"error reply payload",
                     encoded({wire::MsgType::GetReply, GDX_ERR_ACCESS_DENIED, 1, 0, 0, 8}), "error status"});
    cases.push_back({"hello body", encoded({wire::MsgType::Hello, GDX_OK, 1, 2, 3, 9}), "body"});
    cases.push_back({"hello ids", encoded({wire::MsgType::Hello, GDX_OK, 1, 0, 3, 8}), "zero"});
    for (const Case &c : cases) {
        why.clear();
        EXPECT_EQ(decode(c.bytes, &h, &why), GDX_ERR_PROTOCOL) << c.name;
        EXPECT_NE(why.find(c.why_has), std::string::npos) << c.name << ": " << why;
    }
    // Every well-formed message type decodes.
    for (auto m : {wire::FrameHeader{wire::MsgType::GetReq, GDX_OK, 1, 2, 0, 1u << 30},
                   wire::FrameHeader{wire::MsgType::GetReply, GDX_ERR_ACCESS_DENIED, 1, 0, 0, 0},
                   wire::FrameHeader{wire::MsgType::Flush, GDX_OK, 1, 0, 0, 0},
                   wire::FrameHeader{wire::MsgType::FlushAck, GDX_OK, 1, 0, 0, 0},
                   wire::FrameHeader{wire::MsgType::HelloAck, GDX_OK, 1, 2, 3, 8},
                   wire::FrameHeader{wire::MsgType::Am, GDX_OK, 0, kMaxAmId - 1, 0, 1u << 20}})
        EXPECT_EQ(decode(encoded(m), &h, &why), GDX_OK) << why;
}

TEST(Wire, HelloBodyAndPackedKeyValidation) {
    uint8_t body[wire::kHelloBodySize];
    wire::HelloBody hb;
    std::string why;
    wire::encode_hello_body({64}, body);
    ASSERT_EQ(wire::decode_hello_body(body, &hb, &why), GDX_OK);
    EXPECT_EQ(hb.max_requests, 64u);
    wire::encode_hello_body({0}, body);
    EXPECT_EQ(wire::decode_hello_body(body, &hb, &why), GDX_ERR_PROTOCOL);
    wire::encode_hello_body({wire::kMaxRequestsLimit + 1}, body);
    EXPECT_EQ(wire::decode_hello_body(body, &hb, &why), GDX_ERR_PROTOCOL);

    uint8_t k[wire::kPackedRkeySize];
    wire::PackedRkey in{wire::TransportId::Tcp, kAccessRemoteRead, 0xabcdefull, 0x7f0000001000ull, 4096};
    wire::encode_rkey(in, k);
    EXPECT_EQ(k[0], wire::kRkeyVersion);
    EXPECT_EQ(k[1], 1);
    EXPECT_EQ(k[8], 0xef); // key id, little-endian at offset 8
    wire::PackedRkey out;
    ASSERT_EQ(wire::decode_rkey(k, wire::TransportId::Tcp, &out, &why), GDX_OK) << why;
    EXPECT_EQ(out.key_id, in.key_id);
    EXPECT_EQ(out.base, in.base);
    EXPECT_EQ(out.length, in.length);
    EXPECT_EQ(wire::decode_rkey(k, wire::TransportId::Shm, &out, &why), GDX_ERR_PROTOCOL);
    EXPECT_NE(why.find("'tcp', not 'shm'"), std::string::npos) << why;
    EXPECT_EQ(wire::decode_rkey({k, 31}, wire::TransportId::Tcp, &out, &why), GDX_ERR_PROTOCOL);
    uint8_t bad[wire::kPackedRkeySize];
    std::memcpy(bad, k, sizeof(k));
    bad[4] = kAccessLocalRead; // local rights have no business in a remote key
    EXPECT_EQ(wire::decode_rkey(bad, wire::TransportId::Tcp, &out, &why), GDX_ERR_PROTOCOL);
    wire::encode_rkey({wire::TransportId::Tcp, 0, 1, ~0ull - 10, 100}, bad);
    EXPECT_EQ(wire::decode_rkey(bad, wire::TransportId::Tcp, &out, &why), GDX_ERR_PROTOCOL);
}

TEST(Wire, RangeInsideHandlesEdgesAndWrap) {
    EXPECT_TRUE(wire::range_inside(100, 0, 100, 0));
    EXPECT_TRUE(wire::range_inside(100, 10, 100, 10));
    EXPECT_TRUE(wire::range_inside(110, 0, 100, 10));
    EXPECT_FALSE(wire::range_inside(110, 1, 100, 10));
    EXPECT_FALSE(wire::range_inside(99, 1, 100, 10));
    EXPECT_FALSE(wire::range_inside(105, ~0ull, 100, 10));
}

TEST(TcpAddress, RoundTripAndRefusals) {
    tcp::TcpAddress a;
    a.family = 4;
    a.port = 4242;
    a.ip = {127, 0, 0, 1};
    a.iface_id = 7;
    a.ep_id = 9;
    uint8_t b[tcp::kAddressSize];
    tcp::encode_address(a, b);
    tcp::TcpAddress d;
    std::string why;
    ASSERT_EQ(tcp::decode_address(b, &d, &why), GDX_OK) << why;
    EXPECT_EQ(d.ip_text(), "127.0.0.1");
    EXPECT_EQ(d.port, 4242);
    EXPECT_EQ(d.ep_id, 9u);
    for (size_t off : {0u, 1u, 2u, 3u, 4u, 12u, 24u, 32u}) {
        uint8_t m[tcp::kAddressSize];
        std::memcpy(m, b, sizeof(m));
        m[off] = off == 4 ? 0 : 0x55;
        if (off == 4) m[5] = 0; // port 0
        if (off == 24 || off == 32) std::memset(m + off, 0, 8);
        EXPECT_EQ(tcp::decode_address(m, &d, &why), GDX_ERR_INVALID_ADDR) << "offset " << off;
    }
    EXPECT_EQ(tcp::decode_address({b, 39}, &d, &why), GDX_ERR_INVALID_ADDR);
}

TEST(RkeyTable, KeysAreRandomRangeAndRightsCheckedRevocationFinal) {
    RkeyTable t;
    std::vector<uint8_t> mem(4096);
    uintptr_t base = reinterpret_cast<uintptr_t>(mem.data());
    uint64_t k1 = 0, k2 = 0;
    ASSERT_EQ(t.add(base, mem.size(), kAccessRemoteWrite, &k1), GDX_OK);
    ASSERT_EQ(t.add(base, mem.size(), kAccessRemoteRead, &k2), GDX_OK);
    EXPECT_NE(k1, 0u);
    EXPECT_NE(k1, k2);
    EXPECT_NE(k1 + 1, k2); // not sequential
    uint8_t *p = nullptr;
    std::string why;
    {
        auto pin = t.pin();
        EXPECT_EQ(t.check(pin, k1, base + 100, 200, kAccessRemoteWrite, &p, &why), GDX_OK);
        EXPECT_EQ(p, mem.data() + 100);
        EXPECT_EQ(t.check(pin, k1, base + 100, 200, kAccessRemoteRead, &p, &why), GDX_ERR_ACCESS_DENIED);
        EXPECT_NE(why.find("grants remote-write, the request needs remote-read"), std::string::npos) << why;
        EXPECT_EQ(t.check(pin, k1, base + 4000, 200, kAccessRemoteWrite, &p, &why), GDX_ERR_ACCESS_DENIED);
        EXPECT_NE(why.find("outside registration"), std::string::npos) << why;
        EXPECT_EQ(t.check(pin, k1 ^ 1, base, 1, kAccessRemoteWrite, &p, &why), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(t.check(pin, 0, base, 1, kAccessRemoteWrite, &p, &why), GDX_ERR_ACCESS_DENIED);
    }
    t.revoke(k1);
    EXPECT_EQ(t.size(), 1u);
    auto pin = t.pin(); // held to the end: no other table call from this thread (the mutex is not recursive)
    EXPECT_EQ(t.check(pin, k1, base, 1, kAccessRemoteWrite, &p, &why), GDX_ERR_ACCESS_DENIED);
    EXPECT_NE(why.find("revoked"), std::string::npos) << why;
}

// One WARN per kind of refusal, debug after: a kind is the transport, the peer, the status and the cause without
// its numbers, so a loop over keys or addresses writes one line while another cause still gets its own.
TEST(RefusalLog, OneWarnPerPeerStatusAndCauseWhateverItsNumbers) {
    log::reset_once_keys();
    const char *range1 = "range 0x1000+16 is outside registration 0x2000+4096 of key 0x00ab";
    const char *range2 = "range 0x1ff0+32 is outside registration 0x2000+4096 of key 0xcd12";
    const char *gone = "key 0x00ab opens no registration here (never issued, or revoked)";
    EXPECT_EQ(refusal_level("tcp", "127.0.0.1:5000", GDX_ERR_ACCESS_DENIED, range1), log::Level::Warn);
    EXPECT_EQ(refusal_level("tcp", "127.0.0.1:5000", GDX_ERR_ACCESS_DENIED, range1), log::Level::Debug);
    EXPECT_EQ(refusal_level("tcp", "127.0.0.1:5000", GDX_ERR_ACCESS_DENIED, range2), log::Level::Debug);
    EXPECT_EQ(refusal_level("tcp", "127.0.0.1:5000", GDX_ERR_ACCESS_DENIED, gone), log::Level::Warn);
    EXPECT_EQ(refusal_level("tcp", "127.0.0.1:5000", GDX_ERR_INVALID_ADDR, gone), log::Level::Warn);
    EXPECT_EQ(refusal_level("tcp", "127.0.0.1:5001", GDX_ERR_ACCESS_DENIED, range1), log::Level::Warn);
    EXPECT_EQ(refusal_level("shm", "127.0.0.1:5000", GDX_ERR_ACCESS_DENIED, range1), log::Level::Warn);
    EXPECT_EQ(refusal_level("shm", "pid 42", GDX_ERR_ACCESS_DENIED), log::Level::Warn);
    EXPECT_EQ(refusal_level("shm", "pid 42", GDX_ERR_ACCESS_DENIED), log::Level::Debug);
}
