#include "memtype/host_mapping.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gdx::mem {

namespace {
// A line of /proc/self/maps: "start-end perms offset dev inode [path]".
bool parse_line(const char *line, uintptr_t *start, uintptr_t *end, char perms[5], const char **path) {
    int consumed = 0;
    unsigned long long s = 0, e = 0;
    if (std::sscanf(line, "%llx-%llx %4s %*s %*s %*s %n", &s, &e, perms, &consumed) < 3 || consumed == 0)
        return false;
    *start = static_cast<uintptr_t>(s);
    *end = static_cast<uintptr_t>(e);
    *path = line + consumed;
    return true;
}
} // namespace

HostMappingOrigin host_mapping_origin(const void *p, std::string *why) {
    FILE *f = std::fopen("/proc/self/maps", "re");
    if (f == nullptr) {
        *why = std::string("open /proc/self/maps: ") + std::strerror(errno);
        return HostMappingOrigin::Unknown;
    }
    const auto addr = reinterpret_cast<uintptr_t>(p);
    char *line = nullptr;
    size_t cap = 0;
    HostMappingOrigin origin = HostMappingOrigin::Unknown;
    *why = "address not in /proc/self/maps";
    while (getline(&line, &cap, f) > 0) {
        uintptr_t start = 0, end = 0;
        char perms[5] = {};
        const char *path = nullptr;
        if (!parse_line(line, &start, &end, perms, &path) || addr < start || addr >= end) continue;
        const bool shared = perms[3] == 's';
        const bool driver_file = std::strncmp(path, "/dev/zero (deleted)", 19) == 0 ||
                                 std::strncmp(path, "/dev/nvidia", 11) == 0;
        origin = shared && driver_file ? HostMappingOrigin::Driver : HostMappingOrigin::Application;
        why->clear();
        break;
    }
    std::free(line);
    std::fclose(f);
    return origin;
}

} // namespace gdx::mem
