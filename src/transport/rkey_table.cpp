#include "transport/rkey_table.h"

#include "core/error.h"
#include "transport/transport.h"
#include "transport/wire.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <sys/random.h>

namespace gdx::tp {

namespace {
std::string rights_text(unsigned a) {
    std::string s;
    if (a & kAccessRemoteRead) s += "remote-read";
    if (a & kAccessRemoteWrite) s += s.empty() ? "remote-write" : "+remote-write";
    return s.empty() ? "no remote access" : s;
}
} // namespace

gdx_status_t secure_random_u64(uint64_t *out) {
    uint8_t bytes[8];
    size_t got = 0;
    while (got < sizeof(bytes)) {
        ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_errno(GDX_ERR_IO, errno, "transport", "getrandom(8 bytes) for a key or endpoint id");
        }
        got += static_cast<size_t>(n);
    }
    *out = wire::load_le64(bytes);
    return GDX_OK;
}

gdx_status_t RkeyTable::add(uintptr_t base, size_t length, unsigned access, uint64_t *key_id) {
    std::unique_lock<std::shared_mutex> g(mutex_);
    // A collision among live 64-bit random ids is astronomically unlikely; the loop makes it impossible.
    for (int attempt = 0; attempt < 8; ++attempt) {
        uint64_t id = 0;
        gdx_status_t st = secure_random_u64(&id);
        if (st != GDX_OK) return st;
        if (id == 0 || records_.count(id) != 0) continue;
        try {
            records_.emplace(id, Record{base, length, access});
        } catch (const std::bad_alloc &) {
            return GDX_FAIL(GDX_ERR_NO_MEMORY, "transport", "remote-key table: out of memory adding a key");
        }
        *key_id = id;
        return GDX_OK;
    }
    return GDX_FAIL(GDX_ERR_INTERNAL, "transport", "remote-key table: could not draw an unused key id");
}

void RkeyTable::revoke(uint64_t key_id) {
    std::unique_lock<std::shared_mutex> g(mutex_);
    records_.erase(key_id);
}

size_t RkeyTable::size() const {
    std::shared_lock<std::shared_mutex> g(mutex_);
    return records_.size();
}

gdx_status_t RkeyTable::check(const Pin &, uint64_t key_id, uint64_t addr, uint64_t len, unsigned need,
                              uint8_t **ptr, std::string *why) const {
    char buf[256];
    auto it = records_.find(key_id);
    if (key_id == 0 || it == records_.end()) {
        std::snprintf(buf, sizeof(buf), "key 0x%016" PRIx64 " opens no registration here (never issued, or revoked)",
                      key_id);
        *why = buf;
        return GDX_ERR_ACCESS_DENIED;
    }
    const Record &r = it->second;
    if ((r.access & need) != need) {
        std::snprintf(buf, sizeof(buf), "key 0x%016" PRIx64 " grants %s, the request needs %s", key_id,
                      rights_text(r.access).c_str(), rights_text(need).c_str());
        *why = buf;
        return GDX_ERR_ACCESS_DENIED;
    }
    if (!wire::range_inside(addr, len, r.base, r.length)) {
        std::snprintf(buf, sizeof(buf),
                      "range 0x%" PRIx64 "+%" PRIu64 " is outside registration 0x%" PRIxPTR "+%zu of key 0x%016" PRIx64,
                      addr, len, r.base, r.length, key_id);
        *why = buf;
        return GDX_ERR_ACCESS_DENIED;
    }
    *ptr = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(addr));
    return GDX_OK;
}

} // namespace gdx::tp
