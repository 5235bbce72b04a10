// The staging engine's control messages: one active-message id (Params::am_id), a 4-byte header naming the type,
// then fixed little-endian fields. Every message is decoded and checked field by field before anything acts on
// it (sizes, reserved bits, counts, status range); what the fields refer to (region ids, slots, tokens) is checked
// by the handler that owns that state.
//
// Header: u8 version (kCtrlVersion), u8 type, u16 reserved (0). Bodies, in order:
//   WANT          pool u16, count u16                         "I'd like to hold `count` slots of your pool"
//   GRANT         pool u16, count u16, status i32, nslots u32, rkey_len u16, reserved u16, base u64,
//                 slot_size u64, slots u16[count], rkey[rkey_len]    "these slots of my pool are yours"
//   FILLED        pool u16, slot u16, reserved u32, token u64, region u64, offset u64, length u64
//   DONE          pool u16, slot u16, status i32, keep u8, reserved u8[3], token u64
//                 (pool/slot 0xFFFF: no slot, the answer to SMALL_PUT)
//   RECALL        pool u16, count u16                         "hold at most `count` slots of my pool"
//   RETURN        pool u16, count u16, slots u16[count]       "these idle slots are yours again"
//   GET_REQ       rkey_len u16, reserved u16, token u64, region u64, offset u64, length u64, addr u64, rkey
//   GET_DONE      status i32, token u64
//   SMALL_PUT     reserved u32, token u64, region u64, offset u64, data
//   SMALL_GET_REQ reserved u32, token u64, region u64, offset u64, length u64
//   SMALL_GET_DATA status i32, token u64, data
//   PING          reserved u32, token u64                     "are you there?" (sent while waiting on the peer)
//   PONG          reserved u32, token u64                     the answer, from the peer's progress
//   BYE           status i32                                  "I destroyed this endpoint: nothing you wait for
//                                                              from me will come"
//   SMALL_PUT_NOTIFY reserved u32, token u64, region u64, offset u64, value u64, data
//                                                             SMALL_PUT whose target queues `value` for the user
//                                                             right after its copy succeeded, before DONE
//   NOTIFY        reserved u32, value u64                     "a put of mine completed: every byte is in your
//                                                              buffer" (gdx_put_notify's other paths)
#pragma once

#include "gdx/status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gdx::fb {

// 1: WANT..SMALL_GET_DATA (and, late in its life, PING/PONG/BYE under the same number, which a peer built
//    before them refused as unknown types). 2: PING/PONG/BYE, BYE's status says why (GDX_ERR_TIMEOUT: the
//    sender declared us dead), and a granted slot not filled is waited on by the target. A message of another
//    version is refused with GDX_ERR_UNSUPPORTED ("protocol version mismatch: peer X, we Y"), and the engine
//    gives that peer up at its first message instead of misreading it. SMALL_PUT_NOTIFY and NOTIFY (put with
//    notification) are part of 2 as well: no gdx released version 2 without them.
inline constexpr uint8_t kCtrlVersion = 2;
inline constexpr uint16_t kNoSlot = 0xFFFF;
inline constexpr size_t kMaxCtrlSlots = 1024; // slots named by one GRANT/RETURN
inline constexpr size_t kMaxCtrlRkey = 1024;  // transport rkey bytes carried by GRANT/GET_REQ

enum class CtrlType : uint8_t {
    Want = 1,
    Grant = 2,
    Filled = 3,
    Done = 4,
    Recall = 5,
    Return = 6,
    GetReq = 7,
    GetDone = 8,
    SmallPut = 9,
    SmallGetReq = 10,
    SmallGetData = 11,
    Ping = 12,
    Pong = 13,
    Bye = 14,
    SmallPutNotify = 15,
    Notify = 16,
};
inline constexpr uint8_t kMaxCtrlType = 16;
const char *ctrl_type_name(CtrlType t);

// One decoded message: the fields its type uses (the others stay zero). Spans point into the received bytes and
// are valid only while they are.
struct CtrlMsg {
    CtrlType type = CtrlType::Want;
    uint16_t pool = 0;
    uint16_t slot = 0;
    uint16_t count = 0;
    bool keep = false;
    gdx_status_t status = GDX_OK;
    uint32_t nslots = 0;
    uint64_t token = 0;
    uint64_t region = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t addr = 0;      // GRANT: pool base; GET_REQ: landing address
    uint64_t slot_size = 0;
    uint64_t value = 0;     // SMALL_PUT_NOTIFY, NOTIFY: the user's notification value
    std::vector<uint16_t> slots;
    std::span<const uint8_t> rkey;
    std::span<const uint8_t> data;
};

// Bytes of the header plus the fixed part of a SMALL_PUT / SMALL_GET_DATA (the small path's payload room is
// max_am_bcopy minus this).
inline constexpr size_t kSmallPutOverhead = 4 + 4 + 24;
inline constexpr size_t kSmallPutNotifyOverhead = kSmallPutOverhead + 8;
inline constexpr size_t kSmallGetDataOverhead = 4 + 4 + 8;

void encode_ctrl(const CtrlMsg &m, std::vector<uint8_t> *out);
// GDX_ERR_PROTOCOL with *why (the field and its value) when the bytes are not a well-formed message;
// GDX_ERR_UNSUPPORTED with *why "protocol version mismatch: peer X, we Y" when the header names another version
// (the rest is not read: its layout is that version's).
gdx_status_t decode_ctrl(std::span<const uint8_t> in, CtrlMsg *out, std::string *why);

} // namespace gdx::fb
