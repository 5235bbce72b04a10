// The gdx wire format shared by the byte-stream transports (tcp now, shm's control ring later): one fixed
// 40-byte frame header, the packed remote key, and explicit little-endian codecs.
//
// Every multi-byte field is written and read byte by byte (store_le*/load_le*), never by copying a struct, so
// the layout is independent of compiler padding and host byte order. Every decoded header is validated
// field by field before anything acts on it (decode_header): a peer is never trusted.
//
// Frame header (all messages), little-endian:
//   off size field    meaning
//    0   2   magic    0x5844 ("DX")
//    2   1   version  kWireVersion; a different version is refused
//    3   1   type     MsgType
//    4   4   status   0 in requests; the operation's gdx_status_t in replies (an error code, or 0)
//    8   8   op_id    initiator's handle, echoed by the reply (PUT, GET_REQ, FLUSH and their replies);
//                     HELLO/HELLO_ACK: the sender's interface id; AM: 0
//   16   8   key_id   PUT/GET_REQ: the target's remote-key id; AM: the active-message id (< kMaxAmId);
//                     HELLO/HELLO_ACK: the sender's endpoint id; otherwise 0
//   24   8   addr     PUT/GET_REQ: target virtual address; HELLO/HELLO_ACK: the receiver's endpoint id;
//                     otherwise 0
//   32   8   length   bytes that follow this header in the stream (PUT, GET_REPLY, AM, HELLO*); GET_REQ:
//                     the bytes requested (nothing follows)
// Messages: HELLO/HELLO_ACK (connection set-up, 8-byte body: HelloBody), PUT + payload -> PUT_ACK,
// GET_REQ -> GET_REPLY + payload, AM + payload, FLUSH -> FLUSH_ACK, FENCE + per-lane counts.
//
// Lanes (tcp): an endpoint may open extra connections that carry stripes of large puts; the side that dialed the
// main connection dials them when either side first has a large put (the other side asks with LANE_WANT, which
// is not a request: it has no reply and is not counted among the performed ones). A lane starts with
// LANE_HELLO (the ids as in HELLO; body: HelloBody with `lanes` = this lane's index) and then carries only
// PUT -> PUT_ACK. On a lane, PUT's op_id is 1 + the number of requests the target's main connection must have
// performed before this stripe (what a fence before it ordered); PUT_ACK echoes it, and acks come in order.
// FENCE on the main connection carries, per lane, how many stripes the sender had put on it: the target
// performs nothing after the FENCE until those stripes have landed.
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace gdx::tp::wire {

// ---- little-endian codecs ------------------------------------------------------------------------------

// GCC 12 reports bogus -Wstringop-overflow on these stores when they are inlined into code that just
// resized a std::vector (it loses the vector's size); the stores are in bounds whenever the caller's are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
inline void store_le16(uint8_t *p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
}
inline void store_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
inline uint16_t load_le16(const uint8_t *p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t load_le32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// ---- transport ids (in packed keys and address blobs) --------------------------------------------------

enum class TransportId : uint8_t { Tcp = 1, Shm = 2, CudaIpc = 3, Rc = 4 };
const char *transport_id_name(uint8_t id); // "tcp", ... or "unknown"

// ---- frame header ---------------------------------------------------------------------------------------

inline constexpr uint16_t kMagic = 0x5844;
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kHeaderSize = 40;

enum class MsgType : uint8_t {
    Hello = 1,     // active side -> passive side, first message of a connection
    HelloAck = 2,  // passive side's answer; the connection is up once it arrives
    Put = 3,       // + `length` payload bytes written at [addr, addr+length) of key `key_id`
    PutAck = 4,    // status of the PUT `op_id`
    GetReq = 5,    // read `length` bytes at [addr, addr+length) of key `key_id`
    GetReply = 6,  // + `length` payload bytes (the whole range on success, 0 bytes on error)
    Am = 7,        // + `length` bytes for handler `key_id`
    Flush = 8,     // answered once every earlier message has been performed
    FlushAck = 9,
    Fence = 10,    // + 8 bytes per lane: stripes sent on it so far; later messages wait until they landed
    LaneHello = 11, // first message of a lane connection (8-byte body: HelloBody, lanes = lane index)
    LaneWant = 12,  // the side that did not dial asks the dialing side to open the lanes (first large put)
};
inline constexpr uint8_t kMaxMsgType = 12;
inline constexpr unsigned kMaxLanes = 32; // lanes per endpoint (GDX_TCP_LANES upper bound; a FENCE fits 256 bytes)
const char *msg_type_name(uint8_t type); // "PUT", ... or "unknown"

struct FrameHeader {
    MsgType type = MsgType::Hello;
    int32_t status = GDX_OK;
    uint64_t op_id = 0;
    uint64_t key_id = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
};

// What the receiver accepts; anything larger is a protocol error (it bounds every buffer a peer can make the
// receiver commit to).
struct Limits {
    uint64_t max_bulk = 0;  // PUT payload, GET_REQ/GET_REPLY length
    uint64_t max_am = 0;    // AM payload (header + data)
    uint32_t max_am_id = 0; // AM ids must be below this
};

void encode_header(const FrameHeader &h, uint8_t out[kHeaderSize]);
// Decodes and validates one header. GDX_ERR_PROTOCOL with *why set (one phrase naming the field and value)
// when anything is off: magic, version, type, status, a field that must be zero, a length over the limits,
// an address range that wraps around.
gdx_status_t decode_header(std::span<const uint8_t> in, const Limits &limits, FrameHeader *out, std::string *why);

// True for the types that are answers to a request.
inline bool is_reply(MsgType t) {
    return t == MsgType::HelloAck || t == MsgType::PutAck || t == MsgType::GetReply || t == MsgType::FlushAck;
}

// ---- HELLO body -----------------------------------------------------------------------------------------
// 8 bytes after a HELLO, HELLO_ACK or LANE_HELLO header:
//   0  4  max_requests  requests the sender may have outstanding at once (the receiver sizes its reply queue
//                       to it; a peer that exceeds it is cut off)
//   4  2  lanes         HELLO: lanes the sender offers; HELLO_ACK: lanes both will use (at most the offer);
//                       LANE_HELLO: the index of this lane. At most kMaxLanes (an index: below it).
//   6  2  reserved      0
inline constexpr size_t kHelloBodySize = 8;
inline constexpr uint32_t kMaxRequestsLimit = 65536;
struct HelloBody {
    uint32_t max_requests = 0;
    uint16_t lanes = 0;
};
void encode_hello_body(const HelloBody &b, uint8_t out[kHelloBodySize]);
gdx_status_t decode_hello_body(std::span<const uint8_t> in, HelloBody *out, std::string *why);

// ---- packed remote key ----------------------------------------------------------------------------------
// 32 bytes:
//   0  1  version     kRkeyVersion
//   1  1  transport   TransportId that issued it
//   2  2  reserved    0
//   4  4  access      remote rights granted (tp::kAccessRemoteRead | kAccessRemoteWrite), nothing else
//   8  8  key_id      random id of the registration in the issuer's key table (0 = opens nothing)
//  16  8  base        registered virtual address (a hint for the initiator; the target checks its own record)
//  24  8  length      registered bytes
inline constexpr uint8_t kRkeyVersion = 1;
inline constexpr size_t kPackedRkeySize = 32;
struct PackedRkey {
    TransportId transport = TransportId::Tcp;
    uint32_t access = 0;
    uint64_t key_id = 0;
    uint64_t base = 0;
    uint64_t length = 0;
};
void encode_rkey(const PackedRkey &k, uint8_t out[kPackedRkeySize]);
// Validates size, version, transport (must be `expect`), reserved bits, access bits and base+length overflow.
gdx_status_t decode_rkey(std::span<const uint8_t> in, TransportId expect, PackedRkey *out, std::string *why);

// True when [addr, addr+len) lies inside [base, base+blen) without wrapping (len 0 needs base <= addr <= end).
inline bool range_inside(uint64_t addr, uint64_t len, uint64_t base, uint64_t blen) {
    return addr >= base && addr - base <= blen && len <= blen - (addr - base);
}

} // namespace gdx::tp::wire
