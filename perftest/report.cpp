#include "report.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace gdx::perf {

namespace {

// Numbers in JSON: finite values only; anything else (which would be a bug) is written as null.
std::string jnum(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    return buf;
}

std::string jstr(const std::string &s) { return "\"" + json_escape(s) + "\""; }

bool is_gpu_mem(const MemSpec &m) { return m.kind != MemKindOpt::Host && m.kind != MemKindOpt::HostPinned; }

} // namespace

std::string json_escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\t': o += "\\t"; break;
        case '\r': o += "\\r"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                o += buf;
            } else {
                o += c;
            }
        }
    }
    return o;
}

std::string PathUsed::text() const {
    if (!detail.empty()) return detail;
    if (kind == "direct") return "direct(" + via + ")";
    char pct[16];
    std::snprintf(pct, sizeof(pct), "%.0f%%", staged_share * 100);
    std::string detail = "frag=" + size_text(frag_size) + ",depth=" + std::to_string(depth) + "," + pct;
    if (kind == "staged") return "staged(" + detail + ")";
    if (kind == "mixed") return "mixed(" + via + "+staged " + detail + ")";
    return kind;
}

// ---- sanity limits ------------------------------------------------------------------------------------

const std::vector<Limit> &limit_table() {
    static const std::vector<Limit> table = {
        {"tcp-loopback", 100, "TCP through one kernel: memory copies bound it far below 100 GB/s"},
        {"tcp-network", 100, "TCP across a NIC: the fastest Ethernet port today is 800 Gb/s"},
        {"shm", 200, "one copy through shared host memory: bounded by DRAM bandwidth"},
        {"pcie", 64, "a PCIe Gen5 x16 link, one direction (GPU staging copies, NIC DMA to GPU memory)"},
        {"rc", 100, "one RDMA port: InfiniBand XDR / 800 Gb/s"},
        {"nvlink", 900, "NVLink 4 aggregate per GPU (H100/H200)"},
        {"gpu-local", 8000, "copies within one GPU: HBM3e bandwidth"},
    };
    return table;
}

const Limit &limit_for(const std::string &transport, const PathUsed &path, const MemSpec &local,
                       const MemSpec &remote, bool peer_is_local_host) {
    auto find = [](const char *name) -> const Limit & {
        for (const Limit &l : limit_table())
            if (std::strcmp(l.name, name) == 0) return l;
        return limit_table().back();
    };
    bool gpu = is_gpu_mem(local) || is_gpu_mem(remote);
    if (gpu && path.staged_share > 0) return find("pcie");
    if (transport == "cuda_ipc") {
        if (is_gpu_mem(local) && is_gpu_mem(remote)) return find(local.gpu == remote.gpu ? "gpu-local" : "nvlink");
        return find("pcie");
    }
    if (gpu) return find("pcie"); // any other transport touching GPU memory crosses the GPU's PCIe link
    if (transport == "shm") return find("shm");
    if (transport == "rc") return find("rc");
    if (transport == "tcp") return find(peer_is_local_host ? "tcp-loopback" : "tcp-network");
    return find("gpu-local");
}

bool sanity_check(Row *row, const Limit &limit) {
    row->limit_name = limit.name;
    row->limit_GBps = limit.GBps;
    if (!(row->bw_GBps > limit.GBps)) return false;
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "%s %s: %.2f GB/s exceeds the %.0f GB/s limit of %s (%s): this figure cannot be real; "
                  "suspect a completion that was not waited for",
                  row->test.c_str(), size_text(row->size).c_str(), row->bw_GBps, limit.GBps, limit.name, limit.why);
    row->warning = buf;
    return true;
}

// ---- output ----------------------------------------------------------------------------------------------

void Reporter::header(const std::string &transport, const std::string &device, const MemSpec &local,
                      const MemSpec &remote) {
    if (opt_.csv) {
        if (!csv_header_done_) {
            std::fprintf(out_, "test,size,iterations,warmup,window,local_mem,remote_mem,transport,device,path,"
                               "staged_share,bw_GBps,msg_rate_Mps,lat_avg_us,lat_min_us,lat_p50_us,lat_p99_us,"
                               "lat_max_us,validated,warning\n");
            csv_header_done_ = true;
        }
        return;
    }
    std::fprintf(out_, "# %s on %s: %s -> %s%s\n", transport.c_str(), device.c_str(), local.text().c_str(),
                 remote.text().c_str(), opt_.validate ? " (validated)" : "");
    std::fprintf(out_, "%-8s %8s %7s %6s %10s %9s %9s %9s %9s  %s\n", "#test", "size", "iters", "window", "BW GB/s",
                 "Mmsg/s", "lat avg", "lat p50", "lat p99", "path");
    std::fflush(out_);
}

