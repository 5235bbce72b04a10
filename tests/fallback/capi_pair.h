// Two C API contexts in this process, one endpoint each, connected, each with a patterned host buffer registered
// and the other side's key unpacked (side i's key of side 1-i's memory is k[i]). Used by the C API tests.
#pragma once

#include "gdx/gdx.h"
#include "loop_fixture.h"
#include "transport/transport.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace gdx::test {

class CApiPair : public ::testing::Test {
  protected:
    using Settings = std::vector<std::pair<std::string, std::string>>;
    gdx_context_t *c[2] = {};
    gdx_ep_t *e[2] = {};
    std::vector<uint8_t> mem[2];
    gdx_mem_t *m[2] = {};
    gdx_rkey_t *k[2] = {};

    void SetUp() override {
        if (tp::find_component("tcp") == nullptr) GTEST_SKIP() << "no tcp transport in this build";
    }
    // GDX_TLS=tls on both sides plus each side's own settings; buffers of `size` bytes, side i filled with
    // pattern 10 + i.
    void open(const char *tls, const Settings &side0 = {}, const Settings &side1 = {}, size_t size = 1 << 20) {
        for (int i = 0; i < 2; ++i) {
            gdx_config_t *cfg = nullptr;
            ASSERT_EQ(gdx_config_create(&cfg), GDX_OK);
            ASSERT_EQ(gdx_config_set(cfg, "GDX_TLS", tls), GDX_OK);
            for (const auto &[name, value] : i == 0 ? side0 : side1)
                ASSERT_EQ(gdx_config_set(cfg, name.c_str(), value.c_str()), GDX_OK) << gdx_last_error();
            ASSERT_EQ(gdx_context_create(cfg, &c[i]), GDX_OK) << gdx_last_error();
            gdx_config_destroy(cfg);
            ASSERT_EQ(gdx_ep_create(c[i], &e[i]), GDX_OK) << gdx_last_error();
        }
        for (int i = 0; i < 2; ++i) {
            std::vector<uint8_t> a = address(e[1 - i]);
            ASSERT_EQ(gdx_ep_connect(e[i], a.data(), a.size()), GDX_OK) << gdx_last_error();
        }
        ASSERT_TRUE(run([&] { return gdx_ep_state(e[0]) != GDX_INPROGRESS && gdx_ep_state(e[1]) != GDX_INPROGRESS; }));
        ASSERT_EQ(gdx_ep_state(e[0]), GDX_OK);
        ASSERT_EQ(gdx_ep_state(e[1]), GDX_OK);
        for (int i = 0; i < 2; ++i) {
            mem[i].resize(size);
            fill_pattern(mem[i].data(), mem[i].size(), 10 + i);
            ASSERT_EQ(gdx_mem_reg(c[i], mem[i].data(), mem[i].size(), GDX_ACCESS_ALL, &m[i]), GDX_OK);
        }
        for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(unpack(i, m[1 - i], &k[i]));
    }
    // Side i unpacks the key of `mem` (a registration of the other side).
    void unpack(int i, gdx_mem_t *mem, gdx_rkey_t **out) {
        size_t n = 0;
        ASSERT_EQ(gdx_mem_pack(mem, nullptr, &n), GDX_OK);
        std::vector<uint8_t> key(n);
        ASSERT_EQ(gdx_mem_pack(mem, key.data(), &n), GDX_OK);
        ASSERT_EQ(gdx_rkey_unpack(e[i], key.data(), key.size(), out), GDX_OK) << gdx_last_error();
    }
    static std::vector<uint8_t> address(gdx_ep_t *ep) {
        size_t n = 0;
        EXPECT_EQ(gdx_ep_address(ep, nullptr, &n), GDX_OK);
        std::vector<uint8_t> a(n);
        EXPECT_EQ(gdx_ep_address(ep, a.data(), &n), GDX_OK);
        return a;
    }
    // Progresses both contexts until done() (false after a bounded number of rounds: a hang fails, never blocks).
    template <typename F> bool run(F done) {
        for (long i = 0; i < 20000000 && !done(); ++i) {
            gdx_progress(c[0]);
            gdx_progress(c[1]);
        }
        return done();
    }
    void TearDown() override {
        for (int i = 0; i < 2; ++i) {
            gdx_rkey_destroy(k[i]);
            EXPECT_EQ(gdx_ep_destroy(e[i]), GDX_OK); // NULL: nothing to do, GDX_OK
            EXPECT_EQ(gdx_mem_dereg(m[i]), GDX_OK);
            gdx_context_destroy(c[i]);
        }
    }
};

} // namespace gdx::test
