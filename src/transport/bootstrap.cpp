// Bootstrap: a star of TCP connections around rank 0, driven by a private io_context with deadlines.
//
// Frame (little-endian, 20-byte header + payload):
//   0 4 magic 0x42584447 ("GDXB")   4 1 version   5 1 type   6 2 reserved (0)
//   8 4 a   12 4 b   16 4 length
//   JOIN     a = wanted rank or 0xffffffff, b = expected size or 0    (client -> rank 0)
//   WELCOME  a = rank, b = size                                       (rank 0 -> client)
//   REFUSE   payload = why (text)                                     (rank 0 -> client), then close
//   DATA     a = round, payload = this rank's bytes                   (client -> rank 0)
//   ALL      a = round, payload = size x (u32 length, bytes)          (rank 0 -> client)
#include "transport/bootstrap.h"

#include "core/config.h"
#include "core/error.h"
#include "transport/wire.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <cstdlib>
#include <functional>

namespace gdx::tp {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kMagic = 0x42584447;
constexpr uint8_t kVersion = 1;
constexpr size_t kHdr = 20;
constexpr uint32_t kAnyRank = 0xffffffffu;
constexpr uint32_t kMaxAll = 64u << 20;
enum Type : uint8_t { kJoin = 1, kWelcome = 2, kRefuse = 3, kData = 4, kAll = 5 };
const char *type_name(uint8_t t) {
    static const char *const n[] = {"?", "JOIN", "WELCOME", "REFUSE", "DATA", "ALL"};
    return t <= kAll ? n[t] : "?";
}

struct Msg {
    uint8_t hdr[kHdr];
    uint8_t type = 0;
    uint32_t a = 0, b = 0;
    std::vector<uint8_t> body;
};

std::vector<uint8_t> frame(uint8_t type, uint32_t a, uint32_t b, std::span<const uint8_t> payload) {
    std::vector<uint8_t> out(kHdr + payload.size());
    wire::store_le32(out.data(), kMagic);
    out[4] = kVersion;
    out[5] = type;
    wire::store_le16(out.data() + 6, 0);
    wire::store_le32(out.data() + 8, a);
    wire::store_le32(out.data() + 12, b);
    wire::store_le32(out.data() + 16, static_cast<uint32_t>(payload.size()));
    std::copy(payload.begin(), payload.end(), out.begin() + kHdr);
    return out;
}

Clock::time_point deadline_after(std::chrono::nanoseconds t) {
    return t >= std::chrono::nanoseconds(Clock::time_point::max() - Clock::now()) ? Clock::time_point::max()
                                                                                  : Clock::now() + t;
}

} // namespace

struct Bootstrap::Impl {
    asio::io_context io{1};
    tcp::acceptor acceptor{io};
    std::vector<std::shared_ptr<tcp::socket>> peers; // rank 0: [r-1] is rank r; others: [0] is rank 0
    std::string where;                               // "host:port" for messages
    std::chrono::nanoseconds timeout{};
    uint32_t round = 0;
    bool joined_all = false;
    bool broken = false; // a step timed out or failed: the byte streams are no longer in step
    std::vector<std::shared_ptr<tcp::socket>> strays; // accepted, not (yet) a rank: closed on a timeout too

    // Runs handlers until done() or the deadline; on the deadline cancels everything and lets the aborted
    // handlers run (they reference objects of the caller's frame).
    bool run(const std::function<bool()> &done, Clock::time_point deadline) {
        io.restart();
        while (!done()) {
            if (io.run_one_until(deadline) > 0) continue;
            if (done()) break;
            boost::system::error_code ec;
            acceptor.cancel(ec);
            for (auto *list : {&peers, &strays})
                for (auto &s : *list)
                    if (s) s->close(ec);
            io.restart();
            while (io.run_one_for(std::chrono::milliseconds(200)) > 0) {}
            broken = true;
            return false;
        }
        return true;
    }

