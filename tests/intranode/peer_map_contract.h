// The peer-map contract (kCapPeerMap: MemoryDomain::alloc_shared + Endpoint::map_remote, src/transport/shm/
// peer_map.h), checked the same way over every transport that serves it (shm on the CPU set, cuda_ipc on the GPU
// set): two interfaces of one process, one owning shared segments, the other mapping them.
#pragma once

#include "core/config.h"

#include <string>

namespace gdx::test {

// A peer maps a shared segment it holds a read+write key to, both ways through one set of pages, answered from
// the mapping the second time; put and get through the key reach the same bytes; ordinary registered memory, a
// read-only key and a revoked key open nothing; once the owner is gone, requests fail with the endpoint's error.
// Reports through gtest assertions.
void check_peer_map_contract(const std::string &transport, const std::string &device,
                             const Config::Overrides &overrides);

} // namespace gdx::test
