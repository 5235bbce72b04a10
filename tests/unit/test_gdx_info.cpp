// gdx_info as a user runs it: exit codes and what it prints.
#include "core/config.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>

namespace {

struct RunResult {
    int status;
    std::string out;
};

// stderr_too: the log lines as well (they carry time stamps, so two runs differ there).
RunResult run(const std::string &env, const std::string &args, bool stderr_too = true) {
    std::string cmd = "env " + env + " " GDX_TEST_BINARY_DIR "/tools/gdx_info " + args +
                      (stderr_too ? " 2>&1" : " 2>/dev/null");
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

// Each layer declares its rows in a config_vars.inc next to its code; every such file under src/ must reach the
// registry (a layer missing from src/config/layers.cpp would not) and gdx_info -c, with the doc written there.
TEST(GdxInfo, EveryLayersRowsFileReachesTheRegistryAndConfigOutput) {
    RunResult r = run("", "-c");
    ASSERT_EQ(r.status, 0) << r.out;
    // A row starts a line: GDX_CONFIG_VAR(ID, Type, "default", "accepted", "doc" (the doc's first 40 characters).
    const std::regex row(R"((?:^|\n)GDX_CONFIG_VAR\((\w+),[^"]*"[^"]*",\s*"[^"]*",\s*"([^"]{0,40}))");
    size_t files = 0, rows = 0;
    for (const auto &e : std::filesystem::recursive_directory_iterator(GDX_TEST_SOURCE_DIR "/src")) {
        if (e.path().filename() != "config_vars.inc") continue;
        ++files;
        std::ifstream f(e.path());
        std::stringstream text;
        text << f.rdbuf();
        const std::string s = text.str();
        size_t in_file = 0;
        for (auto m = std::sregex_iterator(s.begin(), s.end(), row); m != std::sregex_iterator(); ++m, ++in_file) {
            const std::string name = "GDX_" + (*m)[1].str(), doc = (*m)[2].str();
            const gdx::ConfigVarDesc *d = gdx::config_find(name);
            ASSERT_NE(d, nullptr) << name << " of " << e.path() << " is not in the registry (src/config/layers.cpp)";
            EXPECT_TRUE(d->doc.starts_with(doc)) << name << ": " << d->doc;
            EXPECT_NE(r.out.find("\n" + name + "="), std::string::npos) << name;
            EXPECT_NE(r.out.find("#   " + std::string(d->doc.substr(0, 40))), std::string::npos) << name;
        }
        EXPECT_GT(in_file, 0u) << e.path() << ": no row read (has the row format changed?)";
        rows += in_file;
    }
    EXPECT_GE(files, 9u); // core, memtype, topology, transport, tcp, shm, cuda_ipc, rc, staging
    EXPECT_EQ(rows, gdx::config_table().size()) << "rows declared outside a config_vars.inc, or read twice";
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
    // stdout only: a GDX_* variable in the environment that gdx does not know (a test harness's own) is warned
    // about on stderr, with a time stamp
    RunResult lng = run("", "--config", false), shrt = run("", "-c", false);
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
