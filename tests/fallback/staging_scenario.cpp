#include "staging_scenario.h"

#include "../memtype/test_alloc.h"
#include "transport/bootstrap.h"
#include "transport/wire.h"

#include <thread>

namespace gdx::test {

struct KindBuffer::Impl {
    mem::test::TestBuffer buf;
};

KindBuffer::KindBuffer() = default;
KindBuffer::~KindBuffer() = default;

bool KindBuffer::allocate(const std::string &kind, size_t size, std::string *why) {
    using mem::test::AllocKind;
    AllocKind k;
    if (kind == "host")
        k = AllocKind::HostMalloc;
    else if (kind == "pinned")
        k = AllocKind::HostPinned;
    else if (kind == "cuda")
        k = AllocKind::CudaDevice;
    else if (kind == "managed")
        k = AllocKind::CudaManaged;
    else if (kind == "vmm")
        k = AllocKind::CudaVmm;
    else if (kind == "pool")
        k = AllocKind::CudaPool;
    else {
        *why = "unknown memory kind '" + kind + "'";
        return false;
    }
    if (mem::test::needs_cuda(k)) {
        std::string skip = mem::test::gpu_skip_reason();
        if (!skip.empty()) {
            *why = skip;
            return false;
        }
    }
    impl_ = std::make_unique<Impl>();
    if (!impl_->buf.allocate(k, size, 0, why)) return false;
    ptr_ = impl_->buf.ptr();
    size_ = size;
    gpu_ = k != AllocKind::HostMalloc && k != AllocKind::HostPinned;
    return true;
}

gdx_status_t KindBuffer::write(const std::vector<uint8_t> &host) {
    if (!gpu_) return std::memcpy(ptr_, host.data(), size_), GDX_OK;
    return mem::ops(mem::MemKind::Cuda).copy(ptr_, host.data(), size_, 0);
}

gdx_status_t KindBuffer::read(std::vector<uint8_t> *host) const {
    host->resize(size_);
    if (!gpu_) return std::memcpy(host->data(), ptr_, size_), GDX_OK;
    return mem::ops(mem::MemKind::Cuda).copy(host->data(), ptr_, size_, 0);
}

std::string check_bytes(const std::vector<uint8_t> &got, uint8_t (*expected)(const Scenario &, size_t),
                        const Scenario &s) {
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != expected(s, i))
            return "byte " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                   std::to_string(expected(s, i));
    return "";
}

std::vector<uint8_t> join_blobs(const std::vector<std::vector<uint8_t>> &parts) {
    std::vector<uint8_t> out;
    for (const auto &p : parts) {
        size_t at = out.size();
        out.resize(at + 4);
        tp::wire::store_le32(out.data() + at, static_cast<uint32_t>(p.size()));
        out.insert(out.end(), p.begin(), p.end());
    }
    return out;
}

bool split_blobs(const std::vector<uint8_t> &in, std::vector<std::vector<uint8_t>> *out) {
    out->clear();
    size_t at = 0;
    while (at < in.size()) {
        if (in.size() - at < 4) return false;
        uint32_t n = tp::wire::load_le32(in.data() + at);
        at += 4;
        if (n > in.size() - at) return false;
        out->emplace_back(in.begin() + at, in.begin() + at + n);
        at += n;
    }
    return true;
}

namespace {

std::string api_error(const char *what, gdx_status_t st) {
    return std::string(what) + ": " + gdx_status_string(st) + " (" + gdx_last_error() + ")";
}

// The C objects of one side, released in the right order whatever happened.
struct Side {
    gdx_config_t *cfg = nullptr;
    gdx_context_t *ctx = nullptr;
    gdx_ep_t *ep = nullptr;
    gdx_mem_t *mem = nullptr;
    gdx_rkey_t *rkey = nullptr;
    std::vector<gdx_request_t *> reqs;
    ~Side() {
        for (gdx_request_t *r : reqs) gdx_request_free(r);
        gdx_rkey_destroy(rkey);
        if (ep != nullptr && gdx_ep_destroy(ep) != GDX_OK) std::fprintf(stderr, "endpoint busy at exit\n");
        if (mem != nullptr && gdx_mem_dereg(mem) != GDX_OK) std::fprintf(stderr, "registration busy at exit\n");
        gdx_context_destroy(ctx);
        gdx_config_destroy(cfg);
    }
};

std::vector<uint8_t> blob_of(gdx_status_t (*fn)(const void *, void *, size_t *), const void *obj) {
    size_t n = 0;
    fn(obj, nullptr, &n);
    std::vector<uint8_t> b(n);
    if (fn(obj, b.data(), &n) != GDX_OK) b.clear();
    return b;
}

} // namespace

