// The GDX_* registry: each layer declares its rows next to its code and the registry joins them. Typed ids read
// their own layer's row, assembling refuses a name declared twice or a relation it cannot check, and core's sources
// name no other layer's variable (the registry is the only way core learns of them).
#include "core/config.h"
#include "core/config_registry.h"
#include "core/config_vars.h"
#include "fallback/config_vars.h"
#include "memtype/config_vars.h"
#include "transport/config_vars.h"
#include "transport/rc/config_vars.h"
#include "transport/shm/config_vars.h"
#include "transport/tcp/config_vars.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

using namespace gdx;

namespace {

std::vector<const ConfigLayer *> registered_layers() {
    std::vector<const ConfigLayer *> v{&core_config::kLayer};
    for (const ConfigLayer *l : config_layers())
        v.push_back(l);
    return v;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Where `text` names `word` as a whole identifier preceded by `prefix` ("GDX_" for the variable, "::" for a typed
// id, "(" for a rows-file macro argument).
bool names(std::string_view text, std::string_view prefix, std::string_view word) {
    const std::string needle = std::string(prefix) + std::string(word);
    for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1)) {
        size_t end = at + needle.size();
        bool starts = prefix != "GDX_" || at == 0 || !ident_char(text[at - 1]);
        if (starts && (end == text.size() || !ident_char(text[end]))) return true;
    }
    return false;
}

std::string read_file(const std::filesystem::path &p) {
    std::ifstream f(p);
    std::stringstream text;
    text << f.rdbuf();
    return text.str();
}

// The ids of every other layer's rows, read from their config_vars.inc files under src/ rather than from the
// registry, so that a layer left out of the registry is still covered.
const std::vector<std::string> &other_layers_ids() {
    static const std::vector<std::string> ids = [] {
        std::vector<std::string> v;
        const std::regex row(R"((?:^|\n)GDX_CONFIG_VAR\((\w+),)");
        for (const auto &e : std::filesystem::recursive_directory_iterator(GDX_TEST_SOURCE_DIR "/src")) {
            if (e.path().filename() != "config_vars.inc" || e.path().parent_path().filename() == "core") continue;
            const std::string s = read_file(e.path());
            for (auto m = std::sregex_iterator(s.begin(), s.end(), row); m != std::sregex_iterator(); ++m)
                v.push_back((*m)[1].str());
        }
        return v;
    }();
    return ids;
}

// The variables of other layers that `text` names, as GDX_<ID>, ::<ID> or (<ID>.
std::vector<std::string> other_layers_names_in(std::string_view text) {
    std::vector<std::string> found;
    for (const std::string &id : other_layers_ids())
        if (names(text, "GDX_", id) || names(text, "::", id) || names(text, "(", id)) found.push_back("GDX_" + id);
    return found;
}

} // namespace

TEST(ConfigRegistry, CoreFirstThenTheListedLayersInOrderEachInItsFileOrder) {
    std::span<const ConfigVarDesc> table = config_table();
    size_t at = 0;
    for (const ConfigLayer *layer : registered_layers()) {
        ASSERT_EQ(layer->first, at) << layer->name;
        ASSERT_FALSE(layer->rows.empty()) << layer->name;
        for (const ConfigVarDesc &row : layer->rows) {
            ASSERT_LT(at, table.size());
            EXPECT_EQ(table[at].name, row.name) << layer->name;
            EXPECT_EQ(table[at].doc, row.doc) << row.name;
            EXPECT_EQ(&config_layer_of(table[at]), layer) << row.name;
            ++at;
        }
    }
    EXPECT_EQ(at, table.size()) << "rows in the table that no listed layer declared";
}