    // Reads one frame; `cb` gets GDX_OK and the message, or an error and a reason.
    void recv(const std::shared_ptr<tcp::socket> &s, uint32_t max_len,
              std::function<void(gdx_status_t, const std::string &, const std::shared_ptr<Msg> &)> cb) {
        auto m = std::make_shared<Msg>();
        asio::async_read(*s, asio::buffer(m->hdr), [s, m, max_len, cb](const boost::system::error_code &ec, size_t) {
            if (ec) return cb(GDX_ERR_CONNECTION_RESET, ec.message(), m);
            const uint8_t *p = m->hdr;
            uint32_t len = wire::load_le32(p + 16);
            m->type = p[5];
            m->a = wire::load_le32(p + 8);
            m->b = wire::load_le32(p + 12);
            if (wire::load_le32(p) != kMagic || p[4] != kVersion || wire::load_le16(p + 6) != 0 || m->type < kJoin ||
                m->type > kAll)
                return cb(GDX_ERR_PROTOCOL, "not a gdx bootstrap message (bad magic, version or type)", m);
            if (len > (m->type == kRefuse ? 1024u : max_len))
                return cb(GDX_ERR_PROTOCOL,
                          std::string(type_name(m->type)) + " of " + std::to_string(len) + " bytes is too large", m);
            m->body.resize(len);
            if (len == 0) return cb(GDX_OK, "", m);
            asio::async_read(*s, asio::buffer(m->body), [m, cb](const boost::system::error_code &e, size_t) {
                cb(e ? GDX_ERR_CONNECTION_RESET : GDX_OK, e ? e.message() : "", m);
            });
        });
    }

    void send(const std::shared_ptr<tcp::socket> &s, std::shared_ptr<std::vector<uint8_t>> bytes,
              std::function<void(const boost::system::error_code &)> cb) {
        asio::async_write(*s, asio::buffer(*bytes),
                          [bytes, cb](const boost::system::error_code &ec, size_t) { cb(ec); });
    }

    gdx_status_t accept_all(int size);
};

Bootstrap::Bootstrap() : impl_(std::make_unique<Impl>()) {}
Bootstrap::~Bootstrap() = default;

gdx_status_t Bootstrap::listen(const Options &opt, std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr || opt.size < 1 || opt.size > kMaxSize)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "bootstrap", "listen: size %d (must be 1..%d)", opt.size, kMaxSize);
    std::unique_ptr<Bootstrap> b(new Bootstrap());
    Impl &im = *b->impl_;
    im.timeout = opt.timeout;
    b->rank_ = 0;
    b->size_ = opt.size;
    boost::system::error_code ec;
    tcp::resolver resolver(im.io);
    auto found = resolver.resolve(opt.host, std::to_string(opt.port), tcp::resolver::passive, ec);
    if (ec || found.empty())
        return GDX_FAIL(GDX_ERR_INVALID_ADDR, "bootstrap", "listen: cannot resolve '%s': %s", opt.host.c_str(),
                        ec ? ec.message().c_str() : "no address");
    tcp::endpoint ep = *found.begin();
    if (opt.size > 1) {
        im.acceptor.open(ep.protocol(), ec);
        if (!ec) im.acceptor.set_option(tcp::acceptor::reuse_address(true), ec); // a fixed port reused soon after
        if (!ec) im.acceptor.bind(ep, ec);
        if (!ec) im.acceptor.listen(asio::socket_base::max_listen_connections, ec);
        if (!ec) b->port_ = im.acceptor.local_endpoint(ec).port();
        if (ec)
            return GDX_FAIL(GDX_ERR_IO, "bootstrap", "listen on %s:%u: %s", opt.host.c_str(), opt.port,
                            ec.message().c_str());
    } else {
        b->port_ = opt.port;
        im.joined_all = true;
    }
    im.where = opt.host + ":" + std::to_string(b->port_);
    *out = std::move(b);
    return GDX_OK;
}

