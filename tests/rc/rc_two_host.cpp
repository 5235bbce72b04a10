// rc_two_host: gdx rc between two hosts (two soft-RoCE guests joined by a qemu link: tests/rxe/two-host.sh).
// Endpoint addresses and remote keys travel over TCP on the guests' link (IPv6 link-local with a %eth0 scope:
// the guests have no IPv4 there).
//
//   rc_two_host server <tcp-port>                  serves until killed (or 300 s)
//   rc_two_host client <server-addr%if> <tcp-port>   integrity checks, then streams puts until the server dies
//
// The client prints "STREAMING" once the integrity phase passed; the script then kills the server's guest.
// The client exits 0 when its operations failed with GDX_ERR_CONNECTION_RESET within the bound derived from
// GDX_PEER_TIMEOUT (measured from the last put that completed), 1 otherwise.
#include "core/config.h"
#include "core/error.h"
#include "support/text.h"
#include "transport/rc/component.h"
#include "transport/rc/iface.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <netdb.h>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace gdx;
using gdx::test::hex;
using gdx::test::unhex;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kBuf = 4u << 20;

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "rc_two_host: %s: %s (errno %s)\n", what, last_error().c_str(), std::strerror(errno));
    std::exit(1);
}
void send_line(int fd, const std::string &l) {
    std::string m = l + "\n";
    if (write(fd, m.data(), m.size()) != static_cast<ssize_t>(m.size())) die("tcp write");
}
std::string recv_line(int fd) {
    std::string l;
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n') l += c;
    return l;
}

int tcp(bool server, const char *host, const char *port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET6;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = server ? AI_PASSIVE : 0;
    if (getaddrinfo(host, port, &hints, &res) != 0 || res == nullptr) die("getaddrinfo");
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (server) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 1)) die("bind/listen");
        int c = accept(fd, nullptr, nullptr);
        close(fd);
        freeaddrinfo(res);
        return c;
    }
    // The other guest boots in parallel: retry until it listens.
    for (int i = 0; i < 600; ++i) {
        if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            freeaddrinfo(res);
            return fd;
        }
        close(fd);
        usleep(200000);
        fd = socket(AF_INET6, SOCK_STREAM, 0);
    }
    die("tcp connect");
}

struct Node {
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<tp::Endpoint> ep;
    uint8_t *buf = nullptr;
    std::unique_ptr<tp::MemHandle> mh;
    std::unique_ptr<tp::RemoteKey> peer_key;
    uint64_t peer_base = 0;

