// The tcp component: network devices, and opening an interface that listens only on GDX_TCP_ADDR.
#include "core/error.h"
#include "transport/config_vars.h"
#include "transport/tcp/config_vars.h"
#include "transport/tcp/tcp_internal.h"

#include <cerrno>
#include <fstream>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

namespace gdx::tp::tcp {

namespace {

struct NetDev {
    std::string name;
    bool loopback = false;
    std::vector<asio::ip::address> addrs;
};

// Network devices that are up, with their IPv4/IPv6 addresses (getifaddrs lists one entry per address).
gdx_status_t list_netdevs(std::vector<NetDev> *out) {
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return fail_errno(GDX_ERR_IO, errno, "tcp", "getifaddrs");
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
        asio::ip::address a;
        if (i->ifa_addr->sa_family == AF_INET) {
            const auto *sin = reinterpret_cast<const sockaddr_in *>(i->ifa_addr);
            a = asio::ip::address_v4(ntohl(sin->sin_addr.s_addr));
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const auto *sin6 = reinterpret_cast<const sockaddr_in6 *>(i->ifa_addr);
            asio::ip::address_v6::bytes_type b;
            std::copy_n(sin6->sin6_addr.s6_addr, 16, b.begin());
            auto v6 = asio::ip::address_v6(b);
            if (v6.is_link_local()) continue; // needs a scope id in every address blob; not supported
            a = v6;
        } else {
            continue;
        }
        auto it = std::find_if(out->begin(), out->end(), [&](const NetDev &d) { return d.name == i->ifa_name; });
        if (it == out->end()) {
            out->push_back({i->ifa_name, (i->ifa_flags & IFF_LOOPBACK) != 0, {}});
            it = out->end() - 1;
        }
        it->addrs.push_back(a);
    }
    freeifaddrs(list);
    return GDX_OK;
}

std::string pci_bus_id(const std::string &dev) {
    char buf[PATH_MAX];
    std::string link = "/sys/class/net/" + dev + "/device";
    ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) return ""; // virtual device (lo, veth, bridge)
    buf[n] = '\0';
    std::string target(buf);
    size_t slash = target.rfind('/');
    return slash == std::string::npos ? target : target.substr(slash + 1);
}

double link_bandwidth(const NetDev &d) {
    if (d.loopback) return 10e9; // memory-copy bound; measured by bench/tcp_vs_iperf.sh
    std::ifstream f("/sys/class/net/" + d.name + "/speed");
    long mbps = 0;
    if (f >> mbps && mbps > 0) return static_cast<double>(mbps) * 1e6 / 8;
    return 1.25e9; // unknown (virtual device): assume 10 Gb/s
}

bool owns(const NetDev &d, const asio::ip::address &a) {
    if (d.loopback && a.is_loopback()) return true; // lo answers all of 127.0.0.0/8
    return std::find(d.addrs.begin(), d.addrs.end(), a) != d.addrs.end();
}

gdx_status_t parse_listen_addr(const Config &cfg, asio::ip::address *out) {
    boost::system::error_code ec;
    *out = asio::ip::make_address(cfg.str(TcpVar::TCP_ADDR), ec);
    if (ec)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_TCP_ADDR=%s is not an IPv4 or IPv6 address (%s)",
                        cfg.str(TcpVar::TCP_ADDR).c_str(), ec.message().c_str());
    return GDX_OK;
}

} // namespace

// Measured on 16 cores: 8 lanes carry 4-6x one connection; on 2 cores lanes are slower than none (the helper
// threads take the cores the sender and the receiver need). bench/results/gpu-2026-11-24c.
gdx_status_t lanes_from_config(const Config &cfg, unsigned *out) {
    const std::string &v = cfg.str(TcpVar::TCP_LANES);
    if (v == "auto") {
        cpu_set_t set;
        CPU_ZERO(&set);
        int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
        *out = cpus < 4 ? 0u : std::min(8u, static_cast<unsigned>(cpus) / 2);
        return GDX_OK;
    }
    uint64_t n = 0;
    std::string why;
    if (!parse_uint(v, &n, &why) || n > wire::kMaxLanes) return GDX_ERR_INVALID_CONFIG;
    *out = static_cast<unsigned>(n);
    return GDX_OK;
}