void Reporter::row(const Row &r) {
    rows_.push_back(r);
    if (opt_.csv) {
        std::string warn = r.warning;
        for (char &c : warn)
            if (c == '"') c = '\'';
        auto lat = [&](double v) { return r.has_latency ? jnum(v) : std::string(); };
        std::fprintf(out_, "%s,%llu,%llu,%llu,%llu,%s,%s,%s,%s,\"%s\",%s,%s,%s,%s,%s,%s,%s,%s,%s,\"%s\"\n",
                     r.test.c_str(), static_cast<unsigned long long>(r.size),
                     static_cast<unsigned long long>(r.iterations), static_cast<unsigned long long>(r.warmup),
                     static_cast<unsigned long long>(r.window), r.local_mem.c_str(), r.remote_mem.c_str(),
                     r.transport.c_str(), r.device.c_str(), r.path.text().c_str(), jnum(r.path.staged_share).c_str(),
                     jnum(r.bw_GBps).c_str(), jnum(r.msg_rate_Mps).c_str(), lat(r.lat_avg_us).c_str(),
                     lat(r.lat_min_us).c_str(), lat(r.lat_p50_us).c_str(), lat(r.lat_p99_us).c_str(),
                     lat(r.lat_max_us).c_str(), r.validated ? "yes" : "no", warn.c_str());
    } else {
        char lat[3][16] = {"-", "-", "-"};
        if (r.has_latency) {
            std::snprintf(lat[0], sizeof(lat[0]), "%.2f", r.lat_avg_us);
            std::snprintf(lat[1], sizeof(lat[1]), "%.2f", r.lat_p50_us);
            std::snprintf(lat[2], sizeof(lat[2]), "%.2f", r.lat_p99_us);
        }
        std::fprintf(out_, "%-8s %8s %7llu %6llu %10.3f %9.4g %9s %9s %9s  %s%s%s\n", r.test.c_str(),
                     size_text(r.size).c_str(), static_cast<unsigned long long>(r.iterations),
                     static_cast<unsigned long long>(r.window), r.bw_GBps, r.msg_rate_Mps, lat[0], lat[1], lat[2],
                     r.path.text().c_str(), r.validated ? " valid" : "", r.warning.empty() ? "" : " WARNING");
    }
    std::fflush(out_);
    if (!r.warning.empty()) std::fprintf(stderr, "gdx_perftest: warning: %s\n", r.warning.c_str());
}

bool Reporter::write_json(const std::string &path, const std::string &command, std::string *why) const {
    FILE *f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        *why = "cannot write JSON results to '" + path + "': " + std::strerror(errno);
        return false;
    }
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
    char date[64] = {};
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);

    std::string s = "{\n  \"tool\": \"gdx_perftest\",\n  \"format\": 1,\n";
    s += "  \"host\": " + jstr(host) + ",\n  \"date\": " + jstr(date) + ",\n  \"command\": " + jstr(command) + ",\n";
    s += "  \"validate\": " + std::string(opt_.validate ? "true" : "false") + ",\n";
    s += "  \"path_mode\": " + jstr(path_mode_name(opt_.path)) + ",\n  \"notes\": [";
    for (size_t i = 0; i < notes_.size(); ++i) s += (i ? ", " : "") + jstr(notes_[i]);
    s += "],\n  \"limits_GBps\": {";
    for (size_t i = 0; i < limit_table().size(); ++i)
        s += (i ? ", " : "") + jstr(limit_table()[i].name) + ": " + jnum(limit_table()[i].GBps);
    s += "},\n  \"rows\": [";
    for (size_t i = 0; i < rows_.size(); ++i) {
        const Row &r = rows_[i];
        s += i ? ",\n    {" : "\n    {";
        s += "\"test\": " + jstr(r.test) + ", \"size\": " + std::to_string(r.size);
        s += ", \"iterations\": " + std::to_string(r.iterations) + ", \"warmup\": " + std::to_string(r.warmup);
        s += ", \"window\": " + std::to_string(r.window);
        s += ", \"local_mem\": " + jstr(r.local_mem) + ", \"remote_mem\": " + jstr(r.remote_mem);
        s += ", \"transport\": " + jstr(r.transport) + ", \"device\": " + jstr(r.device);
        s += ", \"path\": " + jstr(r.path.text()) + ", \"path_kind\": " + jstr(r.path.kind);
        s += ", \"path_via\": " + jstr(r.path.via) + ", \"frag_size\": " + std::to_string(r.path.frag_size);
        s += ", \"staging_depth\": " + std::to_string(r.path.depth);
        s += ", \"staged_share\": " + jnum(r.path.staged_share);
        s += ", \"seconds\": " + jnum(r.seconds) + ", \"bw_GBps\": " + jnum(r.bw_GBps);
        s += ", \"msg_rate_Mps\": " + jnum(r.msg_rate_Mps);
        if (r.has_latency) {
            s += ", \"lat_us\": {\"avg\": " + jnum(r.lat_avg_us) + ", \"min\": " + jnum(r.lat_min_us) +
                 ", \"p50\": " + jnum(r.lat_p50_us) + ", \"p99\": " + jnum(r.lat_p99_us) +
                 ", \"max\": " + jnum(r.lat_max_us) + "}";
        } else {
            s += ", \"lat_us\": null";
        }
        s += ", \"validated\": " + std::string(r.validated ? "true" : "false");
        s += ", \"limit\": " + jstr(r.limit_name) + ", \"limit_GBps\": " + jnum(r.limit_GBps);
        s += ", \"warning\": " + (r.warning.empty() ? std::string("null") : jstr(r.warning)) + "}";
    }
    s += "\n  ]\n}\n";
    bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) *why = "cannot write JSON results to '" + path + "': " + std::strerror(errno);
    return ok;
}

// ---- progress --------------------------------------------------------------------------------------------

Progress::Progress() : tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::update(const std::string &test, const std::string &mems, uint64_t size, size_t index,
                      size_t count) {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[K[%s %s] %s (%zu/%zu sizes)", test.c_str(), mems.c_str(), size_text(size).c_str(),
                 index + 1, count);
    std::fflush(stderr);
    shown_ = true;
}

void Progress::clear() {
    if (!tty_ || !shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
}

} // namespace gdx::perf