    void setup(int fd) {
        Config cfg;
        std::string err;
        if (Config::load({}, &cfg, &err) != GDX_OK) die(err.c_str());
        std::vector<tp::rc::PortDesc> ports;
        tp::rc::list_ports(&ports);
        if (ports.empty()) die("no RDMA device");
        if (tp::rc::component()->open({ports[0].device + ":" + std::to_string(ports[0].port), "", false}, cfg, &iface) != GDX_OK)
            die("open");
        if (iface->ep_create(&ep) != GDX_OK) die("ep_create");
        buf = static_cast<uint8_t *>(mmap(nullptr, kBuf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (iface->md().mem_reg(buf, kBuf, {}, tp::kAccessAll, &mh) != GDX_OK) die("mem_reg");
        std::vector<uint8_t> rk(iface->md().rkey_packed_size());
        mh->pack_rkey(rk);
        send_line(fd, hex(ep->address()) + " " + hex(rk) + " " + std::to_string(reinterpret_cast<uintptr_t>(buf)));
        std::string l = recv_line(fd);
        size_t a = l.find(' '), b = l.find(' ', a + 1);
        if (a == std::string::npos || b == std::string::npos) die("peer hello");
        if (ep->connect(unhex(l.substr(0, a))) != GDX_OK) die("connect");
        if (iface->md().rkey_unpack(unhex(l.substr(a + 1, b - a - 1)), &peer_key) != GDX_OK) die("rkey_unpack");
        peer_base = std::stoull(l.substr(b + 1));
        send_line(fd, "CONNECTED"); // both QPs are in RTS before either side sends
        if (recv_line(fd) != "CONNECTED") die("peer did not connect");
    }
    gdx_status_t wait(tp::Completion &c) {
        while (c.count != 0) iface->progress();
        return c.status;
    }
    gdx_status_t op(bool put, uint8_t *local, size_t n, uint64_t raddr) {
        tp::Completion c;
        c.count = 1;
        gdx_status_t st;
        while ((st = put ? ep->put(local, n, mh.get(), raddr, *peer_key, &c) : ep->get(local, n, mh.get(), raddr, *peer_key, &c)) ==
               GDX_ERR_NO_RESOURCE)
            iface->progress();
        return st == GDX_INPROGRESS ? wait(c) : st;
    }
};

int server(const char *port) {
    int fd = tcp(true, nullptr, port);
    Node n;
    n.setup(fd);
    std::printf("server: connected over %s\n", n.iface->device_name().data());
    std::fflush(stdout);
    auto end = Clock::now() + std::chrono::seconds(300);
    while (Clock::now() < end) n.iface->progress(); // the client's puts and gets need nothing from us
    return 0;
}

int client(const char *host, const char *port) {
    int fd = tcp(false, host, port);
    Node n;
    n.setup(fd);
    double bound = static_cast<tp::rc::RcInterface &>(*n.iface).timing().bound_s;
    // Integrity: put into the other host's memory, read it back, byte-exact, at odd sizes and offsets.
    uint8_t *src = n.buf, *back = n.buf + kBuf / 2;
    uint32_t x = 1;
    for (size_t size : {size_t(1), size_t(63), size_t(4097), size_t(65536 + 3), size_t(1u << 20) + 1}) {
        for (size_t off : {size_t(0), size_t(5)}) {
            for (size_t i = 0; i < size; ++i) x = x * 1103515245 + 12345, src[off + i] = static_cast<uint8_t>(x >> 16);
            uint64_t raddr = n.peer_base + 3 * off + 1;
            if (n.op(true, src + off, size, raddr) != GDX_OK) die("put");
            std::memset(back, 0, size);
            if (n.op(false, back, size, raddr) != GDX_OK) die("get");
            if (std::memcmp(back, src + off, size) != 0) {
                std::printf("client: MISMATCH at size %zu offset %zu\n", size, off);
                return 1;
            }
        }
    }
    std::printf("client: integrity ok (put/get 1 B .. 1 MiB, odd offsets) over %s\nSTREAMING\n", n.iface->device_name().data());
    std::fflush(stdout);
    // Stream until the server's guest is killed; the gap between the last good completion and the failure is
    // the detection time.
    tp::Completion c[4];
    bool busy[4] = {};
    auto last_ok = Clock::now(), guard = Clock::now() + std::chrono::seconds(150);
    gdx_status_t failure = GDX_OK;
    long done = 0;
    while (Clock::now() < guard) {
        n.iface->progress();
        bool any = false;
        for (int i = 0; i < 4; ++i) {
            if (busy[i] && c[i].count == 0) {
                busy[i] = false;
                if (c[i].status == GDX_OK) ++done, last_ok = Clock::now();
                else if (failure == GDX_OK) failure = c[i].status;
            }
            if (!busy[i] && n.ep->state() == GDX_OK) {
                c[i] = tp::Completion{};
                c[i].count = 1;
                if (n.ep->put(src, 256 * 1024, n.mh.get(), n.peer_base + i * 256 * 1024, *n.peer_key, &c[i]) == GDX_INPROGRESS)
                    busy[i] = true;
            }
            any |= busy[i];
        }
        if (n.ep->state() != GDX_OK && !any) break;
    }
    double gap = std::chrono::duration<double>(Clock::now() - last_ok).count();
    std::printf("client: %ld puts of 256 KiB completed while streaming; then %s %.2f s after the last good one "
                "(GDX_PEER_TIMEOUT bound %.2f s)\n", done, gdx_status_string(failure == GDX_OK ? n.ep->state() : failure),
                gap, bound);
    bool ok = (failure == GDX_ERR_CONNECTION_RESET || n.ep->state() == GDX_ERR_CONNECTION_RESET) && gap < 3 * bound + 10;
    std::printf("client: %s\n", ok ? "PASS: the survivor's operations failed within the bound" : "FAIL");
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 3 && std::strcmp(argv[1], "server") == 0) return server(argv[2]);
    if (argc == 4 && std::strcmp(argv[1], "client") == 0) return client(argv[2], argv[3]);
    std::fprintf(stderr, "usage: rc_two_host server <port> | client <addr%%if> <port>\n");
    return 2;
}
