// Results: one Row per (test, size, memory pair), printed as a table (or CSV) as it is measured and written as
// JSON at the end; the sanity limits per path (a figure above its link's limit is flagged, never silently
// printed — ucx-py#1088's 900 GB/s); and the progress line for long sweeps.
#pragma once

#include "options.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gdx::perf {

// Which path carried the bytes, as the data path reported it for the row's requests.
struct PathUsed {
    std::string kind = "unknown";  // "direct", "staged", "mixed"
    std::string via;               // direct: "host", "dma-buf", "peer-memory", "cuda-ipc", ...
    uint64_t frag_size = 0;        // staged: fragment size
    unsigned depth = 0;            // staged: fragments in flight
    double staged_share = 0;       // fraction of bytes staged, 0..1
    std::string detail;            // gdx's own words (gdx_request_path's text), tallied over the row's requests
    std::string transport;         // the transport(s) the requests took ("shm"), from gdx_request_path
    std::string text() const;      // detail, else "direct(dma-buf)", "staged(frag=4M,depth=4,100%)"
};

struct Row {
    std::string test;
    uint64_t size = 0;
    uint64_t iterations = 0, warmup = 0, window = 0;
    std::string local_mem, remote_mem, transport, device;
    PathUsed path;
    double seconds = 0;             // measured time (warm-up excluded)
    double bw_GBps = 0;             // 1e9 bytes per second (as perftest and nccl-tests print)
    double msg_rate_Mps = 0;        // operations (bw tests) or round trips (lat tests) per second, in millions
    bool has_latency = false;       // lat tests: one-way latency statistics (half round trip), microseconds
    double lat_avg_us = 0, lat_min_us = 0, lat_p50_us = 0, lat_p99_us = 0, lat_max_us = 0;
    bool validated = false;         // --validate checked every iteration of this row
    std::string warning;            // sanity warning ("" when none)
    std::string limit_name;         // the limit applied, e.g. "tcp-loopback"
    double limit_GBps = 0;
};

// ---- sanity limits ------------------------------------------------------------------------------------

struct Limit {
    const char *name;        // "tcp-loopback", "pcie", "nvlink", ...
    double GBps;             // no real run on this path can exceed it
    const char *why;         // what bounds it
};
const std::vector<Limit> &limit_table();
// The limit for a row: chosen from the transport, the path used, the memory kinds and the GPUs on each side.
const Limit &limit_for(const std::string &transport, const PathUsed &path, const MemSpec &local,
                       const MemSpec &remote, bool peer_is_local_host);
// Fills row->warning when the bandwidth exceeds the limit (and row->limit_*). Returns true when flagged.
bool sanity_check(Row *row, const Limit &limit);

// ---- output ----------------------------------------------------------------------------------------------

class Reporter {
  public:
    Reporter(const Options &opt, FILE *out) : opt_(opt), out_(out) {}
    void header(const std::string &transport, const std::string &device, const MemSpec &local,
                const MemSpec &remote);
    void row(const Row &r);
    const std::vector<Row> &rows() const { return rows_; }
    // Context lines (decisions, notes) kept for the JSON file.
    void add_note(const std::string &line) { notes_.push_back(line); }
    // Writes every row as JSON. Returns false and *why when the file cannot be written.
    bool write_json(const std::string &path, const std::string &command, std::string *why) const;

  private:
    const Options &opt_;
    FILE *out_;
    std::vector<Row> rows_;
    std::vector<std::string> notes_;
    bool csv_header_done_ = false;
};

std::string json_escape(const std::string &s);

// ---- progress --------------------------------------------------------------------------------------------

// "\r[put_bw host->host] 64K  (12/22 sizes)" on stderr, only when stderr is a terminal.
class Progress {
  public:
    Progress();
    void update(const std::string &test, const std::string &mems, uint64_t size, size_t index, size_t count);
    void clear();

  private:
    bool tty_;
    bool shown_ = false;
};

} // namespace gdx::perf
