// Bridge, first half: the transport list, the GDX_* settings as UCX sees them, memory-type classification, and
// the memory domain (registration through the gdx transport's MemoryDomain, remote-key packing and unpacking).
#include "core/error.h"
#include "core/log.h"
#include "uct/bridge_engine.h"
#include "transport/open_interfaces.h"
#include "memtype/free_hooks.h"
#include "uct/bridge_internal.h"
#include "uct/config_vars.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

using namespace gdx;

namespace {

// Effective defaults, computed once: GDX_<name> from the environment if set, else gdx's default. Showing them
// in `ucx_info -c` tells the user what applies; a UCX_GDX_* value that differs becomes an override.
const std::vector<std::string> &effective_defaults() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> out;
        for (const ConfigVarDesc &d : config_table()) {
            const char *env = std::getenv(std::string(d.name).c_str());
            out.emplace_back(env != nullptr ? std::string(env) : std::string(d.default_value));
        }
        return out;
    }();
    return v;
}

bool is_cuda_direct(uint32_t mask) {
    using mem::MemType;
    return (mask & (tp::type_bit(MemType::CudaDevice) | tp::type_bit(MemType::CudaVmm) |
                    tp::type_bit(MemType::CudaPool) | tp::type_bit(MemType::CudaIpcImported))) != 0;
}

bool reaches_host(uint32_t mask) {
    using mem::MemType;
    return (mask & (tp::type_bit(MemType::HostPageable) | tp::type_bit(MemType::HostPinned) |
                    tp::type_bit(MemType::HostRegistered))) != 0;
}

} // namespace

namespace gdx::uct {

tp::Component *tl_component(unsigned tl) {
    auto comps = tp::components();
    return tl < comps.size() && tl < GDX_UCT_MAX_TLS ? comps[tl] : nullptr;
}

} // namespace gdx::uct

using namespace gdx::uct;

gdx_status_t gdx::uct::classify(mem::Detector &det, const void *addr, size_t len, mem::MemInfo *out) {
    if (addr == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "memory query: %s (addr %p, length %zu)",
                        addr == nullptr ? "null address" : "zero length", addr, len);
    return det.detect_one(addr, out);
}

gdx_status_t gdx::uct::mem_detect(mem::Detector &det, const void *addr, size_t len, gdx_uct_mem_info_t *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "memory query: null output");
    mem::MemInfo info;
    gdx_status_t st = classify(det, addr, len, &info);
    if (st != GDX_OK) return st;
    std::memset(out, 0, sizeof(*out));
    if (!info.host_accessible || info.type == mem::MemType::CudaManaged) {
        out->type = info.type == mem::MemType::CudaManaged ? GDX_UCT_MEM_CUDA_MANAGED : GDX_UCT_MEM_CUDA;
    } else {
        out->type = GDX_UCT_MEM_HOST; // host kinds and host-located VMM: the CPU loads and stores them
    }
    out->base = reinterpret_cast<void *>(info.base);
    out->length = info.size;
    if (out->type != GDX_UCT_MEM_HOST && info.device >= 0)
        std::snprintf(out->bus_id, sizeof(out->bus_id), "%s", mem::device_bus_id(mem::MemKind::Cuda, info.device).c_str());
    return GDX_OK;
}

// ---- process level -----------------------------------------------------------------------------------------

extern "C" unsigned gdx_uct_tl_count(void) {
    size_t n = tp::components().size();
    if (n > GDX_UCT_MAX_TLS)
        GDX_LOG_ONCE(log::Level::Warn, kComp, "uct-too-many-tls",
                     "gdx has %zu transports; libuct_gdx exposes the first %d (GDX_UCT_MAX_TLS)", n, GDX_UCT_MAX_TLS);
    return static_cast<unsigned>(n < GDX_UCT_MAX_TLS ? n : GDX_UCT_MAX_TLS);
}

extern "C" const char *gdx_uct_tl_name(unsigned index) {
    // UCT transport names hold UCT_TL_NAME_MAX - 1 = 9 characters and UCX cuts longer ones without a word (UCX_TLS
    // would then never match): a gdx transport whose "gdx_" name would not fit gets a short name, here, so UCX's
    // listing and every line the module logs (path totals, refusals) name it alike.
    static constexpr std::pair<std::string_view, std::string_view> kShort[] = {{"cuda_ipc", "ipc"}};
    static std::string names[GDX_UCT_MAX_TLS]; // NUL-terminated copies; string_view need not be
    tp::Component *c = tl_component(index);
    if (c == nullptr) return nullptr;
    if (names[index].empty()) {
        std::string_view n = c->name();
        for (const auto &[full, short_name] : kShort)
            if (n == full) n = short_name;
        names[index] = std::string(n);
    }
    return names[index].c_str();
}

extern "C" unsigned gdx_uct_config_count(void) { return static_cast<unsigned>(config_table().size()); }