gdx_status_t Bootstrap::Impl::accept_all(int size) {
    Clock::time_point deadline = deadline_after(timeout);
    peers.assign(static_cast<size_t>(size - 1), nullptr);
    int joined = 0, welcomed = 0;
    std::string last_refusal;
    std::function<void()> accept_next = [&] {
        auto s = std::make_shared<tcp::socket>(io);
        acceptor.async_accept(*s, [&, s](const boost::system::error_code &ec) {
            if (ec == asio::error::operation_aborted) return;
            if (joined < size - 1) accept_next();
            if (ec) return;
            strays.push_back(s);
            recv(s, 0, [&, s](gdx_status_t st, const std::string &why, const std::shared_ptr<Msg> &m) {
                if (st == GDX_OK && m->type != kJoin) st = GDX_ERR_PROTOCOL;
                std::string refusal;
                uint32_t rank = m->a;
                if (st != GDX_OK) {
                    GDX_WARN("bootstrap", "ignoring a connection on %s: %s", where.c_str(),
                             why.empty() ? "expected JOIN" : why.c_str());
                    boost::system::error_code e;
                    s->close(e);
                    return;
                }
                if (m->b != 0 && m->b != static_cast<uint32_t>(size)) {
                    refusal = "it expects " + std::to_string(m->b) + " processes, rank 0 runs " + std::to_string(size);
                } else if (rank == kAnyRank) {
                    for (rank = 1; rank < static_cast<uint32_t>(size) && peers[rank - 1]; ++rank) {}
                    if (rank >= static_cast<uint32_t>(size)) refusal = "every rank is taken";
                } else if (rank == 0 || rank >= static_cast<uint32_t>(size) || peers[rank - 1]) {
                    refusal = "rank " + std::to_string(rank) + " is out of range or taken";
                }
                if (!refusal.empty()) {
                    last_refusal = refusal;
                    GDX_WARN("bootstrap", "refusing a process joining %s: %s", where.c_str(), refusal.c_str());
                    auto bytes = std::make_shared<std::vector<uint8_t>>(frame(
                        kRefuse, 0, 0, {reinterpret_cast<const uint8_t *>(refusal.data()), refusal.size()}));
                    send(s, bytes, [s](const boost::system::error_code &) {
                        boost::system::error_code e;
                        s->close(e);
                    });
                    return;
                }
                peers[rank - 1] = s;
                ++joined;
                send(s, std::make_shared<std::vector<uint8_t>>(frame(kWelcome, rank, size, {})),
                     [&](const boost::system::error_code &e) { welcomed += e ? 0 : 1; });
            });
        });
    };
    accept_next();
    bool ok = run([&] { return joined == size - 1 && welcomed == size - 1; }, deadline);
    boost::system::error_code ec;
    acceptor.close(ec); // everyone is here: nothing listens any more
    strays.clear();
    if (!ok)
        return GDX_FAIL(GDX_ERR_TIMEOUT, "bootstrap",
                        "rank 0 on %s: %d of %d processes joined within %s (GDX_CONN_TIMEOUT)%s%s", where.c_str(),
                        joined + 1, size, format_duration(timeout).c_str(),
                        last_refusal.empty() ? "" : "; last refusal: ", last_refusal.c_str());
    joined_all = true;
    return GDX_OK;
}

