#include "transport/tcp/tcp_address.h"

#include "transport/wire.h"

#include <arpa/inet.h>
#include <cstdio>

namespace gdx::tp::tcp {

std::string TcpAddress::ip_text() const {
    char buf[INET6_ADDRSTRLEN] = "?";
    inet_ntop(family == 6 ? AF_INET6 : AF_INET, ip.data(), buf, sizeof(buf));
    return buf;
}

void encode_address(const TcpAddress &a, uint8_t out[kAddressSize]) {
    out[0] = kAddressVersion;
    out[1] = static_cast<uint8_t>(wire::TransportId::Tcp);
    out[2] = a.family;
    out[3] = 0;
    wire::store_le16(out + 4, a.port);
    wire::store_le16(out + 6, 0);
    for (size_t i = 0; i < 16; ++i) out[8 + i] = a.ip[i];
    wire::store_le64(out + 24, a.iface_id);
    wire::store_le64(out + 32, a.ep_id);
}

gdx_status_t decode_address(std::span<const uint8_t> in, TcpAddress *out, std::string *why) {
    auto bad = [why](std::string s) {
        *why = std::move(s);
        return GDX_ERR_INVALID_ADDR;
    };
    if (in.size() != kAddressSize)
        return bad("tcp address of " + std::to_string(in.size()) + " bytes (expected " +
                   std::to_string(kAddressSize) + ")");
    const uint8_t *p = in.data();
    if (p[0] != kAddressVersion) return bad("tcp address version " + std::to_string(p[0]));
    if (p[1] != static_cast<uint8_t>(wire::TransportId::Tcp))
        return bad(std::string("address of transport '") + wire::transport_id_name(p[1]) + "', not 'tcp'");
    TcpAddress a;
    a.family = p[2];
    if (a.family != 4 && a.family != 6) return bad("tcp address family " + std::to_string(a.family));
    if (p[3] != 0 || wire::load_le16(p + 6) != 0) return bad("tcp address reserved bytes are not zero");
    a.port = wire::load_le16(p + 4);
    if (a.port == 0) return bad("tcp address with port 0");
    for (size_t i = 0; i < 16; ++i) a.ip[i] = p[8 + i];
    if (a.family == 4)
        for (size_t i = 4; i < 16; ++i)
            if (a.ip[i] != 0) return bad("IPv4 tcp address with non-zero padding");
    a.iface_id = wire::load_le64(p + 24);
    a.ep_id = wire::load_le64(p + 32);
    if (a.iface_id == 0 || a.ep_id == 0) return bad("tcp address with a zero interface or endpoint id");
    *out = a;
    return GDX_OK;
}

} // namespace gdx::tp::tcp
