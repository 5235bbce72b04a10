// Every configuration type, every parse error, sources and precedence, the typo guard.
#include "core/config.h"
#include "core/log.h"
#include "fallback/config_vars.h"
#include "gdx/gdx.h"
#include "support/log_capture.h"
#include "transport/config_vars.h"
#include "topo/config_vars.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

using namespace gdx;
using namespace std::chrono_literals;

namespace {

// Sets an environment variable for one test and restores it afterwards.
class ScopedEnv {
  public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old;
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_) setenv(name_.c_str(), old_->c_str(), 1);
        else unsetenv(name_.c_str());
    }

  private:
    std::string name_;
    std::optional<std::string> old_;
};

const ConfigVarDesc &desc(const char *name) {
    const ConfigVarDesc *d = config_find(name);
    EXPECT_NE(d, nullptr) << name;
    return *d;
}

} // namespace

TEST(ConfigParse, Sizes) {
    uint64_t v = 0;
    std::string why;
    EXPECT_TRUE(parse_size("4k", &v, &why)); EXPECT_EQ(v, 4096u);
    EXPECT_TRUE(parse_size("4K", &v, &why)); EXPECT_EQ(v, 4096u);
    EXPECT_TRUE(parse_size("512KiB", &v, &why)); EXPECT_EQ(v, 512u << 10);
    EXPECT_TRUE(parse_size("4M", &v, &why)); EXPECT_EQ(v, 4u << 20);
    EXPECT_TRUE(parse_size("1G", &v, &why)); EXPECT_EQ(v, 1ull << 30);
    EXPECT_TRUE(parse_size("2t", &v, &why)); EXPECT_EQ(v, 2ull << 40);
    EXPECT_TRUE(parse_size("1.5M", &v, &why)); EXPECT_EQ(v, 3u << 19);
    EXPECT_TRUE(parse_size("123", &v, &why)); EXPECT_EQ(v, 123u);
    EXPECT_TRUE(parse_size("0", &v, &why)); EXPECT_EQ(v, 0u);
    EXPECT_TRUE(parse_size("inf", &v, &why)); EXPECT_EQ(v, kSizeInfinite);
    EXPECT_FALSE(parse_size("", &v, &why));
    EXPECT_FALSE(parse_size("M", &v, &why));
    EXPECT_FALSE(parse_size("-4k", &v, &why));
    EXPECT_FALSE(parse_size("4X", &v, &why)); EXPECT_NE(why.find("unit"), std::string::npos);
    EXPECT_FALSE(parse_size("0.3", &v, &why)); // not a whole number of bytes
    EXPECT_FALSE(parse_size("99999999T", &v, &why)); EXPECT_EQ(why, "out of range");
    EXPECT_EQ(format_size(4u << 20), "4M");
    EXPECT_EQ(format_size(1000), "1000");
    EXPECT_EQ(format_size(kSizeInfinite), "inf");
}

TEST(ConfigParse, Durations) {
    std::chrono::nanoseconds d{};
    std::string why;
    EXPECT_TRUE(parse_duration("250us", &d, &why)); EXPECT_EQ(d, 250us);
    EXPECT_TRUE(parse_duration("100ms", &d, &why)); EXPECT_EQ(d, 100ms);
    EXPECT_TRUE(parse_duration("10s", &d, &why)); EXPECT_EQ(d, 10s);
    EXPECT_TRUE(parse_duration("2", &d, &why)); EXPECT_EQ(d, 2s);
    EXPECT_TRUE(parse_duration("2m", &d, &why)); EXPECT_EQ(d, 120s);
    EXPECT_TRUE(parse_duration("1h", &d, &why)); EXPECT_EQ(d, 3600s);
    EXPECT_TRUE(parse_duration("5ns", &d, &why)); EXPECT_EQ(d, 5ns);
    EXPECT_TRUE(parse_duration("inf", &d, &why)); EXPECT_EQ(d, std::chrono::nanoseconds::max());
    EXPECT_FALSE(parse_duration("10 parsecs", &d, &why));
    EXPECT_FALSE(parse_duration("s", &d, &why));
    EXPECT_FALSE(parse_duration("1e30s", &d, &why));
    EXPECT_EQ(format_duration(10s), "10s");
    EXPECT_EQ(format_duration(250us), "250us");
}

