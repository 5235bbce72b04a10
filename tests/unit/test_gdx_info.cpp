// gdx_info as a user runs it: exit codes and what it prints.
#include "core/config.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sys/wait.h>

namespace {

struct RunResult {
    int status;
    std::string out;
};

RunResult run(const std::string &env, const std::string &args) {
    std::string cmd = "env " + env + " " GDX_TEST_BINARY_DIR "/tools/gdx_info " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    EXPECT_NE(p, nullptr);
    RunResult r{-1, {}};
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

} // namespace

TEST(GdxInfo, ConfigListsEveryVariableWithValueDefaultSourceDoc) {
    RunResult r = run("GDX_STAGING_DEPTH=6", "-c");
    ASSERT_EQ(r.status, 0) << r.out;
    for (const auto &d : gdx::config_table()) {
        EXPECT_NE(r.out.find(std::string(d.name) + "="), std::string::npos) << d.name;
        EXPECT_NE(r.out.find(std::string(d.doc.substr(0, 30))), std::string::npos) << d.name;
    }
    EXPECT_NE(r.out.find("GDX_STAGING_DEPTH=6\n#   default: 4 | source: environment"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("GDX_GDR=try\n#   default: try | source: default"), std::string::npos) << r.out;
}

TEST(GdxInfo, BogusLogLevelFailsNamingVariableValueAccepted) {
    RunResult r = run("GDX_LOG_LEVEL=bogus", "");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.out.find("GDX_LOG_LEVEL"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bogus"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("error, warn, info, debug, trace"), std::string::npos) << r.out;
}

TEST(GdxInfo, UnknownVariableWarnsAndProceeds) {
    RunResult r = run("GDX_LOG_LEVL=debug", "");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("unknown variable GDX_LOG_LEVL"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("# gdx "), std::string::npos) << r.out;
}

TEST(GdxInfo, DevicesSayNoneFoundPlainlyOrListThem) {
    RunResult r = run("", "-d");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("# GPUs"), std::string::npos);
    EXPECT_NE(r.out.find("# RDMA devices"), std::string::npos);
    // Either a device line or a plain "none found" in each section; never an error exit.
    EXPECT_TRUE(r.out.find("GPU0:") != std::string::npos || r.out.find("none found") != std::string::npos) << r.out;
}

TEST(GdxInfo, BadOptionIsUsageError) {
    RunResult r = run("", "-Z");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.out.find("Usage: gdx_info"), std::string::npos) << r.out;
}

TEST(GdxInfo, LongOptionsWorkLikeTheShortOnes) {
    RunResult help = run("", "--help");
    EXPECT_EQ(help.status, 0) << help.out;
    EXPECT_NE(help.out.find("--config"), std::string::npos) << help.out;
    RunResult lng = run("", "--config"), shrt = run("", "-c");
    ASSERT_EQ(lng.status, 0) << lng.out;
    EXPECT_NE(lng.out.find("GDX_LOG_LEVEL="), std::string::npos) << lng.out;
    EXPECT_EQ(lng.out, shrt.out); // the same section, whichever spelling
    RunResult bad = run("", "--bogus");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.out.find("Usage: gdx_info"), std::string::npos) << bad.out;
}

TEST(Readme, ConfigReferenceEqualsTheTable) {
    RunResult r = run("", "-m");
    ASSERT_EQ(r.status, 0) << r.out;
    FILE *f = fopen(GDX_TEST_SOURCE_DIR "/README.md", "r");
    ASSERT_NE(f, nullptr);
    std::string readme;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) readme.append(buf.data(), n);
    fclose(f);
    const std::string begin = "<!-- gdx-config-reference:begin -->\n", end = "<!-- gdx-config-reference:end -->";
    size_t b = readme.find(begin), e = readme.find(end);
    ASSERT_NE(b, std::string::npos);
    ASSERT_NE(e, std::string::npos);
    EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), r.out)
        << "README's GDX_* reference is stale: run scripts/gen-readme-config.sh";
}
