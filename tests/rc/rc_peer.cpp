// rc_peer: the far side of an rc connection in a separate process, exec'd by the rdma tests (a peer that can
// be killed mid-transfer). Protocol on stdin/stdout, one line each:
//   out: "ADDR <hex endpoint address> RKEY <hex packed remote key> BASE <buffer address>"
//   in:  "<hex endpoint address of the test's endpoint>"
//   out: "READY"    then it progresses until stdin closes (exit 0) or it is killed.
// Usage: rc_peer <device:port> <buffer bytes>
#include "core/config.h"
#include "core/error.h"
#include "support/text.h"
#include "transport/rc/component.h"
#include "transport/transport.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

using namespace gdx;
using gdx::test::hex;
using gdx::test::unhex;

namespace {
int die(const char *what) {
    std::fprintf(stderr, "rc_peer: %s: %s\n", what, last_error().c_str());
    return 1;
}
} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: rc_peer <device:port> <buffer bytes>\n");
        return 2;
    }
    size_t len = std::strtoull(argv[2], nullptr, 10);
    Config cfg;
    std::string err;
    if (Config::load({}, &cfg, &err) != GDX_OK) {
        std::fprintf(stderr, "rc_peer: %s\n", err.c_str());
        return 2;
    }
    std::unique_ptr<tp::Interface> iface;
    if (tp::rc::component()->open({argv[1], "", false}, cfg, &iface) != GDX_OK) return die("open");
    std::unique_ptr<tp::Endpoint> ep;
    if (iface->ep_create(&ep) != GDX_OK) return die("ep_create");
    void *buf = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return die("mmap");
    std::unique_ptr<tp::MemHandle> h;
    if (iface->md().mem_reg(buf, len, {}, tp::kAccessAll, &h) != GDX_OK) return die("mem_reg");
    std::vector<uint8_t> rkey(iface->md().rkey_packed_size());
    if (h->pack_rkey(rkey) != GDX_OK) return die("pack_rkey");
    std::cout << "ADDR " << hex(ep->address()) << " RKEY " << hex(rkey) << " BASE " << reinterpret_cast<uintptr_t>(buf)
              << std::endl;
    std::string line;
    if (!std::getline(std::cin, line)) return die("reading the peer address");
    if (ep->connect(unhex(line)) != GDX_OK) return die("connect");
    std::cout << "READY" << std::endl;
    for (;;) {
        for (int i = 0; i < 1000; ++i) iface->progress();
        pollfd p{0, POLLIN, 0};
        if (poll(&p, 1, 0) == 1) {
            char c;
            if (read(0, &c, 1) <= 0) break; // the test closed our stdin: done
        }
    }
    ep.reset();
    h.reset();
    munmap(buf, len);
    return 0;
}