TEST(ConfigParse, BoolsTernariesUints) {
    bool b = false;
    Ternary t = Ternary::No;
    uint64_t u = 0;
    for (const char *s : {"y", "yes", "1", "on", "true", "YES"}) { EXPECT_TRUE(parse_bool(s, &b, nullptr)); EXPECT_TRUE(b); }
    for (const char *s : {"n", "no", "0", "off", "false"}) { EXPECT_TRUE(parse_bool(s, &b, nullptr)); EXPECT_FALSE(b); }
    EXPECT_FALSE(parse_bool("maybe", &b, nullptr));
    EXPECT_TRUE(parse_ternary("try", &t, nullptr)); EXPECT_EQ(t, Ternary::Try);
    EXPECT_TRUE(parse_ternary("yes", &t, nullptr)); EXPECT_EQ(t, Ternary::Yes);
    EXPECT_TRUE(parse_ternary("no", &t, nullptr)); EXPECT_EQ(t, Ternary::No);
    EXPECT_FALSE(parse_ternary("perhaps", &t, nullptr));
    EXPECT_TRUE(parse_uint("42", &u, nullptr)); EXPECT_EQ(u, 42u);
    EXPECT_FALSE(parse_uint("-1", &u, nullptr));
    EXPECT_FALSE(parse_uint("4k", &u, nullptr));
    EXPECT_FALSE(parse_uint("99999999999999999999999", &u, nullptr));
}

