// The registration access probe (memtype/access_probe.h): every size is judged alike (the VMA query answers for
// small ranges too, where the kernel has it, and populating where it has not); a forked child judges its own
// mappings, not its parent's (the probe keeps /proc/self/maps open, and /proc/self is resolved at open); a
// descriptor the application takes away is replaced; and the fork handler closes only the probe's own file.
#include "memtype/access_probe.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace gdx;

namespace {

size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

struct Map {
    explicit Map(size_t n, int prot = PROT_READ | PROT_WRITE) : len(n) {
        void *v = mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        p = v == MAP_FAILED ? nullptr : static_cast<char *>(v);
    }
    ~Map() {
        if (p != nullptr) munmap(p, len);
    }
    char *p;
    size_t len;
};

gdx_status_t probe(const void *p, size_t n, bool rd, bool wr) { return mem::probe_host_range(p, n, rd, wr, "test"); }

class AccessProbeSizes : public ::testing::TestWithParam<size_t> {};

TEST_P(AccessProbeSizes, MappedProtNoneReadOnlyAndHolesAreTold) {
    const size_t n = GetParam();
    Map rw(n);
    ASSERT_NE(rw.p, nullptr);
    EXPECT_EQ(probe(rw.p, n, true, true), GDX_OK);
    EXPECT_EQ(probe(rw.p + 1, n - 1, true, false), GDX_OK); // not page-aligned

    Map none(n, PROT_NONE);
    ASSERT_NE(none.p, nullptr);
    EXPECT_EQ(probe(none.p, n, true, false), GDX_ERR_INVALID_ADDR);

    Map ro(n, PROT_READ);
    ASSERT_NE(ro.p, nullptr);
    EXPECT_EQ(probe(ro.p, n, true, false), GDX_OK);
    EXPECT_EQ(probe(ro.p, n, false, true), GDX_ERR_INVALID_ADDR);

    Map last_none(n + page()); // mapped, then its last page made inaccessible
    ASSERT_NE(last_none.p, nullptr);
    ASSERT_EQ(mprotect(last_none.p + n, page(), PROT_NONE), 0);
    EXPECT_EQ(probe(last_none.p, n, true, true), GDX_OK);
    EXPECT_EQ(probe(last_none.p, n + page(), true, false), GDX_ERR_INVALID_ADDR);

    Map holed(n + 2 * page()); // a hole one page in
    ASSERT_NE(holed.p, nullptr);
    ASSERT_EQ(munmap(holed.p + page(), page()), 0);
    EXPECT_EQ(probe(holed.p, n + 2 * page(), true, false), GDX_ERR_INVALID_ADDR);
    EXPECT_EQ(probe(holed.p + 2 * page(), n, true, true), GDX_OK);
}

INSTANTIATE_TEST_SUITE_P(Each, AccessProbeSizes,
                         ::testing::Values(size_t{4} << 10, size_t{64} << 10, size_t{256} << 10, size_t{1} << 20,
                                           size_t{4} << 20),
                         [](const auto &info) { return std::to_string(info.param >> 10) + "KiB"; });

// The child unmaps what the parent still has, and maps what the parent never had: answered from the parent's
// mappings (a descriptor opened before the fork), both verdicts would be wrong.
TEST(AccessProbe, ForkedChildJudgesItsOwnMappings) {
    const size_t n = 64 * page();
    Map shared_before(n);
    ASSERT_NE(shared_before.p, nullptr);
    ASSERT_EQ(probe(shared_before.p, n, true, true), GDX_OK); // the probe's descriptor is open now
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int bad = 0;
        if (munmap(shared_before.p, n) != 0) _exit(10);
        if (probe(shared_before.p, n, true, false) != GDX_ERR_INVALID_ADDR) bad |= 1;
        void *v = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (v == MAP_FAILED) _exit(11);
        if (probe(v, n, true, true) != GDX_OK) bad |= 2;
        _exit(bad);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: an unmapped range passed in the child; 2: the child's own mapping "
                                         "was refused; 10/11: the child's munmap/mmap failed";
    EXPECT_EQ(probe(shared_before.p, n, true, true), GDX_OK); // the parent's answer is still its own
}

// The descriptors of this process open on /proc/<pid>/maps (the probe keeps one).
std::vector<int> maps_fds() {
    std::vector<int> out;
    const std::string want = "/proc/" + std::to_string(getpid()) + "/maps";
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(e.path(), ec);
        if (!ec && target == want) out.push_back(std::stoi(e.path().filename().string()));
    }
    return out;
}

// An application that closed the probe's descriptors and opened another file under their numbers: after one probe
// of `m`, /dev/null goes under each; returns those numbers (empty where the probe keeps none: no PROCMAP_QUERY).
std::vector<int> reuse_probe_descriptors(const Map &m) {
    EXPECT_EQ(probe(m.p, m.len, true, true), GDX_OK);
    std::vector<int> fds = maps_fds();
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(devnull, 0);
    for (int fd : fds) EXPECT_EQ(dup2(devnull, fd), fd);
    if (devnull >= 0) close(devnull);
    return fds;
}

// An application that closes descriptors it does not know (and opens others under their numbers) must leave the
// probe answering, through a descriptor of its own again, not give it up for a kernel without the query.
TEST(AccessProbe, ADescriptorTakenFromUnderItIsReopened) {
    Map rw(16 * page()), none(16 * page(), PROT_NONE);
    ASSERT_NE(rw.p, nullptr);
    ASSERT_NE(none.p, nullptr);
    const std::vector<int> before = reuse_probe_descriptors(rw);
    if (before.empty()) GTEST_SKIP() << "this kernel has no PROCMAP_QUERY: the probe populates and keeps no descriptor";
    EXPECT_EQ(probe(none.p, none.len, true, false), GDX_ERR_INVALID_ADDR);
    EXPECT_EQ(probe(rw.p, rw.len, true, true), GDX_OK);
    EXPECT_FALSE(maps_fds().empty()) << "the probe gave the query up instead of reopening /proc/self/maps";
    for (int fd : before) close(fd); // the /dev/null copies
}

// The fork handler closes the probe's descriptor in the child only while its number still names /proc/<pid>/maps:
// a file the application opened under that number stays open in the child.
TEST(AccessProbe, ForkLeavesTheApplicationsFileUnderAReusedNumber) {
    Map rw(16 * page());
    ASSERT_NE(rw.p, nullptr);
    const std::vector<int> before = reuse_probe_descriptors(rw);
    if (before.empty()) GTEST_SKIP() << "this kernel has no PROCMAP_QUERY: the probe populates and keeps no descriptor";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        for (int fd : before) {
            char target[64] = {};
            std::string link = "/proc/self/fd/" + std::to_string(fd);
            if (readlink(link.c_str(), target, sizeof(target) - 1) < 0 || std::string(target) != "/dev/null") _exit(1);
        }
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the fork handler closed the application's file in the child";
    EXPECT_EQ(probe(rw.p, rw.len, true, true), GDX_OK); // and the parent's probe opens its own again
    for (int fd : before) close(fd);
}

} // namespace