gdx_status_t Bootstrap::join(const Options &opt, std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr || opt.port == 0 || opt.size < 0 || opt.size > kMaxSize || opt.rank == 0 || opt.rank < -1)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "bootstrap",
                        "join: needs the port rank 0 listens on, a rank of -1 or >= 1 and a size of 0..%d "
                        "(port %u, rank %d, size %d)", kMaxSize, opt.port, opt.rank, opt.size);
    std::unique_ptr<Bootstrap> b(new Bootstrap());
    Impl &im = *b->impl_;
    im.timeout = opt.timeout;
    im.where = opt.host + ":" + std::to_string(opt.port);
    b->port_ = opt.port;
    Clock::time_point deadline = deadline_after(opt.timeout);
    boost::system::error_code ec;
    tcp::resolver resolver(im.io);
    auto found = resolver.resolve(opt.host, std::to_string(opt.port), ec);
    if (ec || found.empty())
        return GDX_FAIL(GDX_ERR_INVALID_ADDR, "bootstrap", "join: cannot resolve '%s': %s", opt.host.c_str(),
                        ec ? ec.message().c_str() : "no address");
    auto s = std::make_shared<tcp::socket>(im.io);
    im.peers = {s};
    // Rank 0 may start later: retry refused connections until the deadline.
    std::string last = "no attempt";
    for (bool connected = false; !connected;) {
        bool done = false;
        asio::async_connect(*s, found, [&](const boost::system::error_code &e, const tcp::endpoint &) {
            done = true;
            connected = !e;
            if (e && e != asio::error::operation_aborted) last = e.message(); // not the deadline's cancel
        });
        if (!im.run([&] { return done; }, deadline) || (!connected && Clock::now() >= deadline))
            return GDX_FAIL(GDX_ERR_TIMEOUT, "bootstrap", "could not reach rank 0 at %s within %s: %s",
                            im.where.c_str(), format_duration(opt.timeout).c_str(), last.c_str());
        if (!connected) {
            s->close(ec);
            asio::steady_timer pause(im.io, std::chrono::milliseconds(50));
            bool slept = false;
            pause.async_wait([&](const boost::system::error_code &) { slept = true; });
            im.run([&] { return slept; }, Clock::time_point::max());
        }
    }
    std::shared_ptr<Msg> answer;
    gdx_status_t st = GDX_INPROGRESS;
    std::string why;
    im.send(s, std::make_shared<std::vector<uint8_t>>(frame(kJoin, opt.rank < 0 ? kAnyRank : opt.rank, opt.size, {})),
            [](const boost::system::error_code &) {}); // a failed send shows up as a failed read
    im.recv(s, 0, [&](gdx_status_t r, const std::string &w, const std::shared_ptr<Msg> &m) {
        st = r;
        why = w;
        answer = m;
    });
    if (!im.run([&] { return st != GDX_INPROGRESS; }, deadline))
        return GDX_FAIL(GDX_ERR_TIMEOUT, "bootstrap", "rank 0 at %s did not answer JOIN within %s", im.where.c_str(),
                        format_duration(opt.timeout).c_str());
    if (st == GDX_OK && answer->type == kRefuse)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "bootstrap", "rank 0 at %s refused this process: %.*s",
                        im.where.c_str(), static_cast<int>(answer->body.size()),
                        reinterpret_cast<const char *>(answer->body.data()));
    if (st == GDX_OK && (answer->type != kWelcome || answer->b < 2 || answer->b > kMaxSize || answer->a == 0 ||
                         answer->a >= answer->b))
        st = GDX_ERR_PROTOCOL, why = "expected WELCOME with a valid rank and size";
    if (st != GDX_OK)
        return GDX_FAIL(st, "bootstrap", "joining rank 0 at %s: %s", im.where.c_str(), why.c_str());
    b->rank_ = static_cast<int>(answer->a);
    b->size_ = static_cast<int>(answer->b);
    im.joined_all = true;
    *out = std::move(b);
    return GDX_OK;
}

gdx_status_t Bootstrap::from_env(const std::string &host, uint16_t port, std::chrono::nanoseconds timeout,
                                 std::unique_ptr<Bootstrap> *out) {
    const char *r = std::getenv("OMPI_COMM_WORLD_RANK"), *n = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (r == nullptr || n == nullptr)
        return GDX_FAIL(GDX_ERR_NOT_FOUND, "bootstrap",
                        "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE are not set: not launched by mpirun");
    std::string why;
    uint64_t rank = 0, size = 0;
    if (!parse_uint(r, &rank, &why) || !parse_uint(n, &size, &why) || size < 1 || size > kMaxSize || rank >= size)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "bootstrap", "OMPI_COMM_WORLD_RANK=%s OMPI_COMM_WORLD_SIZE=%s: not a "
                        "rank below a size of 1..%d", r, n, kMaxSize);
    if (port == 0) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "bootstrap", "from_env: a fixed port is needed");
    Options opt;
    opt.host = host;
    opt.port = port;
    opt.timeout = timeout;
    opt.size = static_cast<int>(size);
    if (rank == 0) return listen(opt, out);
    opt.rank = static_cast<int>(rank);
    return join(opt, out);
}