TEST(ConfigValue, EnumListPerKindErrorsNameVariableValueAndAccepted) {
    ConfigValue v;
    std::string err;
    EXPECT_EQ(config_parse_value(desc("GDX_LOG_LEVEL"), "DEBUG", &v, &err), GDX_OK);
    EXPECT_EQ(std::get<std::string>(v), "debug");
    EXPECT_EQ(config_parse_value(desc("GDX_LOG_LEVEL"), "bogus", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_LOG_LEVEL"), std::string::npos) << err;
    EXPECT_NE(err.find("bogus"), std::string::npos) << err;
    EXPECT_NE(err.find("error, warn, info, debug, trace"), std::string::npos) << err;

    EXPECT_EQ(config_parse_value(desc("GDX_TLS"), "tcp,shm", &v, &err), GDX_OK);
    EXPECT_EQ(std::get<std::vector<std::string>>(v), (std::vector<std::string>{"tcp", "shm"}));
    EXPECT_EQ(config_parse_value(desc("GDX_TLS"), "tcp,,shm", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_EQ(config_parse_value(desc("GDX_TLS"), "tcp,carrier_pigeon", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("carrier_pigeon"), std::string::npos) << err;

    EXPECT_EQ(config_parse_value(desc("GDX_FRAG_SIZE"), "host:512K,cuda:4M", &v, &err), GDX_OK);
    const auto &pk = std::get<PerKindSize>(v);
    EXPECT_EQ(pk.get("host", 0), 512u << 10);
    EXPECT_EQ(pk.get("cuda", 0), 4u << 20);
    EXPECT_EQ(pk.get("rocm", 7), 7u);
    EXPECT_EQ(config_parse_value(desc("GDX_FRAG_SIZE"), "1M", &v, &err), GDX_OK);
    EXPECT_EQ(std::get<PerKindSize>(v).get("cuda", 0), 1u << 20);
    EXPECT_EQ(config_parse_value(desc("GDX_FRAG_SIZE"), "gpu:4M", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("gpu"), std::string::npos) << err;
    EXPECT_EQ(config_parse_value(desc("GDX_FRAG_SIZE"), "cuda:4Q", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_EQ(config_parse_value(desc("GDX_FRAG_SIZE"), "cuda:0", &v, &err), GDX_ERR_INVALID_CONFIG);

    EXPECT_EQ(config_parse_value(desc("GDX_GDR"), "sometimes", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("try, yes, no"), std::string::npos) << err;
    EXPECT_EQ(config_parse_value(desc("GDX_PEER_TIMEOUT"), "soon", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_EQ(config_parse_value(desc("GDX_STAGING_DEPTH"), "four", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_EQ(config_parse_value(desc("GDX_MEMTYPE_CACHE"), "perhaps", &v, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_EQ(config_parse_value(desc("GDX_STAGING_THRESH"), "8 furlongs", &v, &err), GDX_ERR_INVALID_CONFIG);
}

TEST(ConfigTable, EveryDefaultParsesAndEveryRowIsDocumented) {
    for (const auto &d : config_table()) {
        ConfigValue v;
        std::string err;
        EXPECT_EQ(config_parse_value(d, d.default_value, &v, &err), GDX_OK) << err;
        EXPECT_TRUE(d.name.starts_with("GDX_")) << d.name;
        EXPECT_GE(d.doc.size(), 20u) << d.name << " needs a real doc string";
        if (d.type == ConfigType::Enum || d.type == ConfigType::PerKindSize) {
            EXPECT_FALSE(d.accepted.empty());
        }
    }
}

TEST(ConfigLoad, EnvironmentThenApiPrecedenceAndSources) {
    ScopedEnv e1("GDX_STAGING_DEPTH", "8");
    ScopedEnv e2("GDX_FRAG_SIZE", "cuda:2M");
    Config c;
    std::string err;
    ASSERT_EQ(Config::load({{"GDX_FRAG_SIZE", "cuda:1M"}}, &c, &err), GDX_OK) << err;
    EXPECT_EQ(c.uint(fb::StagingVar::STAGING_DEPTH), 8u);
    EXPECT_EQ(c.source(fb::StagingVar::STAGING_DEPTH), ConfigSource::Environment);
    EXPECT_EQ(c.per_kind(fb::StagingVar::FRAG_SIZE).get("cuda", 0), 1u << 20); // API beats environment
    EXPECT_EQ(c.source(fb::StagingVar::FRAG_SIZE), ConfigSource::Api);
    EXPECT_EQ(c.source(topo::TopoVar::GDR), ConfigSource::Default);
    EXPECT_EQ(c.ternary(topo::TopoVar::GDR), Ternary::Try);
    EXPECT_EQ(c.duration(tp::TransportVar::PEER_TIMEOUT), 10s);
    EXPECT_TRUE(c.list_allows(tp::TransportVar::TLS, "tcp"));
}

TEST(ConfigLoad, InvalidEnvironmentValueFails) {
    ScopedEnv e("GDX_LOG_LEVEL", "bogus");
    Config c;
    std::string err;
    EXPECT_EQ(Config::load({}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_LOG_LEVEL=bogus"), std::string::npos) << err;
}

TEST(ConfigLoad, UnknownApiNameFailsUnknownEnvNameWarnsWithSuggestion) {
    Config c;
    std::string err;
    EXPECT_EQ(Config::load({{"GDX_NOPE", "1"}}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_NOPE"), std::string::npos);
    EXPECT_EQ(config_suggest("GDX_LOG_LEVL"), "GDX_LOG_LEVEL");
    EXPECT_EQ(config_suggest("GDX_COMPLETELY_DIFFERENT"), "");

    gdx::test::LogCapture cap(log::Level::Warn);
    ScopedEnv e("GDX_LOG_LEVL", "debug");
    EXPECT_EQ(Config::load({}, &c, &err), GDX_OK) << err;
    EXPECT_EQ(Config::load({}, &c, &err), GDX_OK) << err; // the warning comes once
    EXPECT_EQ(cap.count("unknown variable GDX_LOG_LEVL"), 1u) << cap.text();
    EXPECT_NE(cap.text().find("did you mean GDX_LOG_LEVEL?"), std::string::npos) << cap.text();
}

TEST(ConfigCApi, SetValidatesAndContextSeesOverride) {
    gdx_config_t *cfg = nullptr;
    ASSERT_EQ(gdx_config_create(&cfg), GDX_OK);
    EXPECT_EQ(gdx_config_set(cfg, "GDX_STAGING_DEPTH", "lots"), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(gdx_last_error()).find("GDX_STAGING_DEPTH=lots"), std::string::npos) << gdx_last_error();
    EXPECT_EQ(gdx_config_set(cfg, "GDX_STAGING_DEPT", "2"), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(gdx_last_error()).find("did you mean GDX_STAGING_DEPTH"), std::string::npos);
    EXPECT_EQ(gdx_config_set(cfg, nullptr, "2"), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(gdx_config_set(cfg, "GDX_STAGING_DEPTH", "2"), GDX_OK);
    gdx_context_t *ctx = nullptr;
    ASSERT_EQ(gdx_context_create(cfg, &ctx), GDX_OK) << gdx_last_error();
    EXPECT_STREQ(gdx_context_config_get(ctx, "GDX_STAGING_DEPTH"), "2");
    EXPECT_EQ(gdx_context_config_get(ctx, "GDX_NOPE"), nullptr);
    gdx_context_destroy(ctx);
    gdx_config_destroy(cfg);
    EXPECT_EQ(gdx_context_create(nullptr, nullptr), GDX_ERR_INVALID_PARAM);
}

TEST(Status, EveryCodeHasAString) {
    for (int s = GDX_ERR_INTERNAL; s <= GDX_INPROGRESS; ++s)
        EXPECT_STRNE(gdx_status_string(static_cast<gdx_status_t>(s)), "unknown status") << s;
    EXPECT_STREQ(gdx_status_string(static_cast<gdx_status_t>(-999)), "unknown status");
}
