// The table of transports compiled into gdx, in preference order. A new transport is one line here (and its
// folder). Each factory returns a process-lifetime singleton.
#include "transport/cuda_ipc/ipc_iface.h"
#include "transport/rc/component.h"
#include "transport/shm/shm_iface.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"
#include "memtype/memory_ops.h"

#include <algorithm>

namespace gdx::tp {

namespace {
Component *const kComponents[] = {
    cuda_ipc::cuda_ipc_component(), // intra-node first: they reach only peers on this host, and do it best
    shm::shm_component(),
    rc::component(), // RDMA first: preferred wherever a NIC reaches the peer
    tcp_component(), // last resort: reaches any peer with an IP route, host memory only
};
} // namespace

std::span<Component *const> components() {
    static std::vector<Component *> list = [] {
        std::vector<Component *> v;
        for (Component *c : kComponents)
            if (c != nullptr) v.push_back(c);
        return v;
    }();
    return list;
}

void prefer_current_gpu(std::vector<DeviceDesc> *devs) {
    if (devs == nullptr) return;
    const mem::MemKind gpu = mem::MemKind::Cuda;
    int current = mem::ops(gpu).current_device();
    if (current < 0) return;
    std::string bus = mem::device_bus_id(gpu, current);
    if (bus.empty()) return;
    auto it = std::find_if(devs->begin(), devs->end(),
                           [&](const DeviceDesc &x) { return !x.sys_bus_id.empty() && x.sys_bus_id == bus; });
    if (it != devs->end()) std::rotate(devs->begin(), it, it + 1);
}

Component *find_component(std::string_view name) {
    for (Component *c : components())
        if (c->name() == name) return c;
    return nullptr;
}

} // namespace gdx::tp
