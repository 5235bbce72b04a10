// Ring records of the shm endpoint protocol (after the channel's own types). Both ends run on one host with
// one ABI, so bodies are fixed-layout structs of fixed-width fields, copied out of the ring before use.
#pragma once

#include "transport/shm/channel.h"
#include "transport/shm/peer_map.h" // the peer-map service's control messages (kCtrlMapReq, kCtrlMapGrant)

#include <cstdint>

namespace gdx::tp::shm {

inline constexpr uint8_t kRecAm = kRecOwnerFirst + 0;      // id = AM id; body = header + payload
inline constexpr uint8_t kRecPutReq = kRecOwnerFirst + 1;  // ReqBody: CMA put, the target copies/grants
inline constexpr uint8_t kRecGetReq = kRecOwnerFirst + 2;  // ReqBody; flags kFlagRing: answer with GET_DATA
inline constexpr uint8_t kRecOpDone = kRecOwnerFirst + 3;  // DoneBody: an operation finished at the target
inline constexpr uint8_t kRecPutData = kRecOwnerFirst + 4; // PutDataBody + bytes; flags kFlagLast
inline constexpr uint8_t kRecGetData = kRecOwnerFirst + 5; // GetDataBody + bytes; flags kFlagLast

// Records one progress call takes from an endpoint's ring at most (the others wait for the next call, so that one
// busy peer cannot starve the rest).
inline constexpr unsigned kPollBudget = 64;

inline constexpr uint16_t kFlagLast = 1;
inline constexpr uint16_t kFlagRing = 2;

struct ReqBody {
    uint64_t op;    // initiator's operation id, echoed back
    uint64_t key;   // target's key id
    uint64_t raddr; // target address
    uint64_t len;
    uint64_t laddr; // initiator's buffer (CMA: the target reads/writes it there)
};
struct DoneBody {
    uint64_t op;
    int32_t status;
    uint32_t reserved; // kDoneGranted: part of the copy was granted to the initiator (it completes after it)
};
inline constexpr uint32_t kDoneGranted = 1;
// Data records pad their body to 48 bytes so that header and body fill one cell and the payload starts 64-byte
// aligned in the ring.
struct PutDataBody {
    uint64_t op, key, raddr, off; // bytes go to raddr + off
    uint64_t reserved[2];
};
struct GetDataBody {
    uint64_t op, off;
    int32_t status;
    uint32_t reserved0;
    uint64_t reserved[3];
};
static_assert(sizeof(RecHdr) + sizeof(PutDataBody) == 64 && sizeof(RecHdr) + sizeof(GetDataBody) == 64);
} // namespace gdx::tp::shm
