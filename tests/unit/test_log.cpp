#include "core/error.h"
#include "core/log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <thread>
#include <unistd.h>

using namespace gdx;

namespace {
std::string slurp(const std::string &path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}
} // namespace

TEST(Log, LineCarriesTimePidThreadComponentAndLevelFiltered) {
    std::string path = testing::TempDir() + "/gdx_log_%p.log", why;
    ASSERT_TRUE(log::configure(log::Level::Info, path, &why)) << why;
    GDX_INFO("memtype", "hello %d", 42);
    GDX_DEBUG("memtype", "filtered out");
    std::thread([] { GDX_WARN("transport", "from a thread"); }).join();
    ASSERT_TRUE(log::configure(log::Level::Warn, "stderr", &why));
    std::string real = testing::TempDir() + "/gdx_log_" + std::to_string(getpid()) + ".log";
    std::string all = slurp(real);
    std::regex line(R"(\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\] \[[^:]+:)" + std::to_string(getpid()) +
                    R"(:\d+\] memtype +INFO  hello 42\n)");
    EXPECT_TRUE(std::regex_search(all, line)) << all;
    EXPECT_EQ(all.find("filtered out"), std::string::npos);
    EXPECT_NE(all.find("transport WARN  from a thread"), std::string::npos) << all;
    std::remove(real.c_str());
}

TEST(Log, OnceKeysAndUnopenableFile) {
    log::reset_once_keys();
    EXPECT_TRUE(log::first_time("k1"));
    EXPECT_FALSE(log::first_time("k1"));
    EXPECT_TRUE(log::first_time("k2"));
    std::string why;
    EXPECT_FALSE(log::configure(log::Level::Info, "/nonexistent-dir/x.log", &why));
    EXPECT_NE(why.find("/nonexistent-dir/x.log"), std::string::npos) << why;
    EXPECT_EQ(log::level(), log::Level::Warn); // a failed configure changes nothing
}

TEST(Error, FailErrnoNamesCallAndReason) {
    EXPECT_EQ(fail_errno(GDX_ERR_IO, ENOENT, "test", "open(%s)", "/x"), GDX_ERR_IO);
    EXPECT_NE(last_error().find("open(/x): No such file or directory (errno 2)"), std::string::npos) << last_error();
}
