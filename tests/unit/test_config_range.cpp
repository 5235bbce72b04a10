// Ranges and relations of the GDX_* table are checked where a value enters (issue 16, class 2): gdx_config_set,
// the environment at gdx_context_create, and Config::load (which the UCX module's md_open runs on UCX_GDX_*).
// Each error names the variable, the value and the accepted range.
#include "core/config.h"
#include "gdx/gdx.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

using namespace gdx;

namespace {

// The values issue 16 found accepted, plus the edges of each range.
const std::vector<std::pair<const char *, const char *>> kBad = {
    {"GDX_TCP_TX_DEPTH", "0"},        {"GDX_TCP_TX_DEPTH", "4097"},   {"GDX_SHM_RING_SIZE", "3K"},
    {"GDX_SHM_RING_SIZE", "2G"},      {"GDX_SHM_RING_SIZE", "96K"},   {"GDX_FRAG_SIZE", "host:1"},
    {"GDX_FRAG_SIZE", "cuda:2G"},     {"GDX_TCP_LANES", "33"},        {"GDX_TCP_LANES", "-1"},
    {"GDX_TCP_LANE_THREADS", "0"},    {"GDX_TCP_LANE_THREADS", "65"}, {"GDX_STAGING_POOL", "0"},
    {"GDX_STAGING_POOL", "2"},        {"GDX_STAGING_POOL", "4097"},   {"GDX_STAGING_DEPTH", "0"},
    {"GDX_FAULT_P2P_PERCENT", "101"}, {"GDX_TCP_STRIPE_MIN", "0"},    {"GDX_TCP_STRIPE_MIN", "1K"},
    {"GDX_PEER_TIMEOUT", "0s"},       {"GDX_CONN_TIMEOUT", "0ms"},    {"GDX_CUDA_IPC_STREAMS", "17"},
    {"GDX_RC_TX_QUEUE_LEN", "1"},     {"GDX_RC_SEG_SIZE", "32"},      {"GDX_TCP_SOCKBUF", "2G"},
};

const std::vector<std::pair<const char *, const char *>> kGood = {
    {"GDX_TCP_TX_DEPTH", "1"},       {"GDX_TCP_TX_DEPTH", "4096"},   {"GDX_SHM_RING_SIZE", "64K"},
    {"GDX_SHM_RING_SIZE", "1G"},     {"GDX_FRAG_SIZE", "host:4K"},   {"GDX_FRAG_SIZE", "host:64K,cuda:1G"},
    {"GDX_TCP_LANES", "auto"},       {"GDX_TCP_LANES", "0"},         {"GDX_TCP_LANES", "32"},
    {"GDX_TCP_LANE_THREADS", "64"},  {"GDX_STAGING_POOL", "3"},      {"GDX_STAGING_DEPTH", "1024"},
    {"GDX_FAULT_P2P_PERCENT", "100"}, {"GDX_TCP_STRIPE_MIN", "4K"},  {"GDX_PEER_TIMEOUT", "inf"},
};

// The message names the variable and value and says what is accepted.
void expect_named(const std::string &msg, const char *var, const char *val) {
    EXPECT_NE(msg.find(std::string(var) + "=" + val), std::string::npos) << msg;
    EXPECT_NE(msg.find("accepted"), std::string::npos) << msg;
}

TEST(ConfigRange, SetRejectsEveryOutOfRangeValueNamingVariableValueAndRange) {
    gdx_config_t *cfg = nullptr;
    ASSERT_EQ(gdx_config_create(&cfg), GDX_OK);
    for (auto [var, val] : kBad) {
        EXPECT_EQ(gdx_config_set(cfg, var, val), GDX_ERR_INVALID_CONFIG) << var << "=" << val;
        expect_named(gdx_last_error(), var, val);
    }
    for (auto [var, val] : kGood) EXPECT_EQ(gdx_config_set(cfg, var, val), GDX_OK) << var << "=" << val << ": "
                                                                                 << gdx_last_error();
    gdx_config_destroy(cfg);
    // The range itself is in the message, so the user knows what to type.
    gdx_config_create(&cfg);
    EXPECT_EQ(gdx_config_set(cfg, "GDX_TCP_TX_DEPTH", "0"), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(gdx_last_error()).find("1..4096"), std::string::npos) << gdx_last_error();
    EXPECT_EQ(gdx_config_set(cfg, "GDX_SHM_RING_SIZE", "96K"), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(gdx_last_error()).find("power of two"), std::string::npos) << gdx_last_error();
    gdx_config_destroy(cfg);
}

TEST(ConfigRange, ContextCreationRejectsOutOfRangeEnvironment) {
    for (auto [var, val] : kBad) {
        setenv(var, val, 1);
        gdx_context_t *ctx = nullptr;
        EXPECT_EQ(gdx_context_create(nullptr, &ctx), GDX_ERR_INVALID_CONFIG) << var << "=" << val;
        expect_named(gdx_last_error(), var, val);
        if (ctx) gdx_context_destroy(ctx);
        unsetenv(var);
    }
}

// Config::load is what md_open runs on the UCX_GDX_* variables (as GDX_* overrides) and what the environment
// path runs: both reject at entry.
TEST(ConfigRange, LoadRejectsOverridesAndRelations) {
    Config c;
    std::string err;
    for (auto [var, val] : kBad) {
        EXPECT_EQ(Config::load({{var, val}}, &c, &err), GDX_ERR_INVALID_CONFIG) << var << "=" << val;
        expect_named(err, var, val);
    }
    EXPECT_EQ(Config::load({{"GDX_RC_MAX_INLINE", "1K"}, {"GDX_RC_SEG_SIZE", "512"}}, &c, &err),
              GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_RC_MAX_INLINE=1K exceeds GDX_RC_SEG_SIZE=512"), std::string::npos) << err;
    EXPECT_EQ(Config::load({{"GDX_RC_MAX_INLINE", "256"}, {"GDX_RC_SEG_SIZE", "512"}}, &c, &err), GDX_OK) << err;
}

TEST(ConfigRange, EveryRangeRowParsesAndAcceptsTheDefault) {
    for (const ConfigVarDesc &d : config_table()) {
        ConfigValue v;
        std::string err;
        EXPECT_EQ(config_parse_value(d, d.default_value, &v, &err), GDX_OK) << err;
        std::string_view r = d.range;
        if (!r.empty()) {
            EXPECT_NE(r.find(".."), std::string_view::npos) << d.name << ": " << r;
        }
    }
}

} // namespace