namespace {

gdx_status_t check_config(const Config &cfg) {
    uint64_t depth = cfg.uint(TcpVar::TCP_TX_DEPTH);
    if (depth == 0 || depth > kMaxTxDepth)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_TCP_TX_DEPTH=%s: must be 1..%u",
                        cfg.text(TcpVar::TCP_TX_DEPTH).c_str(), kMaxTxDepth);
    if (cfg.duration(TransportVar::PEER_TIMEOUT).count() <= 0)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_PEER_TIMEOUT=%s: must be positive (or inf)",
                        cfg.text(TransportVar::PEER_TIMEOUT).c_str());
    if (cfg.duration(TransportVar::CONN_TIMEOUT).count() <= 0)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_CONN_TIMEOUT=%s: must be positive (or inf)",
                        cfg.text(TransportVar::CONN_TIMEOUT).c_str());
    unsigned lanes = 0;
    if (lanes_from_config(cfg, &lanes) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_TCP_LANES=%s: must be auto or 0..%u",
                        cfg.text(TcpVar::TCP_LANES).c_str(), wire::kMaxLanes);
    uint64_t threads = cfg.uint(TcpVar::TCP_LANE_THREADS);
    if (threads == 0 || threads > 64)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_TCP_LANE_THREADS=%s: must be 1..64",
                        cfg.text(TcpVar::TCP_LANE_THREADS).c_str());
    uint64_t stripe = cfg.size(TcpVar::TCP_STRIPE_MIN);
    if (stripe < 4096 || stripe > (uint64_t{1} << 30))
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_TCP_STRIPE_MIN=%s: must be 4K..1G",
                        cfg.text(TcpVar::TCP_STRIPE_MIN).c_str());
    if (cfg.size(TcpVar::TCP_SOCKBUF) > kMaxSockBuf)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "GDX_TCP_SOCKBUF=%s: at most 1G",
                        cfg.text(TcpVar::TCP_SOCKBUF).c_str());
    return GDX_OK;
}

class TcpComponent final : public Component {
  public:
    std::string_view name() const override { return "tcp"; }

    gdx_status_t query_devices(std::vector<DeviceDesc> *out) override {
        if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "query_devices: null output");
        std::vector<NetDev> devs;
        gdx_status_t st = list_netdevs(&devs);
        if (st != GDX_OK) return st;
        for (const NetDev &d : devs) out->push_back({d.name, pci_bus_id(d.name), d.loopback});
        return GDX_OK;
    }

    // Listens on GDX_TCP_ADDR when it is an address of `dev`; with a wildcard GDX_TCP_ADDR, on dev's first
    // address of that family (so the address handed to peers is one they can dial).
    gdx_status_t open(const DeviceDesc &dev, const Config &cfg, std::unique_ptr<Interface> *out) override {
        if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "open: null output");
        gdx_status_t st = check_config(cfg);
        asio::ip::address want;
        if (st == GDX_OK) st = parse_listen_addr(cfg, &want);
        std::vector<NetDev> devs;
        if (st == GDX_OK) st = list_netdevs(&devs);
        if (st != GDX_OK) return st;
        auto it = std::find_if(devs.begin(), devs.end(), [&](const NetDev &d) { return d.name == dev.name; });
        if (it == devs.end())
            return GDX_FAIL(GDX_ERR_NO_DEVICE, "tcp", "open: network device '%s' is not up or has no IP address",
                            dev.name.c_str());
        asio::ip::address listen_ip = want;
        if (want.is_unspecified()) {
            auto a = std::find_if(it->addrs.begin(), it->addrs.end(),
                                  [&](const asio::ip::address &x) { return x.is_v4() == want.is_v4(); });
            if (a == it->addrs.end())
                return GDX_FAIL(GDX_ERR_NO_DEVICE, "tcp", "open: device %s has no %s address for GDX_TCP_ADDR=%s",
                                dev.name.c_str(), want.is_v4() ? "IPv4" : "IPv6", want.to_string().c_str());
            listen_ip = *a;
        } else if (!owns(*it, want)) {
            // Ordinary when a caller (UCX) tries every listed device: the reason at debug, not an error line.
            return ::gdx::fail(GDX_ERR_NO_DEVICE, log::Level::Debug, "tcp",
                            "open: GDX_TCP_ADDR=%s is not an address of device %s; tcp listens only on GDX_TCP_ADDR",
                            want.to_string().c_str(), dev.name.c_str());
        }
        std::unique_ptr<TcpIface> iface;
        try {
            iface = std::make_unique<TcpIface>(dev.name, cfg);
        } catch (const std::exception &e) {
            return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "open %s: %s", dev.name.c_str(), e.what());
        }
        st = iface->init(listen_ip, it->loopback, link_bandwidth(*it));
        if (st != GDX_OK) return st;
        *out = std::move(iface);
        return GDX_OK;
    }
};

} // namespace

gdx_status_t open_iface(const Config &cfg, std::unique_ptr<Interface> *out) {
    asio::ip::address want;
    gdx_status_t st = parse_listen_addr(cfg, &want);
    std::vector<NetDev> devs;
    if (st == GDX_OK) st = list_netdevs(&devs);
    if (st != GDX_OK) return st;
    const NetDev *pick = nullptr;
    for (const NetDev &d : devs) {
        if (want.is_unspecified() ? (!d.loopback && pick == nullptr) : owns(d, want)) pick = &d;
        if (pick != nullptr && !want.is_unspecified()) break;
    }
    if (pick == nullptr && want.is_unspecified())
        for (const NetDev &d : devs)
            if (d.loopback) pick = &d;
    if (pick == nullptr)
        return GDX_FAIL(GDX_ERR_NO_DEVICE, "tcp", "GDX_TCP_ADDR=%s is not an address of any network device that is up",
                        want.to_string().c_str());
    return tcp_component()->open({pick->name, pci_bus_id(pick->name), pick->loopback}, cfg, out);
}

} // namespace gdx::tp::tcp

namespace gdx::tp {
Component *tcp_component() {
    static tcp::TcpComponent component;
    return &component;
}
} // namespace gdx::tp