extern "C" void gdx_uct_config_entry(unsigned index, const char **name, const char **dflt, const char **doc) {
    const ConfigVarDesc &d = config_table()[index];
    // The table's names and docs are string literals, so data() is NUL-terminated; "GDX_" is dropped because
    // UCX adds its own prefix (UCX_ + GDX_ + name).
    *name = d.name.data() + 4;
    *dflt = effective_defaults()[index].c_str();
    *doc = d.doc.data();
}

extern "C" const char *gdx_uct_last_error(void) { return gdx::last_error().c_str(); }

// ---- memory types ------------------------------------------------------------------------------------------

extern "C" int gdx_uct_cuda_available(gdx_uct_md_t *md) { return md->detector->gpu_enabled() ? 1 : 0; }
extern "C" int gdx_uct_ucx_hooks_cuda(void) {
    std::string why;
    return mem::ucx_hooks_cuda(&why) ? 1 : 0;
}

extern "C" int gdx_uct_md_detects(gdx_uct_md_t *md) {
    return md->detector->gpu_enabled() && md->cfg.str(UctVar::UCT_DETECT) == "all" ? 1 : 0;
}

extern "C" gdx_status_t gdx_uct_mem_detect(gdx_uct_md_t *md, const void *addr, size_t len,
                                           gdx_uct_mem_info_t *out) {
    return mem_detect(*md->detector, addr, len, out);
}

// ---- memory domain -----------------------------------------------------------------------------------------


static gdx_status_t copy_devices(const std::vector<tp::DeviceDesc> &devs, const char *tl, gdx_uct_device_t **devices,
                                 unsigned *count) {
    *count = 0;
    *devices = static_cast<gdx_uct_device_t *>(std::calloc(devs.empty() ? 1 : devs.size(), sizeof(gdx_uct_device_t)));
    if (*devices == nullptr)
        return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "query devices of gdx_%s: out of memory", tl);
    for (const tp::DeviceDesc &d : devs) {
        gdx_uct_device_t &o = (*devices)[(*count)++];
        std::snprintf(o.name, sizeof(o.name), "%s", d.name.c_str());
        std::snprintf(o.sys_bus_id, sizeof(o.sys_bus_id), "%s", d.sys_bus_id.c_str());
        o.intra_node = d.intra_node ? 1 : 0;
    }
    return GDX_OK;
}

extern "C" gdx_status_t gdx_uct_tl_devices(unsigned tl, gdx_uct_device_t **devices, unsigned *count) {
    tp::Component *comp = tl_component(tl);
    if (comp == nullptr || devices == nullptr || count == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "query devices: bad transport index %u or null output", tl);
    std::vector<tp::DeviceDesc> devs;
    gdx_status_t st = comp->query_devices(&devs);
    if (st != GDX_OK) return st;
    return copy_devices(devs, gdx_uct_tl_name(tl), devices, count);
}

extern "C" gdx_status_t gdx_uct_md_open(unsigned tl, const char *const *values, gdx_uct_md_t **out) {
    tp::Component *comp = tl_component(tl);
    if (comp == nullptr || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "md open: bad transport index %u or null output", tl);

    // UCX_GDX_<X> values that differ from the effective default are overrides (they win over GDX_<X>).
    Config::Overrides overrides;
    const auto &table = config_table();
    for (size_t i = 0; values != nullptr && i < table.size(); ++i) {
        if (values[i] != nullptr && effective_defaults()[i] != values[i])
            overrides.emplace(std::string(table[i].name), values[i]);
    }
    auto md = std::unique_ptr<gdx_uct_md>(new (std::nothrow) gdx_uct_md);
    if (!md) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "md open: out of memory");
    std::string err;
    if (Config::load(overrides, &md->cfg, &err) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp, "%s (UCX_GDX_* variables take the same values as GDX_*)",
                        err.c_str());
    if (config_apply_logging(md->cfg, &err) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp, "%s", err.c_str());
    gdx_status_t st = mem::Detector::create(md->cfg, &md->detector);
    if (st != GDX_OK) return st;

    md->tl = tl;
    md->comp = comp;
    // UCX is offered ONE device per transport: the first that opens with this configuration becomes the MD's
    // anchor (see gdx_uct_md::devices). A second device would get its own Interface, whose MemoryDomain does not
    // hold the registrations made through this UCT MD, so UCP's keys would not open memory there (seen on two
    // GPUs: "remote key was issued by another interface"). A GPU transport tries the GPU of the caller's
    // current CUDA context first: the one a rank bound to a GPU registers memory of (open_interfaces.h).
    tp::OpenOutcome o = tp::open_interface(*comp, md->cfg, tp::OpenRequest{});
    if (!o.failures.empty())
        GDX_INFO(kComp, "gdx_%s: not offered to UCX: %s", gdx_uct_tl_name(tl), o.failures.c_str());
    if (o.status != GDX_OK && o.devices == 0 && o.status != GDX_ERR_NO_DEVICE) return o.status; // query_devices
    if (o.status != GDX_OK)
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "md open: transport %s has no device it can open%s%s",
                        gdx_uct_tl_name(tl), o.failures.empty() ? "" : ": ", o.failures.c_str());
    md->devices.push_back(o.device);
    md->anchor = std::move(o.iface);
    md->anchor_dev = std::move(o.device);
    if (o.devices > 1)
        GDX_INFO(kComp, "gdx_%s offers UCX one device, %s, of the %zu it has (one memory domain per transport and "
                 "process)", gdx_uct_tl_name(tl), md->anchor_dev.name.c_str(), o.devices);
    md->md = &md->anchor->md();
    if (gdx_status_t est = UctEngine::create(*md, &md->ue); est != GDX_OK) return est;
    GDX_DEBUG(kComp, "md gdx_%s open (memory domain of interface %s/%s)", gdx_uct_tl_name(tl),
              std::string(md->anchor->transport_name()).c_str(), md->anchor_dev.name.c_str());
    *out = md.release();
    return GDX_OK;
}

