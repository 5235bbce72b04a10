// The other process of the intra-node tests: opens a transport, prints its endpoint address, then serves one-line
// commands from stdin (replies on stdout) while driving progress. Started with exec by the tests (Link).
//
//   connect <addr>                        -> ok | err <status>
//   state                                 -> state <status>
//   alloc <name> <kind> <size> <off> <seed> <rw|r|w>  -> buf <name> <addr> <rkey>   (pattern-filled)
//   realloc <name>                        -> buf ...   (free, then the same allocation again)
//   rereg <name>                          -> buf ...   (deregister, then register the same memory again)
//   fill <name> <seed> | dereg <name> | free <name>   -> ok
//   check <name> <off> <len> <seed> <first>           -> ok | bad <index>
//   put|get <name> <off> <len> <raddr> <rkey>        -> done <status>
//   am <id> <len> <seed>                  -> done <status>     (our AM id 1 handler echoes as id 2)
//   amstat                                -> am <count> <bytes> (AMs with id 3 received, pattern-checked)
//   pause <ms>                            -> ok (after sleeping without progress)
//   raw_connect <addr>                    -> closed | open     (a foreign HELLO straight to that listener)
//   am4stat                               -> am4 <count> <bad>  (AM id 4 = {len, seed}: checks buffer "r" on arrival)
//   exit                                  -> bye
#include "common.h"
#include "transport/shm/channel.h"
#include "transport/shm/sock.h"
#include "transport/wire.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <poll.h>
#include <thread>
#include <unistd.h>

using namespace gdx;
using namespace gdx::test;

namespace {

struct Buf {
    std::unique_ptr<Buffer> mem;
    std::unique_ptr<tp::MemHandle> mh;
    Kind kind;
    size_t size, off;
    unsigned access;
};

Opened g_tp;
std::unique_ptr<tp::Endpoint> g_ep;
std::map<std::string, Buf> g_bufs;
int g_gpu = 0;
uint64_t g_am3_count = 0, g_am3_bytes = 0, g_am3_bad = 0;

void reply(const std::string &s) {
    std::string l = s + "\n";
    if (write(1, l.data(), l.size()) < 0) _exit(3);
}

void am_echo(void *, tp::Endpoint *ep, const void *data, size_t len) {
    // Echo id 1 as id 2 (the test compares); retried on back-pressure with progress in between.
    for (int i = 0; i < 1000000; ++i) {
        gdx_status_t st = len <= g_tp.iface->caps().max_am_short ? ep->am_short(2, data, len)
                                                                 : ep->am_bcopy(2, data, len);
        if (st != GDX_ERR_NO_RESOURCE) return;
        g_tp.iface->progress();
    }
}

void am_count(void *, tp::Endpoint *, const void *data, size_t len) {
    ++g_am3_count;
    g_am3_bytes += len;
    if (len >= 8) {
        uint64_t seed;
        std::memcpy(&seed, data, 8);
        if (check_pattern(static_cast<const uint8_t *>(data) + 8, len - 8, seed) >= 0) ++g_am3_bad;
    }
}

uint64_t g_am4_count = 0, g_am4_bad = 0;

// AM id 4 follows a put into buffer "r": the bytes must be there when the handler runs (ordering check).
void am_check(void *, tp::Endpoint *, const void *data, size_t len) {
    ++g_am4_count;
    uint64_t w[2] = {0, 0};
    auto it = g_bufs.find("r");
    if (len < sizeof(w) || it == g_bufs.end()) {
        ++g_am4_bad;
        return;
    }
    std::memcpy(w, data, sizeof(w));
    if (it->second.mem->check(0, w[0], w[1], 0) >= 0) ++g_am4_bad;
}

std::string st_text(gdx_status_t st) { return std::to_string(static_cast<int>(st)); }

// Registers b's memory (again, for rereg) and answers "buf <name> <addr> <key>".
std::string register_buf(const std::string &name, Buf &b) {
    gdx_status_t st = g_tp.iface->md().mem_reg(b.mem->ptr(), b.size, b.mem->info(),
                                               b.access | tp::kAccessLocalRead | tp::kAccessLocalWrite, &b.mh);
    if (st != GDX_OK) return "err " + st_text(st);
    std::vector<uint8_t> rk(g_tp.iface->md().rkey_packed_size());
    b.mh->pack_rkey(rk);
    char a[32];
    std::snprintf(a, sizeof(a), "%" PRIx64, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b.mem->ptr())));
    return "buf " + name + " " + a + " " + hex(rk);
}

