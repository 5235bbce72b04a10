// memtype_ipc_peer: the second process of the IPC-imported tests (exec'd by test_memtype_gpu: CUDA does not
// survive fork). Reads a CUipcMemHandle as hex from stdin, opens it, notes the import, and checks what the detector
// says before and after the close. With --via-ops the ops table opens it (ipc_import, which notes the import
// itself) and closes it (ipc_close), as the cuda_ipc transport does. Prints one line per check; exits 0 when all
// passed, 1 otherwise, 2 when it could not run.
//   memtype_ipc_peer --size <bytes> --device <ordinal> [--via-ops]   (stdin: 128 hex digits)
#include "core/error.h"
#include "memtype/memtype.h"
#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

using namespace gdx;
using namespace gdx::mem;

namespace {

int failures = 0;

void check(bool ok, const std::string &what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
    if (!ok) ++failures;
}

} // namespace

int main(int argc, char **argv) {
    size_t size = 0;
    int device = 0;
    bool via_ops = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--via-ops") == 0) via_ops = true;
        if (i + 1 < argc && std::strcmp(argv[i], "--size") == 0) size = std::strtoull(argv[i + 1], nullptr, 10);
        if (i + 1 < argc && std::strcmp(argv[i], "--device") == 0) device = std::atoi(argv[i + 1]);
    }
#if !GDX_HAVE_CUDA_H
    (void)size;
    (void)device;
    (void)via_ops;
    std::printf("cannot run: built without cuda.h\n");
    return 2;
#else
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        std::printf("cannot run: %s\n", cuda::why_unavailable().c_str());
        return 2;
    }
    std::string hex;
    std::getline(std::cin, hex);
    CUipcMemHandle handle{};
    if (hex.size() != 2 * sizeof(handle.reserved) || size == 0) {
        std::printf("cannot run: expected %zu hex digits on stdin and --size\n", 2 * sizeof(handle.reserved));
        return 2;
    }
    for (size_t i = 0; i < sizeof(handle.reserved); ++i)
        handle.reserved[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    CUresult r = cuda::bind_device(device);
    CUdeviceptr d = 0;
    IpcMapping imported; // --via-ops: the ops table's mapping
    if (via_ops && r == CUDA_SUCCESS) {
        IpcHandle ih;
        ih.kind = IpcKind::Legacy;
        std::memcpy(ih.bytes, handle.reserved, sizeof(ih.bytes));
        if (ops(MemKind::Cuda).ipc_import(ih, size, -1, nullptr, device, &imported) != GDX_OK) {
            std::printf("cannot run: ipc_import: %s\n", last_error().c_str());
            return 2;
        }
        d = reinterpret_cast<CUdeviceptr>(imported.ptr);
    } else if (r == CUDA_SUCCESS) {
        r = api->cuIpcOpenMemHandle(&d, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    }
    if (r != CUDA_SUCCESS) {
        std::printf("cannot run: cuIpcOpenMemHandle: %s\n", cuda::error_text(r).c_str());
        return 2;
    }
    char *p = reinterpret_cast<char *>(d);
    CUdeviceptr base = 0;
    size_t mapped = 0;
    r = api->cuMemGetAddressRange(&base, &mapped, d);
    check(r == CUDA_SUCCESS && mapped >= size, "cuMemGetAddressRange of the mapping");
    if (r != CUDA_SUCCESS || via_ops) { // the ops table noted what the exporter's key says: base and size
        base = d;
        mapped = size;
    }

    // A lookup before the note caches plain device memory; note_ipc_import must drop that.
    DetectorOptions events;
    events.validation = CacheValidation::Events;
    Detector det, ev(events), fresh([] {
        DetectorOptions o;
        o.cache = false;
        return o;
    }());
    MemInfo info;
    if (!via_ops) {
        check(det.detect_one(p, &info) == GDX_OK && !is_host_type(info.type) && info.type != MemType::CudaIpcImported,
              "before the note (GPU memory, not yet known as imported): " + describe(info));
        note_ipc_import(reinterpret_cast<void *>(base), mapped, device);
    }

    for (Detector *x : {&det, &ev, &det}) { // the second pass over det is a cache hit
        for (size_t off : {size_t(0), size / 2, size - 1}) {
            gdx_status_t st = x->detect_one(p + off, &info);
            check(st == GDX_OK && info.type == MemType::CudaIpcImported && info.kind == MemKind::Cuda &&
                      info.device == device && !info.dmabuf_allowed && !info.host_accessible && info.base == base &&
                      info.size == mapped,
                  "+" + std::to_string(off) + ": " + describe(info));
        }
    }
    check(det.cache()->stats().hits >= 3, "repeated lookups answered by the cache");
    std::vector<MemSegment> segs;
    check(det.detect(p, size, &segs) == GDX_OK && segs.size() == 1 && segs[0].length == size &&
              segs[0].info.type == MemType::CudaIpcImported,
          "detect over the whole buffer: one cuda-ipc-imported segment");

    std::vector<unsigned char> host(size, 0);
    check(ops(MemKind::Cuda).copy(host.data(), p, size, device) == GDX_OK, "copy out of the imported mapping");
    size_t bad = 0;
    for (unsigned char c : host)
        bad += c != 0x5A;
    check(bad == 0, "the exporter's 0x5A pattern arrived (" + std::to_string(bad) + " bytes differ)");
    int fd = -1;
    uint64_t off = 0;
    check(ops(MemKind::Cuda).dmabuf_fd(p, 4096, &fd, &off) == GDX_ERR_UNSUPPORTED,
          "no dma-buf export of imported memory");

    // The close path: invalidate, close, note (README: Events-mode protocol); ipc_close does all three.
    if (via_ops) {
        check(ops(MemKind::Cuda).ipc_close(&imported) == GDX_OK && imported.ptr == nullptr, "ipc_close");
    } else {
        invalidate(reinterpret_cast<void *>(base), mapped);
        r = api->cuIpcCloseMemHandle(d);
        check(r == CUDA_SUCCESS, "cuIpcCloseMemHandle");
        note_ipc_close(reinterpret_cast<void *>(base));
    }
    MemInfo truth;
    for (Detector *x : {&det, &ev}) {
        gdx_status_t st = x->detect_one(p, &info);
        check(st == GDX_OK && fresh.detect_one(p, &truth) == GDX_OK && info.type == truth.type &&
                  info.type != MemType::CudaIpcImported,
              "after the close: " + describe(info) + " (driver: " + describe(truth) + ")");
    }
    std::fflush(stdout);
    return failures == 0 ? 0 : 1;
#endif
}