// Each typed getter reads the row its id names, across layers and at layer boundaries (a wrong `first` would read
// a neighbour's value). Values are set by name, as gdx_config_set and the environment do.
TEST(ConfigRegistry, TypedIdsOfEveryLayerReadTheirOwnRow) {
    Config c;
    std::string err;
    ASSERT_EQ(Config::load({{"GDX_LOG_FILE", "stdout"},
                            {"GDX_CUDA", "no"},
                            {"GDX_MEMTYPE_CACHE_ENTRIES", "77"},
                            {"GDX_TLS", "tcp"},
                            {"GDX_TCP_ADDR", "127.0.0.2"},
                            {"GDX_TCP_TX_DEPTH", "7"},
                            {"GDX_TCP_STRIPE_MIN", "8K"},
                            {"GDX_SHM_CMA_SPLIT", "128K"},
                            {"GDX_IB_GID_INDEX", "3"},
                            {"GDX_REG_METHODS", "odp"},
                            {"GDX_FRAG_SIZE", "64K"},
                            {"GDX_FAULT_SEED", "99"}},
                           &c, &err),
              GDX_OK)
        << err;
    EXPECT_EQ(c.str(CoreVar::LOG_FILE), "stdout");
    EXPECT_EQ(c.ternary(mem::MemtypeVar::CUDA), Ternary::No);
    EXPECT_EQ(c.uint(mem::MemtypeVar::MEMTYPE_CACHE_ENTRIES), 77u);
    EXPECT_FALSE(c.list_allows(tp::TransportVar::TLS, "shm"));
    EXPECT_EQ(c.str(tp::TcpVar::TCP_ADDR), "127.0.0.2");
    EXPECT_EQ(c.size(tp::ShmVar::SHM_CMA_SPLIT), 128u << 10);
    EXPECT_EQ(c.uint(tp::TcpVar::TCP_TX_DEPTH), 7u);
    EXPECT_EQ(c.size(tp::TcpVar::TCP_STRIPE_MIN), 8192u);
    EXPECT_EQ(c.str(tp::RcVar::IB_GID_INDEX), "3");
    EXPECT_EQ(c.list(tp::RcVar::REG_METHODS), std::vector<std::string>{"odp"});
    EXPECT_EQ(c.per_kind(fb::StagingVar::FRAG_SIZE).get("cuda", 0), 64u << 10);
    EXPECT_EQ(c.uint(fb::StagingVar::FAULT_SEED), 99u);
    EXPECT_EQ(c.source(fb::StagingVar::FAULT_SEED), ConfigSource::Api);
    EXPECT_EQ(c.source(fb::StagingVar::STAGING_DEPTH), ConfigSource::Default);
    // By name and by id: the same entry.
    EXPECT_EQ(c.text(*config_find("GDX_TCP_TX_DEPTH")), c.text(tp::TcpVar::TCP_TX_DEPTH));
    EXPECT_EQ(&c.text(tp::tcp_config::kRows[0]), &c.text(tp::TcpVar::TCP_ADDR)); // a layer's own row, by name
}

TEST(ConfigRegistry, RangesAndRelationsComeFromTheDeclaringLayer) {
    EXPECT_EQ(config_find("GDX_TCP_TX_DEPTH")->range, "1..4096");
    EXPECT_EQ(tp::tcp_config::kRows[static_cast<unsigned>(tp::TcpVar::TCP_TX_DEPTH)].range, "1..4096");
    ASSERT_EQ(tp::rc_config::kRelations.size(), 1u);
    EXPECT_EQ(tp::rc_config::kRelations[0].lhs, "GDX_RC_MAX_INLINE");
    EXPECT_EQ(tp::rc_config::kRelations[0].rhs, "GDX_RC_SEG_SIZE");
    EXPECT_TRUE(core_config::kRelations.empty());
    EXPECT_EQ(config_registry().relations.size(), 1u);
}

