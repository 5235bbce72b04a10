#include "control.h"

#include "datapath.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace gdx::perf {

namespace {

uint64_t to_ms(double s) { return static_cast<uint64_t>(std::min(s, 1e6) * 1e3); }

std::string failed(const char *what, gdx_status_t st) {
    std::string e = gdx_last_error();
    return std::string(what) + ": " + (e.empty() ? gdx_status_string(st) : e);
}

} // namespace

const char *msg_name(Msg m) {
    switch (m) {
    case Msg::Idle: return "IDLE";
    case Msg::Hello: return "HELLO";
    case Msg::Spec: return "SPEC";
    case Msg::Ready: return "READY";
    case Msg::Begin: return "BEGIN";
    case Msg::Fill: return "FILL";
    case Msg::Check: return "CHECK";
    case Msg::End: return "END";
    case Msg::Ok: return "OK";
    case Msg::Error: return "ERROR";
    case Msg::Bye: return "BYE";
    }
    return "?";
}

const std::string &Message::field(size_t i) const {
    static const std::string empty;
    return i < fields.size() ? fields[i] : empty;
}

uint64_t Message::u64(size_t i) const {
    const std::string &f = field(i);
    if (f.empty() || f.size() > 20) return 0;
    uint64_t v = 0;
    for (char c : f) {
        if (c < '0' || c > '9') return 0;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
}

std::string num(uint64_t v) { return std::to_string(v); }

std::string encode(const Message &m) {
    std::string s(1, static_cast<char>(m.type));
    for (const std::string &f : m.fields) {
        uint32_t n = static_cast<uint32_t>(f.size());
        for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(n >> (8 * i)));
        s += f;
    }
    return s;
}

bool decode(const std::vector<uint8_t> &b, Message *out, std::string *why) {
    if (b.empty() || b[0] > static_cast<uint8_t>(Msg::Bye)) {
        *why = "malformed control message from the peer (is it a gdx_perftest of the same version?)";
        return false;
    }
    out->type = static_cast<Msg>(b[0]);
    out->fields.clear();
    size_t off = 1;
    while (off < b.size()) {
        if (b.size() - off < 4) {
            *why = "malformed control message from the peer: truncated field";
            return false;
        }
        uint32_t n = b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (static_cast<uint32_t>(b[off + 3]) << 24);
        off += 4;
        if (n > b.size() - off) {
            *why = "malformed control message from the peer: field longer than the message";
            return false;
        }
        out->fields.emplace_back(reinterpret_cast<const char *>(b.data() + off), n);
        off += n;
    }
    return true;
}

Control::Control() = default;

Control::~Control() {
    if (worker_.joinable()) worker_.join();
}

gdx_status_t Control::listen(const std::string &host, uint16_t port, double timeout_s, std::string *why) {
    timeout_s_ = timeout_s;
    gdx_ext_oob_t *o = nullptr;
    gdx_status_t st = gdx_ext_oob_listen(host.c_str(), port, 2, to_ms(timeout_s), &o);
    if (st != GDX_OK) {
        *why = failed(("cannot listen on " + host + ":" + std::to_string(port)).c_str(), st);
        return st;
    }
    bs_.reset(o);
    where_ = host + ":" + std::to_string(gdx_ext_oob_port(o));
    return GDX_OK;
}

gdx_status_t Control::join(const std::string &host, uint16_t port, double timeout_s, std::string *why) {
    timeout_s_ = timeout_s;
    where_ = host + ":" + std::to_string(port);
    gdx_ext_oob_t *o = nullptr;
    gdx_status_t st = gdx_ext_oob_join(host.c_str(), port, 1, 2, to_ms(timeout_s), &o);
    if (st != GDX_OK) {
        *why = failed(("cannot reach the server at " + where_ + " (is gdx_perftest running there, on this port?)").c_str(),
                      st);
        return st;
    }
    bs_.reset(o);
    return GDX_OK;
}

gdx_status_t Control::from_env(const std::string &host, uint16_t port, double timeout_s, std::string *why) {
    where_ = host + ":" + std::to_string(port);
    timeout_s_ = timeout_s;
    gdx_ext_oob_t *o = nullptr;
    gdx_status_t st = gdx_ext_oob_from_env(host.c_str(), port, to_ms(timeout_s), &o);
    if (st != GDX_OK) {
        *why = failed(("mpirun rendezvous at " + where_ + " failed").c_str(), st);
        return st;
    }
    bs_.reset(o);
    if (gdx_ext_oob_size(o) != 2) {
        *why = "under mpirun gdx_perftest needs exactly 2 ranks (the bootstrap sees " +
               std::to_string(gdx_ext_oob_size(o)) + ")";
        return GDX_ERR_INVALID_PARAM;
    }
    return GDX_OK;
}