extern "C" void gdx_uct_md_close(gdx_uct_md_t *md) {
    if (md == nullptr) return;
    if (md->ifaces != 0 || md->anchor_lent)
        GDX_ERROR(kComp, "md gdx_%s closed with %u interface(s) still open: closing it anyway",
                  gdx_uct_tl_name(md->tl), md->ifaces);
    delete md;
}

extern "C" void gdx_uct_md_query(gdx_uct_md_t *md, gdx_uct_md_attr_t *attr) {
    const tp::Capabilities &caps = md->anchor->caps();
    attr->am_zcopy_copies = (caps.flags & tp::kCapAmZcopyCopies) != 0 ? 1 : 0;
    if (md->ue) {
        // The engine registers every kind it can detect: what the transport does not reach, it stages. Host memory
        // only where the transport reaches it: a transport that stages through peer-mapped pools alone (cuda_ipc)
        // would carry host-to-host bytes as two copies through a pool, which UCP, seeing its GPU bandwidth, would
        // prefer to shm's single copy; so UCP keeps host memory on the transports made for it.
        attr->rkey_packed_size = md->ue->key_size();
        attr->reg_host = reaches_host(caps.direct_types) ? 1 : 0;
        attr->reg_cuda = attr->reg_cuda_managed = 1;
        attr->engine = 1;
        return;
    }
    attr->rkey_packed_size = 8 + md->md->rkey_packed_size(); // bridge_key.cpp: version 1
    attr->engine = 0;
    attr->reg_host = reaches_host(caps.direct_types) ? 1 : 0;
    attr->reg_cuda = is_cuda_direct(caps.direct_types) ? 1 : 0;
    attr->reg_cuda_managed = (caps.direct_types & tp::type_bit(mem::MemType::CudaManaged)) != 0 ? 1 : 0;
}

extern "C" gdx_status_t gdx_uct_md_devices(gdx_uct_md_t *md, gdx_uct_device_t **devices, unsigned *count) {
    return copy_devices(md->devices, gdx_uct_tl_name(md->tl), devices, count);
}

extern "C" gdx_status_t gdx_uct_mem_reg(gdx_uct_md_t *md, void *addr, size_t len, unsigned access,
                                        size_t gpu_tail_slack, gdx_uct_memh_t **out) {
    auto memh = std::unique_ptr<gdx_uct_memh>(new (std::nothrow) gdx_uct_memh);
    if (!memh) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "mem_reg %p+%zu: out of memory", addr, len);
    memh->md = md;
    if (md->ue) {
        gdx_status_t st = md->ue->mem_reg(addr, len, access, &memh->region, gpu_tail_slack);
        if (st != GDX_OK) return st;
        *out = memh.release();
        return GDX_OK;
    }
    mem::MemInfo info;
    gdx_status_t st = classify(*md->detector, addr, len, &info);
    if (st != GDX_OK) return st;
    st = md->md->mem_reg(addr, len, info, access, &memh->h);
    if (st != GDX_OK) return st;
    for (const tp::ChunkReg &c : memh->h->chunks()) {
        if (c.reach == tp::Reach::None)
            GDX_LOG_ONCE(log::Level::Info, kComp, std::string("uct-unreached:") + gdx_uct_tl_name(md->tl),
                         "gdx_%s cannot reach part of %p+%zu directly (%s); operations on it will fail",
                         gdx_uct_tl_name(md->tl), addr, len, c.reason.c_str());
    }
    *out = memh.release();
    return GDX_OK;
}

extern "C" void gdx_uct_mem_dereg(gdx_uct_memh_t *memh) {
    if (memh != nullptr && memh->region != nullptr) memh->md->ue->mem_dereg(memh->region);
    delete memh;
}
