// The tcp transport's entry points. Everything else goes through the generic interface of transport.h.
//
//   std::unique_ptr<gdx::tp::Interface> iface;
//   gdx::tp::tcp::open_iface(cfg, &iface);        // listens on GDX_TCP_ADDR, ephemeral port
//   std::unique_ptr<gdx::tp::Endpoint> ep;
//   iface->ep_create(&ep);                        // on both sides
//   ... exchange ep->address() out of band (gdx::tp::Bootstrap::allgather) ...
//   ep->connect(peer_address);                    // on both sides; then progress() until state() == GDX_OK
#pragma once

#include "core/config.h"
#include "transport/transport.h"

#include <memory>

namespace gdx::tp {

// The tcp transport family (registry.cpp lists it).
Component *tcp_component();

namespace tcp {

// Opens the tcp interface on the network device that owns GDX_TCP_ADDR (with a wildcard address such as
// 0.0.0.0: the first non-loopback device that is up, else lo). GDX_ERR_NO_DEVICE when no device owns it,
// GDX_ERR_INVALID_CONFIG for a bad GDX_* value; the log line says which.
gdx_status_t open_iface(const Config &cfg, std::unique_ptr<Interface> *out);

} // namespace tcp
} // namespace gdx::tp