TEST(ConfigRegistry, AssembleRefusesDuplicateNamesAndUncheckableRelations) {
    static constexpr ConfigVarDesc kA[] = {{"GDX_FAKE_A", ConfigType::UInt, "1", "", "a fake row for this test", ""},
                                           {"GDX_FAKE_S", ConfigType::String, "x", "", "a fake string row", ""}};
    static constexpr ConfigVarDesc kB[] = {{"GDX_FAKE_A", ConfigType::Size, "1", "", "the same name again", ""}};
    static constexpr ConfigVarDesc kBare[] = {{"FAKE_NO_PREFIX", ConfigType::UInt, "1", "", "no GDX_ prefix", ""}};
    static constexpr ConfigRelation kUnknown[] = {{"GDX_FAKE_A", "GDX_FAKE_NONE"}};
    static constexpr ConfigRelation kString[] = {{"GDX_FAKE_A", "GDX_FAKE_S"}};
    static constexpr ConfigRelation kEnum[] = {{"GDX_FAKE_A", "GDX_LOG_LEVEL"}};
    static constexpr ConfigVarDesc kC[] = {{"GDX_FAKE_C", ConfigType::Size, "1", "", "an upper layer's row", ""}};
    static constexpr ConfigRelation kCross[] = {{"GDX_FAKE_C", "GDX_FAKE_A"}};
    ConfigLayer a{"fake_a", kA, {}}, b{"fake_b", kB, {}}, bare{"fake_bare", kBare, {}};
    ConfigLayer unknown{"fake_rel", kA, kUnknown}, string{"fake_rel", kA, kString}, enumr{"fake_rel", kA, kEnum};
    ConfigLayer upper{"fake_upper", kC, kCross};
    ConfigRegistry reg;
    std::string err;

    const ConfigLayer *dup[] = {&a, &b};
    EXPECT_FALSE(config_assemble(dup, &reg, &err));
    EXPECT_NE(err.find("GDX_FAKE_A is declared by layer 'fake_a' and again by layer 'fake_b'"), std::string::npos)
        << err;
    const ConfigLayer *twice[] = {&a, &a};
    EXPECT_FALSE(config_assemble(twice, &reg, &err));
    const ConfigLayer *no_prefix[] = {&bare};
    EXPECT_FALSE(config_assemble(no_prefix, &reg, &err));
    EXPECT_NE(err.find("FAKE_NO_PREFIX lacks the GDX_ prefix"), std::string::npos) << err;
    const ConfigLayer *bad_name[] = {&unknown};
    EXPECT_FALSE(config_assemble(bad_name, &reg, &err));
    EXPECT_NE(err.find("unknown variable"), std::string::npos) << err;
    const ConfigLayer *bad_type[] = {&string};
    EXPECT_FALSE(config_assemble(bad_type, &reg, &err));
    EXPECT_NE(err.find("Size or UInt"), std::string::npos) << err;

    const ConfigLayer *bad_enum[] = {&core_config::kLayer, &enumr};
    EXPECT_FALSE(config_assemble(bad_enum, &reg, &err));
    EXPECT_NE(err.find("Size or UInt"), std::string::npos) << err;
    // The fake layers were never placed: the process registry is untouched.
    EXPECT_EQ(a.first, ConfigLayer::kUnplaced);
    EXPECT_EQ(config_find("GDX_FAKE_A"), nullptr);

    // A relation may name a lower layer's variable, never a later one's, and its left side is the layer's own.
    const ConfigLayer *upward[] = {&upper, &a};
    EXPECT_FALSE(config_assemble(upward, &reg, &err));
    EXPECT_NE(err.find("a lower layer's"), std::string::npos) << err;
    static constexpr ConfigVarDesc kD[] = {{"GDX_FAKE_D", ConfigType::UInt, "1", "", "a third layer's row", ""}};
    ConfigLayer foreign{"fake_foreign", kD, kCross}; // declares a relation of fake_upper's variable
    const ConfigLayer *not_own[] = {&a, &upper, &foreign};
    EXPECT_FALSE(config_assemble(not_own, &reg, &err));
    EXPECT_NE(err.find("layer 'fake_foreign'"), std::string::npos) << err;
    const ConfigLayer *ok[] = {&core_config::kLayer, &a, &upper};
    ASSERT_TRUE(config_assemble(ok, &reg, &err)) << err;
    const unsigned ncore = static_cast<unsigned>(core_config::kLayer.rows.size());
    EXPECT_EQ(reg.first, (std::vector<unsigned>{0, ncore, ncore + 2}));
    EXPECT_EQ(reg.table.back().name, "GDX_FAKE_C");
    EXPECT_EQ(reg.owner.back(), &upper);
    ASSERT_EQ(reg.relations.size(), 1u);
    EXPECT_EQ(reg.table[reg.relations[0].lhs].name, "GDX_FAKE_C");
    EXPECT_EQ(reg.table[reg.relations[0].rhs].name, "GDX_FAKE_A");
}

// Core owns the mechanism and its own rows only: a transport's variable named in src/core would mean core knows
// that transport again. Checks every .h/.cpp/.inc under src/core against every other layer's names.
TEST(ConfigRegistry, CoreSourcesNameNoOtherLayersVariable) {
    // The check finds what it must (so a pass means something): a name, a typed id, a rows-file argument.
    const ConfigVarDesc &other = tp::tcp_config::kRows[0];
    const std::string id(other.name.substr(4));
    EXPECT_FALSE(other_layers_names_in("see " + std::string(other.name) + ".").empty());
    EXPECT_FALSE(other_layers_names_in("cfg.str(TcpVar::" + id + ")").empty());
    EXPECT_FALSE(other_layers_names_in("GDX_CONFIG_VAR(" + id + ", String").empty());
    EXPECT_TRUE(other_layers_names_in("GDX_LOG_LEVEL, CoreVar::LOG_FILE, X" + std::string(other.name)).empty());

    // Every other row was read off disk (else an empty list would pass vacuously).
    EXPECT_EQ(other_layers_ids().size() + core_config::kLayer.rows.size(), config_table().size());
    size_t files = 0;
    for (const auto &e : std::filesystem::directory_iterator(GDX_TEST_SOURCE_DIR "/src/core")) {
        const std::string ext = e.path().extension();
        if (ext != ".h" && ext != ".cpp" && ext != ".inc") continue;
        ++files;
        for (const std::string &name : other_layers_names_in(read_file(e.path())))
            ADD_FAILURE() << e.path().filename() << " names " << name
                          << ": core must not know another layer's variables (declare it in that layer's "
                             "config_vars.inc)";
    }
    EXPECT_GE(files, 8u) << "src/core not found under " << GDX_TEST_SOURCE_DIR;
}
