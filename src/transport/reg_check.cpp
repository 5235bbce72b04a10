#include "transport/reg_check.h"

#include "core/error.h"

#include <cstdint>
#include <string>

namespace gdx::tp {

gdx_status_t check_mem_reg(const char *component, std::string_view where, const void *addr, size_t len,
                           const mem::MemInfo &info, unsigned access, const void *out, bool allow_empty) {
    const std::string at = where.empty() ? std::string() : std::string(where) + ": ";
    const char *cause = nullptr;
    if (out == nullptr) cause = "null output handle";
    else if (addr == nullptr && len > 0) cause = "null address";
    else if (len == 0 && !allow_empty) cause = "zero length";
    else if (access == 0 || (access & ~static_cast<unsigned>(kAccessAll)) != 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, component,
                        "%smem_reg(%p, %zu): access flags 0x%x (must be a non-empty subset of 0x%x)", at.c_str(), addr,
                        len, access, static_cast<unsigned>(kAccessAll));
    else if (reinterpret_cast<uintptr_t>(addr) > UINTPTR_MAX - len) cause = "the range wraps around";
    if (cause != nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, component, "%smem_reg(%p, %zu, access 0x%x): %s", at.c_str(), addr, len,
                        access, cause);
    return check_reg_access(addr, len, info, access, component);
}

} // namespace gdx::tp
