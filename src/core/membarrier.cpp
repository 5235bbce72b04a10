#include "core/membarrier.h"

#include <cerrno>
#include <cstring>
#include <linux/membarrier.h>
#include <mutex>
#include <sys/syscall.h>
#include <unistd.h>

namespace gdx::sys {
namespace {

int sys_membarrier(int cmd) { return static_cast<int>(syscall(__NR_membarrier, cmd, 0u, 0)); }

struct Kind {
    int cmd, reg;
    const char *name, *reg_name, *since;
};
constexpr Kind kind(Barrier b) {
    return b == Barrier::Global ? Kind{MEMBARRIER_CMD_GLOBAL_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
                                       "GLOBAL_EXPEDITED", "REGISTER_GLOBAL_EXPEDITED", "Linux >= 4.16"}
                                : Kind{MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                                       "PRIVATE_EXPEDITED", "REGISTER_PRIVATE_EXPEDITED", "Linux >= 4.14"};
}

} // namespace

gdx_status_t membarrier_register(Barrier b, std::string *why) {
    struct Done {
        pid_t pid = 0;
        gdx_status_t st = GDX_OK;
        std::string why;
    };
    static std::mutex m;
    static Done done[2];
    const Kind k = kind(b);
    std::lock_guard<std::mutex> g(m);
    Done &d = done[b == Barrier::Global ? 1 : 0];
    if (d.pid != getpid()) {
        d = Done{getpid(), GDX_OK, {}};
        const int cmds = sys_membarrier(MEMBARRIER_CMD_QUERY);
        if (cmds < 0) {
            d.why = std::string("membarrier(QUERY) failed: ") + std::strerror(errno) +
                    " (no CONFIG_MEMBARRIER, or a seccomp filter)";
            d.st = GDX_ERR_UNSUPPORTED;
        } else if ((cmds & (k.cmd | k.reg)) != (k.cmd | k.reg)) {
            d.why = std::string("the kernel offers no MEMBARRIER_CMD_") + k.name + " (" + k.since + ")";
            d.st = GDX_ERR_UNSUPPORTED;
        } else if (sys_membarrier(k.reg) != 0) {
            d.why = std::string("membarrier(") + k.reg_name + ") failed: " + std::strerror(errno);
            d.st = GDX_ERR_UNSUPPORTED;
        }
    }
    if (why != nullptr) *why = d.why;
    return d.st;
}

int membarrier_issue(Barrier b) { return sys_membarrier(kind(b).cmd) == 0 ? 0 : errno; }

} // namespace gdx::sys