// Rank 0 collects and redistributes, the others send and receive, each step bounded by the timeout: a little over
// the ~80-line rule, kept whole so both roles of one round read side by side.
gdx_status_t Bootstrap::allgather(std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>> *out) {
    Impl &im = *impl_;
    if (out == nullptr || mine.size() > kMaxBlob)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "bootstrap", "allgather: %zu bytes (at most %zu) or null output",
                        mine.size(), kMaxBlob);
    if (im.broken)
        return GDX_FAIL(GDX_ERR_IO, "bootstrap", "allgather: an earlier step failed; the rendezvous is unusable");
    if (!im.joined_all) {
        gdx_status_t st = im.accept_all(size_);
        if (st != GDX_OK) return st;
    }
    uint32_t round = ++im.round;
    Clock::time_point deadline = deadline_after(im.timeout);
    out->assign(static_cast<size_t>(size_), {});
    if (size_ == 1) {
        (*out)[0].assign(mine.begin(), mine.end());
        return GDX_OK;
    }
    gdx_status_t failed = GDX_OK;
    std::string why;
    auto fail_with = [&](gdx_status_t st, std::string w) {
        if (failed == GDX_OK) failed = st, why = std::move(w);
    };
    int pending = 0;
    if (rank_ == 0) {
        (*out)[0].assign(mine.begin(), mine.end());
        pending = size_ - 1;
        for (int r = 1; r < size_; ++r) {
            im.recv(im.peers[r - 1], kMaxBlob, [&, r](gdx_status_t st, const std::string &w, const std::shared_ptr<Msg> &m) {
                --pending;
                if (st == GDX_OK && (m->type != kData || m->a != round)) st = GDX_ERR_PROTOCOL;
                if (st != GDX_OK) return fail_with(st, "rank " + std::to_string(r) + ": " + (w.empty() ? "expected DATA of this round" : w));
                (*out)[r] = std::move(m->body);
            });
        }
        if (im.run([&] { return pending == 0; }, deadline) && failed == GDX_OK) {
            std::vector<uint8_t> all;
            for (auto &v : *out) {
                uint8_t len[4];
                wire::store_le32(len, static_cast<uint32_t>(v.size()));
                all.insert(all.end(), len, len + 4);
                all.insert(all.end(), v.begin(), v.end());
            }
            if (all.size() > kMaxAll) {
                fail_with(GDX_ERR_INVALID_PARAM, "the gathered bytes exceed " + std::to_string(kMaxAll));
            } else {
                auto bytes = std::make_shared<std::vector<uint8_t>>(frame(kAll, round, 0, all));
                pending = size_ - 1;
                for (int r = 1; r < size_; ++r)
                    im.send(im.peers[r - 1], bytes, [&, r](const boost::system::error_code &e) {
                        --pending;
                        if (e) fail_with(GDX_ERR_CONNECTION_RESET, "rank " + std::to_string(r) + ": " + e.message());
                    });
                im.run([&] { return pending == 0; }, deadline);
            }
        }
    } else {
        pending = 1;
        im.send(im.peers[0], std::make_shared<std::vector<uint8_t>>(frame(kData, round, 0, mine)),
                [](const boost::system::error_code &) {});
        im.recv(im.peers[0], kMaxAll, [&](gdx_status_t st, const std::string &w, const std::shared_ptr<Msg> &m) {
            --pending;
            if (st == GDX_OK && (m->type != kAll || m->a != round)) st = GDX_ERR_PROTOCOL;
            if (st != GDX_OK) return fail_with(st, w.empty() ? "expected ALL of this round" : w);
            size_t off = 0;
            for (int r = 0; r < size_; ++r) {
                if (m->body.size() - off < 4) return fail_with(GDX_ERR_PROTOCOL, "ALL is truncated");
                uint32_t len = wire::load_le32(m->body.data() + off);
                off += 4;
                if (len > kMaxBlob || m->body.size() - off < len) return fail_with(GDX_ERR_PROTOCOL, "ALL entry overruns");
                (*out)[r].assign(m->body.begin() + off, m->body.begin() + off + len);
                off += len;
            }
            if (off != m->body.size()) fail_with(GDX_ERR_PROTOCOL, "ALL has trailing bytes");
        });
        im.run([&] { return pending == 0; }, deadline);
    }
    if (pending != 0)
        return GDX_FAIL(GDX_ERR_TIMEOUT, "bootstrap", "rank %d: allgather round %u on %s not finished within %s "
                        "(a process is gone or slow)", rank_, round, im.where.c_str(), format_duration(im.timeout).c_str());
    if (failed != GDX_OK) {
        im.broken = true;
        return GDX_FAIL(failed, "bootstrap", "rank %d: allgather round %u on %s: %s", rank_, round, im.where.c_str(),
                        why.c_str());
    }
    return GDX_OK;
}

gdx_status_t Bootstrap::barrier() {
    std::vector<std::vector<uint8_t>> ignored;
    return allgather({}, &ignored);
}

} // namespace gdx::tp
