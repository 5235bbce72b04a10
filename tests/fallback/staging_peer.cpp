// Rank 1 of the two-process staging tests (staging_scenario.h): exec'd by the test (never forked: CUDA does not
// survive fork). Usage: staging_peer <port> <kind> <size> <pieces> [NAME=VALUE ...]   (GDX_* settings)
// Exit status 0 when every byte of its buffer is right, 1 otherwise (the reason on stderr), 2 for bad usage.
#include "staging_scenario.h"
#include "transport/bootstrap.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s <port> <kind> <size> <pieces> [GDX_NAME=VALUE ...]\n", argv[0]);
        return 2;
    }
    gdx::test::RankOptions o;
    o.rank = 1;
    o.kind = argv[2];
    o.sc.size = std::strtoull(argv[3], nullptr, 0);
    o.sc.pieces = static_cast<unsigned>(std::strtoul(argv[4], nullptr, 0));
    for (int i = 5; i < argc; ++i) {
        std::string kv = argv[i];
        size_t eq = kv.find('=');
        if (eq == std::string::npos) return 2;
        o.config.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    gdx::tp::Bootstrap::Options bo;
    bo.port = static_cast<uint16_t>(std::atoi(argv[1]));
    bo.rank = 1;
    bo.size = 2;
    bo.timeout = std::chrono::seconds(600);
    std::unique_ptr<gdx::tp::Bootstrap> boot;
    if (gdx::tp::Bootstrap::join(bo, &boot) != GDX_OK) {
        std::fprintf(stderr, "staging_peer: cannot join the bootstrap on port %s\n", argv[1]);
        return 1;
    }
    gdx::test::RankResult r = gdx::test::run_rank(o, boot.get());
    if (!r.error.empty()) {
        std::fprintf(stderr, "staging_peer (%s, %zu bytes): %s\n", o.kind.c_str(), o.sc.size, r.error.c_str());
        return 1;
    }
    return 0;
}