std::string do_alloc(const std::string &name, Kind k, size_t size, size_t off, uint64_t seed, unsigned access) {
    Buf b{nullptr, nullptr, k, size, off, access};
    gdx_status_t st = Buffer::make(k, g_gpu, size, off, &b.mem);
    if (st != GDX_OK) return "err " + st_text(st);
    if ((st = b.mem->fill(seed)) != GDX_OK) return "err " + st_text(st);
    std::string reply = register_buf(name, b);
    if (reply.rfind("buf ", 0) == 0) g_bufs[name] = std::move(b);
    return reply;
}

std::string do_op(bool put, const std::vector<std::string> &w) {
    auto it = g_bufs.find(w[1]);
    if (it == g_bufs.end() || w.size() < 6) return "err bad-args";
    size_t off = std::stoull(w[2]), len = std::stoull(w[3]);
    uint64_t raddr = std::stoull(w[4], nullptr, 16);
    std::unique_ptr<tp::RemoteKey> rk;
    gdx_status_t st = g_tp.iface->md().rkey_unpack(unhex(w[5]), &rk);
    if (st != GDX_OK) return "done " + st_text(st);
    uint8_t *p = it->second.mem->ptr() + off;
    const tp::MemHandle *mh = it->second.mh.get();
    st = run_op(*g_tp.iface, [&](tp::Completion *c) {
        return put ? g_ep->put(p, len, mh, raddr, *rk, c) : g_ep->get(p, len, mh, raddr, *rk, c);
    });
    return "done " + st_text(st);
}

std::string raw_connect(const std::string &hex) {
    // A process that is not allowed in (another uid) knocks directly: the listener must close on it.
    std::vector<uint8_t> a = unhex(hex);
    tp::shm::EpAddress ea;
    std::string why;
    if (tp::shm::decode_ep_address(a, &ea, &why) != GDX_OK) return "err " + why;
    std::string name = tp::shm::socket_name(ea.transport == tp::wire::TransportId::Shm ? "shm" : "cuda_ipc", ea.pid,
                                            ea.iface_nonce);
    int fd = -1;
    if (tp::shm::connect_abstract(name, &fd) != GDX_OK) return "closed";
    uint8_t hello[64] = {'G', 'D', 'X', 'C', 1, 0};
    tp::shm::send_msg(fd, hello, sizeof(hello), nullptr, 0);
    for (int i = 0; i < 500; ++i) {
        uint8_t b[64];
        int fds[4];
        size_t len, nfds;
        gdx_status_t st = tp::shm::recv_msg(fd, b, sizeof(b), &len, fds, 4, &nfds);
        if (st == GDX_ERR_CONNECTION_RESET || tp::shm::socket_hung_up(fd)) {
            close(fd);
            return "closed";
        }
        usleep(10000);
    }
    close(fd);
    return "open";
}

