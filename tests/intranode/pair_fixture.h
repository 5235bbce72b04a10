// A connected pair for the intra-node tests: this process (the test) and a peer process started with exec,
// each with one interface and one endpoint of the same transport.
#pragma once

#include "common.h"
#include "core/error.h"

#include <gtest/gtest.h>

namespace gdx::test {

struct RemoteBuf {
    uint64_t addr = 0;
    std::vector<uint8_t> packed;
    std::unique_ptr<tp::RemoteKey> rkey;
};

class PairFixture : public ::testing::Test {
  protected:
    // Starts the peer (argv after `wrapper`, env additions) and opens our side with `ours` overrides.
    void start(const std::string &transport, const std::string &device, const std::vector<std::string> &peer_env,
               const Config::Overrides &ours, const std::vector<std::string> &wrapper = {},
               const std::vector<std::string> &peer_args = {}) {
        std::vector<std::string> argv = wrapper;
        argv.push_back(peer_binary());
        argv.insert(argv.end(), {"--transport", transport, "--device", device});
        argv.insert(argv.end(), peer_args.begin(), peer_args.end());
        ASSERT_EQ(Link::spawn(argv, peer_env, &link), GDX_OK);
        ASSERT_EQ(open_transport(transport, device, ours, &tp), GDX_OK) << last_error();
        ASSERT_EQ(tp.iface->ep_create(&ep), GDX_OK);
        tp.iface->set_am_handler(2, &PairFixture::on_am, this);
        std::vector<std::string> w = words(link->recv(std::chrono::milliseconds(20000)));
        if (w.size() != 2 || w[0] != "addr") {
            peer_failed = true;
            return;
        }
        peer_addr = unhex(w[1]);
    }

    // Both sides connect; true when both report up.
    ::testing::AssertionResult connect_both() {
        gdx_status_t st = ep->connect(peer_addr);
        if (st != GDX_INPROGRESS && st != GDX_OK)
            return ::testing::AssertionFailure() << "our connect: " << gdx_status_string(st);
        std::string r = call("connect " + hex(ep->address()));
        if (r != "ok") return ::testing::AssertionFailure() << "peer connect: " << r;
        if (!progress_until(*tp.iface, [&] { return ep->state() != GDX_INPROGRESS; },
                            std::chrono::milliseconds(15000)))
            return ::testing::AssertionFailure() << "connection did not come up";
        if (ep->state() != GDX_OK) return ::testing::AssertionFailure() << gdx_status_string(ep->state());
        for (int i = 0; i < 1000; ++i) {
            if (call("state") == "state 0") return ::testing::AssertionSuccess();
        }
        return ::testing::AssertionFailure() << "peer endpoint not up";
    }

    std::string call(const std::string &cmd, std::chrono::milliseconds limit = std::chrono::milliseconds(120000)) {
        return link->call(cmd, limit, [this] { tp.iface->progress(); });
    }

    RemoteBuf alloc_remote(const std::string &name, const std::string &kind, size_t size, size_t off, uint64_t seed,
                           const std::string &access = "rw") {
        return remote_buf("alloc " + name + " " + kind + " " + std::to_string(size) + " " + std::to_string(off) +
                          " " + std::to_string(seed) + " " + access);
    }

    // A peer command answered with "buf <name> <addr> <key>" (alloc, realloc, rereg): the buffer as seen from here.
    RemoteBuf remote_buf(const std::string &command) {
        RemoteBuf b;
        std::vector<std::string> w = words(call(command));
        EXPECT_EQ(w.size(), 4u) << command << ": " << (w.empty() ? "" : w[0]);
        if (w.size() != 4) return b;
        b.addr = std::stoull(w[2], nullptr, 16);
        b.packed = unhex(w[3]);
        EXPECT_EQ(tp.iface->md().rkey_unpack(b.packed, &b.rkey), GDX_OK);
        return b;
    }

    std::string check_remote(const std::string &name, size_t off, size_t len, uint64_t seed, uint64_t first) {
        return call("check " + name + " " + std::to_string(off) + " " + std::to_string(len) + " " +
                    std::to_string(seed) + " " + std::to_string(first));
    }

    gdx_status_t put(const void *p, size_t len, const tp::MemHandle *mh, uint64_t raddr, const tp::RemoteKey &k) {
        return run_op(*tp.iface, [&](tp::Completion *c) { return ep->put(p, len, mh, raddr, k, c); });
    }
    gdx_status_t get(void *p, size_t len, const tp::MemHandle *mh, uint64_t raddr, const tp::RemoteKey &k) {
        return run_op(*tp.iface, [&](tp::Completion *c) { return ep->get(p, len, mh, raddr, k, c); });
    }

    static void on_am(void *arg, tp::Endpoint *, const void *data, size_t len) {
        auto *self = static_cast<PairFixture *>(arg);
        const uint8_t *b = static_cast<const uint8_t *>(data);
        self->am_got.emplace_back(b, b + len);
    }

    void TearDown() override {
        if (link && !peer_failed && !killed) link->send("exit");
        ep.reset();
        link.reset();
        tp.iface.reset();
    }

    std::unique_ptr<Link> link;
    Opened tp;
    std::unique_ptr<tp::Endpoint> ep;
    std::vector<uint8_t> peer_addr;
    std::vector<std::vector<uint8_t>> am_got;
    bool peer_failed = false, killed = false;
};

} // namespace gdx::test
