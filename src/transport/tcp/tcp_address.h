// The bytes a tcp endpoint hands out as Endpoint::address(): where its interface listens and which endpoint
// it is. Exchanged out of band (bootstrap); decoded and validated before use. Kept free of Asio so the
// fuzzer and the shm transport can include it cheaply.
//
// 40 bytes, little-endian:
//   0  1  version   kAddressVersion
//   1  1  transport wire::TransportId::Tcp
//   2  1  family    4 (IPv4) or 6 (IPv6)
//   3  1  reserved  0
//   4  2  port      listening port, never 0
//   6  2  reserved  0
//   8 16  ip        IPv4 in bytes 0..3 (rest 0), or the 16 IPv6 bytes; network order
//  24  8  iface_id  random id of the listening interface (non-zero)
//  32  8  ep_id     random id of the endpoint (non-zero)
#pragma once

#include "gdx/status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace gdx::tp::tcp {

inline constexpr uint8_t kAddressVersion = 1;
inline constexpr size_t kAddressSize = 40;

struct TcpAddress {
    uint8_t family = 4;
    uint16_t port = 0;
    std::array<uint8_t, 16> ip{};
    uint64_t iface_id = 0;
    uint64_t ep_id = 0;
    std::string ip_text() const; // "127.0.0.1", "::1"
};

void encode_address(const TcpAddress &a, uint8_t out[kAddressSize]);
// GDX_ERR_INVALID_ADDR with *why when the blob is not a valid tcp endpoint address.
gdx_status_t decode_address(std::span<const uint8_t> in, TcpAddress *out, std::string *why);

} // namespace gdx::tp::tcp
