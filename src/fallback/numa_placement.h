// Where bounce buffers live: on the NUMA node nearest the GPU they serve, so that the copy engine's D2H/H2D
// traffic does not cross the inter-socket link (a cross-socket bounce buffer costs PCIe bandwidth on every
// fragment; NCCL and UCX both place their staging memory by the GPU's locality). The topology questions are
// src/topo's (its one hwloc owner: this machine, or GDX_TOPO_FILE); the policy is here.
#pragma once

#include "memtype/memory_ops.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace gdx::topo {
class Topology;
}

namespace gdx::fb {

// Where memory for one device should go, and why (the pool's log line).
struct Placement {
    std::string nodes; // hwloc list syntax ("1"); "" = default policy
    std::string text;  // "NUMA node 1 (nearest GPU 0 at 0000:18:00.0)", "single NUMA node", ...
    std::shared_ptr<const topo::Topology> topology;
};

// The placement for CUDA device `device` (-1: no device affinity), from the topology of `topo_file` (GDX_TOPO_FILE;
// "" = this machine). Never fails: what cannot be found leaves the default policy and says why.
Placement place_near_device(int device, const std::string &topo_file);
// The same for the PCI device `bus_id`, named `label` in the text ("GPU 0").
Placement place_near_pci(const std::string &bus_id, const std::string &label, const std::string &topo_file);

// Allocates `len` bytes with `alloc` placed as `where` says: the calling thread's memory policy is bound to the
// nodes around the allocation (cuMemHostAlloc faults its pages in itself, so only the allocating thread's policy
// reaches them), and the range's policy is set before anything touches it (allocators that return untouched
// memory). *text is where.text plus what binding could not be done. Binding is best effort (never with a topology
// from a file: that is another machine's); only the allocation itself can fail.
using HostAllocFn = std::function<gdx_status_t(void **out)>;
gdx_status_t alloc_placed(const Placement &where, const HostAllocFn &alloc, size_t len, void **out, std::string *text);

// place_near_device + alloc_placed with `row`.host_alloc, or with any allocator of `len` bytes (e.g. a transport's
// shared-memory segment, whose pages are untouched until first use).
gdx_status_t alloc_near_device(const mem::Ops &row, size_t len, int device, const std::string &topo_file, void **out,
                               std::string *placement);
gdx_status_t alloc_near_device(const HostAllocFn &alloc, size_t len, int device, const std::string &topo_file,
                               void **out, std::string *placement);

} // namespace gdx::fb