std::string handle(const std::string &line) {
    std::vector<std::string> w = words(line);
    if (w.empty()) return "err empty";
    const std::string &c = w[0];
    if (c == "connect") {
        gdx_status_t st = g_ep->connect(unhex(w[1]));
        return st == GDX_INPROGRESS || st == GDX_OK ? "ok" : "err " + st_text(st);
    }
    if (c == "state") return "state " + st_text(g_ep->state());
    if (c == "alloc") {
        Kind k;
        if (w.size() < 7 || !parse_kind(w[2], &k)) return "err bad-args";
        unsigned acc = (w[6].find('r') != std::string::npos ? unsigned{tp::kAccessRemoteRead} : 0u) |
                       (w[6].find('w') != std::string::npos ? unsigned{tp::kAccessRemoteWrite} : 0u);
        return do_alloc(w[1], k, std::stoull(w[3]), std::stoull(w[4]), std::stoull(w[5]), acc);
    }
    auto it = w.size() > 1 ? g_bufs.find(w[1]) : g_bufs.end();
    if (c == "realloc" && it != g_bufs.end()) {
        Buf old = std::move(it->second);
        g_bufs.erase(it);
        Kind k = old.kind;
        size_t size = old.size, off = old.off;
        unsigned acc = old.access;
        old.mh.reset();
        old.mem.reset(); // freed first, so the allocator may hand the same address out again
        return do_alloc(w[1], k, size, off, 0, acc);
    }
    if (c == "rereg" && it != g_bufs.end()) {
        it->second.mh.reset(); // the exporter revokes this export lifetime
        return register_buf(w[1], it->second);
    }
    if (c == "fill" && it != g_bufs.end()) return it->second.mem->fill(std::stoull(w[2])) == GDX_OK ? "ok" : "err";
    if (c == "dereg" && it != g_bufs.end()) {
        it->second.mh.reset();
        return "ok";
    }
    if (c == "free" && it != g_bufs.end()) {
        g_bufs.erase(it);
        return "ok";
    }
    if (c == "check" && it != g_bufs.end() && w.size() >= 6) {
        long long bad = it->second.mem->check(std::stoull(w[2]), std::stoull(w[3]), std::stoull(w[4]),
                                              std::stoull(w[5]));
        return bad < 0 ? "ok" : "bad " + std::to_string(bad);
    }
    if (c == "put" || c == "get") return do_op(c == "put", w);
    if (c == "am_after" && w.size() >= 5) { // am_after <ns> <id> <len> <seed>: spin <ns>, then as "am"
        auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(std::stoll(w[1]));
        while (std::chrono::steady_clock::now() < until) {
        }
        return handle("am " + w[2] + " " + w[3] + " " + w[4]);
    }
    if (c == "am") {
        uint8_t id = static_cast<uint8_t>(std::stoi(w[1]));
        size_t len = std::stoull(w[2]);
        uint64_t seed = std::stoull(w[3]);
        std::vector<uint8_t> b(std::max<size_t>(len, 8));
        std::memcpy(b.data(), &seed, 8);
        fill_pattern(b.data() + 8, b.size() - 8, seed);
        gdx_status_t st = run_op(*g_tp.iface, [&](tp::Completion *) { return g_ep->am_bcopy(id, b.data(), len); });
        return "done " + st_text(st);
    }
    if (c == "amstat")
        return "am " + std::to_string(g_am3_count) + " " + std::to_string(g_am3_bytes) + " " +
               std::to_string(g_am3_bad);
    if (c == "am4stat") return "am4 " + std::to_string(g_am4_count) + " " + std::to_string(g_am4_bad);
    if (c == "pause") {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(w[1])));
        return "ok";
    }
    if (c == "raw_connect") return raw_connect(w[1]);
    if (c == "exit") {
        reply("bye");
        g_bufs.clear();
        g_ep.reset();
        g_tp.iface.reset();
        std::exit(0);
    }
    return "err unknown command: " + line;
}

} // namespace

int main(int argc, char **argv) {
    std::string transport = "shm", device = "memory";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--transport") transport = argv[i + 1];
        else if (a == "--device") device = argv[i + 1];
        else if (a == "--gpu") g_gpu = std::atoi(argv[i + 1]);
    }
    gdx_status_t st = open_transport(transport, device, {}, &g_tp);
    if (st == GDX_OK) st = g_tp.iface->ep_create(&g_ep);
    if (st != GDX_OK) {
        reply("err " + st_text(st));
        return 2;
    }
    g_tp.iface->set_am_handler(1, am_echo, nullptr);
    g_tp.iface->set_am_handler(3, am_count, nullptr);
    g_tp.iface->set_am_handler(4, am_check, nullptr);
    reply("addr " + hex(g_ep->address()));
    std::string buf;
    unsigned idle = 0, iter = 0;
    for (;;) {
        unsigned n = g_tp.iface->progress();
        idle = n ? 0 : idle + 1;
        ++iter;
        int timeout = 0;
        // Busy-poll while there is traffic; after a quiet spell sleep on the wakeup fd (exercises wakeups too).
        if (idle > 20000 && g_tp.iface->arm_wakeup() == GDX_OK) timeout = 5;
        pollfd p[2] = {{0, POLLIN, 0}, {g_tp.iface->wakeup_fd(), POLLIN, 0}};
        if ((iter & 63) != 0 && timeout == 0) continue;
        if (poll(p, g_tp.iface->wakeup_fd() >= 0 ? 2 : 1, timeout) <= 0 || !(p[0].revents & (POLLIN | POLLHUP)))
            continue;
        idle = 0;
        char b[65536];
        ssize_t r = read(0, b, sizeof(b));
        if (r <= 0) break; // the test closed our stdin: leave
        buf.append(b, static_cast<size_t>(r));
        size_t nl;
        while ((nl = buf.find('\n')) != std::string::npos) {
            std::string line = buf.substr(0, nl);
            buf.erase(0, nl + 1);
            reply(handle(line));
        }
    }
    g_bufs.clear();
    g_ep.reset();
    return 0;
}