RankResult run_rank(const RankOptions &o, void *bootstrap) {
    auto &boot = *static_cast<tp::Bootstrap *>(bootstrap);
    RankResult res;
    const Scenario &sc = o.sc;
    Side s;
    gdx_status_t st;
    auto bad = [&](const std::string &e) {
        res.error = e;
        return res;
    };
    if ((st = gdx_config_create(&s.cfg)) != GDX_OK) return bad(api_error("gdx_config_create", st));
    for (const auto &[k, v] : o.config)
        if ((st = gdx_config_set(s.cfg, k.c_str(), v.c_str())) != GDX_OK) return bad(api_error(k.c_str(), st));
    if ((st = gdx_context_create(s.cfg, &s.ctx)) != GDX_OK) return bad(api_error("gdx_context_create", st));

    KindBuffer buf;
    std::string why;
    if (!buf.allocate(o.kind, sc.buf_size(), &why)) return bad("allocate " + o.kind + ": " + why);
    std::vector<uint8_t> host(sc.buf_size());
    fill_pattern(host.data(), host.size(), o.rank == 0 ? 1 : 2);
    if ((st = buf.write(host)) != GDX_OK) return bad(api_error("fill the buffer", st));
    if ((st = gdx_mem_reg(s.ctx, buf.data(), buf.size(), GDX_ACCESS_ALL, &s.mem)) != GDX_OK)
        return bad(api_error("gdx_mem_reg", st));
    if ((st = gdx_ep_create(s.ctx, &s.ep)) != GDX_OK) return bad(api_error("gdx_ep_create", st));
    auto addr = blob_of([](const void *e, void *b, size_t *n) { return gdx_ep_address(static_cast<const gdx_ep_t *>(e), b, n); }, s.ep);
    auto key = blob_of([](const void *m, void *b, size_t *n) { return gdx_mem_pack(static_cast<const gdx_mem_t *>(m), b, n); }, s.mem);
    std::vector<std::vector<uint8_t>> all, peer;
    if (boot.allgather(join_blobs({addr, key}), &all) != GDX_OK) return bad("allgather of addresses: " + last_error());
    if (!split_blobs(all[1 - o.rank], &peer) || peer.size() != 2) return bad("the peer's blob is malformed");
    if ((st = gdx_ep_connect(s.ep, peer[0].data(), peer[0].size())) != GDX_OK) return bad(api_error("gdx_ep_connect", st));
    if (!progress_until(s.ctx, [&] { return gdx_ep_state(s.ep) != GDX_INPROGRESS; }, o.timeout_s))
        return bad("connecting timed out");
    if ((st = gdx_ep_state(s.ep)) != GDX_OK) return bad(api_error("connection", st));
    res.transports = gdx_ep_transports(s.ep);
    if ((st = gdx_rkey_unpack(s.ep, peer[1].data(), peer[1].size(), &s.rkey)) != GDX_OK)
        return bad(api_error("gdx_rkey_unpack", st));

    if (o.rank == 0) {
        for (bool put : {true, false})
            for (unsigned k = 0; k < sc.pieces; ++k) {
                auto [off, len] = sc.piece(k);
                if (len == 0) continue;
                gdx_request_t *r = nullptr;
                st = put ? gdx_put(s.ep, s.mem, sc.kPutSrc + off, s.rkey, sc.kPutDst + off, len, &r)
                         : gdx_get(s.ep, s.mem, sc.get_dst() + off, s.rkey, sc.get_src() + off, len, &r);
                if (st != GDX_OK) return bad(api_error(put ? "gdx_put" : "gdx_get", st));
                s.reqs.push_back(r);
            }
        bool first_put = true, first_get = true;
        for (size_t i = 0; i < s.reqs.size(); ++i) {
            gdx_request_t *r = s.reqs[i];
            if (gdx_request_wait(s.ctx, r, static_cast<int>(o.timeout_s * 1000)) == GDX_ERR_TIMEOUT)
                return bad("request " + std::to_string(i) + " did not complete in time");
            if (gdx_request_test(r) != GDX_OK && res.op_status == GDX_OK) res.op_status = gdx_request_test(r);
            gdx_path_info_t p;
            if (gdx_request_path(r, &p) != GDX_OK) return bad("gdx_request_path failed");
            res.bytes_direct += p.bytes_direct;
            res.bytes_staged += p.bytes_staged;
            bool is_put = i < s.reqs.size() / 2;
            if (is_put && first_put) res.put_path = p.text, first_put = false;
            if (!is_put && first_get) res.get_path = p.text, first_get = false;
        }
        std::vector<std::vector<uint8_t>> done;
        if (boot.allgather({}, &done) != GDX_OK) return bad("allgather (done): " + last_error());
        if (res.op_status == GDX_OK) {
            if ((st = buf.read(&host)) != GDX_OK) return bad(api_error("read back", st));
            std::string e = check_bytes(host, [](const Scenario &c, size_t i) { return c.rank0_expected(i); }, sc);
            if (!e.empty()) return bad("rank 0: " + e);
        }
        std::vector<std::vector<uint8_t>> reports;
        if (boot.allgather({}, &reports) != GDX_OK) return bad("allgather (reports): " + last_error());
        res.peer_report.assign(reports[1].begin(), reports[1].end());
        return res;
    }
    // The peer: keep progressing until rank 0 is done (its exchange runs on a helper thread meanwhile).
    bool finished = false;
    gdx_status_t boot_st = GDX_OK;
    std::thread waiter([&] {
        std::vector<std::vector<uint8_t>> done;
        boot_st = boot.allgather({}, &done);
        __atomic_store_n(&finished, true, __ATOMIC_RELEASE);
    });
    progress_until(s.ctx, [&] { return __atomic_load_n(&finished, __ATOMIC_ACQUIRE); }, 1e9);
    waiter.join();
    if (boot_st != GDX_OK) return bad("allgather (done): " + last_error());
    std::string report;
    if ((st = buf.read(&host)) != GDX_OK)
        report = api_error("read back", st);
    else
        report = check_bytes(host, [](const Scenario &c, size_t i) { return c.peer_expected(i); }, sc);
    std::vector<std::vector<uint8_t>> reports;
    std::vector<uint8_t> report_bytes(report.begin(), report.end());
    if (boot.allgather(report_bytes, &reports) != GDX_OK) return bad("allgather (reports)");
    res.error = report;
    return res;
}

} // namespace gdx::test
