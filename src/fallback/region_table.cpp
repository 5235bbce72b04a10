#include "fallback/region_table.h"

#include "core/error.h"
#include "fallback/reporter.h"

#include <cerrno>
#include <cstdio>
#include <sys/random.h>

namespace gdx::fb {

gdx_status_t RegionTable::new_id(uint64_t *id) const {
    *id = 0;
    while (*id == 0 || regions_.count(*id) != 0) {
        if (getrandom(id, sizeof(*id), 0) != static_cast<ssize_t>(sizeof(*id)))
            return fail_errno(GDX_ERR_IO, errno, kComp, "mem_reg: getrandom for the region id");
    }
    return GDX_OK;
}

Region &RegionTable::insert(std::unique_ptr<Region> region) {
    Region &r = *region;
    regions_.emplace(r.id(), std::move(region));
    return r;
}

Region *RegionTable::find(uint64_t id) const {
    auto it = regions_.find(id);
    return it == regions_.end() ? nullptr : it->second.get();
}

gdx_status_t RegionTable::check_request(bool is_put, const Region &local, size_t local_off,
                                        const RemoteRegion &remote, size_t remote_off, size_t len) const {
    const char *op = is_put ? "put" : "get";
    if (!owns(local))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: the local region is not registered with this engine", op);
    if (local_off > local.length() || len > local.length() - local_off)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: local [%zu, +%zu) is outside the region of %zu bytes", op,
                        local_off, len, local.length());
    if (remote_off > remote.length() || len > remote.length() - remote_off)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: remote [%zu, +%zu) is outside the region of %llu bytes",
                        op, remote_off, len, static_cast<unsigned long long>(remote.length()));
    unsigned lneed = is_put ? tp::kAccessLocalRead : tp::kAccessLocalWrite;
    unsigned rneed = is_put ? tp::kAccessRemoteWrite : tp::kAccessRemoteRead;
    if ((local.access() & lneed) == 0 || (remote.access() & rneed) == 0)
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "%s: the %s region was not registered for %s", op,
                        (local.access() & lneed) == 0 ? "local" : "remote",
                        (local.access() & lneed) == 0 ? (is_put ? "local read" : "local write")
                                                      : (is_put ? "remote write" : "remote read"));
    return GDX_OK;
}

Region *RegionTable::check_peer_request(uint64_t id, uint64_t offset, uint64_t length, unsigned need,
                                        gdx_status_t *st, std::string *why) const {
    char buf[160];
    Region *r = find(id);
    if (length == 0) {
        *st = GDX_ERR_PROTOCOL;
        std::snprintf(buf, sizeof(buf), "zero length");
    } else if (r == nullptr) {
        *st = GDX_ERR_ACCESS_DENIED;
        std::snprintf(buf, sizeof(buf), "region %#llx is not registered here (stale or forged key)",
                      static_cast<unsigned long long>(id));
    } else if ((r->access() & need) != need) {
        *st = GDX_ERR_ACCESS_DENIED;
        std::snprintf(buf, sizeof(buf), "region %#llx was not registered for remote %s",
                      static_cast<unsigned long long>(id), need == tp::kAccessRemoteWrite ? "write" : "read");
    } else if (offset > r->length() || length > r->length() - offset) {
        *st = GDX_ERR_ACCESS_DENIED;
        std::snprintf(buf, sizeof(buf), "[%llu, +%llu) is outside region %#llx of %zu bytes",
                      static_cast<unsigned long long>(offset), static_cast<unsigned long long>(length),
                      static_cast<unsigned long long>(id), r->length());
    } else {
        return r;
    }
    *why = buf;
    return nullptr;
}

} // namespace gdx::fb
