// Where bounce buffers live: on the NUMA node nearest the GPU they serve, so that the copy engine's D2H/H2D
// traffic does not cross the inter-socket link (a cross-socket bounce buffer costs PCIe bandwidth on every
// fragment; NCCL and UCX both place their staging memory by the GPU's locality).
#pragma once

#include "memtype/memory_ops.h"

#include <cstddef>
#include <functional>
#include <string>

namespace gdx::fb {

// Allocates `len` bytes of bounce memory with `row`.host_alloc for `device` (-1: no device affinity). On a machine
// with several NUMA nodes the pages are bound to the GPU's node (found from its PCI bus id in the hwloc topology):
// the calling thread's memory policy is set to that node around host_alloc (cuMemHostAlloc faults its pages in
// itself, so only the allocating thread's policy reaches them), and the range's policy is set with
// hwloc_set_area_membind before anything touches it (host_alloc rows that return untouched memory). *placement
// says where the pages were asked to go and why, for the pool's log line. Binding is best effort: a failure to
// find or bind the node leaves the default policy and says so; only the allocation itself can fail.
gdx_status_t alloc_near_device(const mem::Ops &row, size_t len, int device, void **out, std::string *placement);
// The same around any allocator that returns `len` bytes (e.g. a transport's shared-memory segment, whose pages
// are untouched until first use, so the range's policy decides where they land).
using HostAllocFn = std::function<gdx_status_t(void **out)>;
gdx_status_t alloc_near_device(const HostAllocFn &alloc, size_t len, int device, void **out, std::string *placement);

// Where the pages of [p, p+len) are now ("NUMA node 0", or why unknown), for the pool's log line after first use.
std::string describe_memory_location(const void *p, size_t len);

} // namespace gdx::fb