uint16_t Control::bound_port() const { return bs_ ? gdx_ext_oob_port(bs_.get()) : 0; }

void Control::start(const Message &mine) {
    if (worker_.joinable()) worker_.join(); // the previous exchange, finished or abandoned
    done_.store(false, std::memory_order_relaxed);
    gathered_.clear();
    std::string bytes = encode(mine);
    worker_ = std::thread([this, bytes = std::move(bytes)] {
        result_ = gdx_ext_oob_allgather(bs_.get(), bytes.data(), bytes.size());
        for (int r = 0; result_ == GDX_OK && r < gdx_ext_oob_size(bs_.get()); ++r) {
            const void *data = nullptr;
            size_t len = 0;
            result_ = gdx_ext_oob_part(bs_.get(), r, &data, &len);
            if (result_ == GDX_OK) gathered_.emplace_back(static_cast<const uint8_t *>(data),
                                                          static_cast<const uint8_t *>(data) + len);
        }
        if (result_ != GDX_OK) {
            result_why_ = exchanges_ == 0 ? failed("rendezvous", result_)
                                          : failed("the control exchange with the peer failed", result_);
            if (result_ == GDX_ERR_TIMEOUT && exchanges_ > 0) {
                char t[32];
                std::snprintf(t, sizeof(t), "%g", timeout_s_);
                result_why_ += std::string(" (every step, including one warm-up or measured phase of a size, must end "
                                           "within --timeout ") + t + " s: raise it for long runs)";
            }
        }
        done_.store(true, std::memory_order_release);
    });
}

gdx_status_t Control::finish(Message *theirs, std::string *why) {
    if (worker_.joinable()) worker_.join();
    if (result_ != GDX_OK) {
        broken_ = true;
        *why = result_why_;
        return result_;
    }
    ++exchanges_;
    const int peer = gdx_ext_oob_rank(bs_.get()) == 0 ? 1 : 0;
    if (gathered_.size() != 2) {
        *why = "the control exchange returned " + std::to_string(gathered_.size()) + " parts, expected 2";
        return GDX_ERR_PROTOCOL;
    }
    return decode(gathered_[peer], theirs, why) ? GDX_OK : GDX_ERR_PROTOCOL;
}

gdx_status_t Control::exchange(const Message &mine, Message *theirs, DataPath *dp, std::string *why) {
    start(mine);
    while (!done())
        if (dp == nullptr || dp->progress() == 0) std::this_thread::yield();
    gdx_status_t st = finish(theirs, why);
    last_ = std::chrono::steady_clock::now();
    return st;
}

gdx_status_t Control::keepalive(DataPath *dp, std::string *why) {
    if (std::chrono::steady_clock::now() - last_ < std::chrono::duration<double>(timeout_s_ / 3)) return GDX_OK;
    Message theirs;
    gdx_status_t st = exchange(Message{Msg::Idle, {}}, &theirs, dp, why);
    if (st == GDX_OK && theirs.type == Msg::Error) {
        *why = "peer: " + theirs.field(0);
        peer_failed_ = true;
        return GDX_ERR_CANCELED;
    }
    return st;
}

gdx_status_t Control::call(Msg type, const std::vector<std::string> &fields, Msg expect, Message *reply,
                           DataPath *dp, std::string *why) {
    Message first;
    gdx_status_t st = exchange(Message{type, fields}, &first, dp, why);
    if (st != GDX_OK) return st;
    if (first.type == Msg::Error) { // the server failed on its own before it saw this request
        *why = "peer: " + first.field(0);
        peer_failed_ = true;
        return GDX_ERR_CANCELED;
    }
    st = exchange(Message{Msg::Idle, {}}, reply, dp, why);
    if (st != GDX_OK) return st;
    if (reply->type == Msg::Error) {
        *why = "peer: " + reply->field(0);
        peer_failed_ = true;
        return GDX_ERR_CANCELED;
    }
    if (reply->type != expect) {
        *why = std::string("protocol error: expected ") + msg_name(expect) + " from the peer, got " + msg_name(reply->type);
        return GDX_ERR_PROTOCOL;
    }
    return GDX_OK;
}

void Control::notify_failure(const std::string &message, DataPath *dp) {
    if (peer_failed_) { // the failure is the peer's own message: it knows, and waits for the next request
        peer_failed_ = false;
        return;
    }
    if (broken_ || !bs_) return;
    Message ignored;
    std::string why;
    exchange(Message{Msg::Error, {message}}, &ignored, dp, &why);
}

gdx_status_t Control::reply(Msg type, const std::vector<std::string> &fields, DataPath *dp, std::string *why) {
    Message ignored;
    return exchange(Message{type, fields}, &ignored, dp, why);
}

} // namespace gdx::perf
