// CopyService: every copy the staging engine makes into or out of a bounce slot or a control message, through the
// memory ops table of the user memory's kind (mem::ops). It owns what those copies share: copy fault injection
// (GDX_FAULT_COPY_EVERY), the pinned scratch buffer per GPU of the small-message path (made on first use), and the
// guarded copy of host memory a peer's message named. Failed copies are counted (Stats::copy_failures); the ops
// row logs what failed.
//
// Used by the initiator side (StagingPipeline: a put's source into a slot, a get's landing slot out, the small
// path's message) and the target side (StagingTarget: copy-outs, stage-outs, small puts and gets).
#pragma once

#include "fallback/fault_injector.h"
#include "fallback/reporter.h"
#include "memtype/memory_ops.h"

#include <map>

namespace gdx::fb {

class CopyService {
  public:
    // `scratch_size`: the largest small-path message (copies up to it between GPU and pageable memory go through a
    // pinned scratch buffer; 0 = none).
    CopyService(const FaultParams &faults, size_t scratch_size, Reporter &report)
        : faults_(faults), scratch_size_(scratch_size), report_(report) {}
    ~CopyService();
    CopyService(const CopyService &) = delete;
    CopyService &operator=(const CopyService &) = delete;

    // A staging copy (into or out of a bounce slot) with the ops row of `kind` (fault injection applies).
    // GDX_OK: done; GDX_INPROGRESS: poll copy_test(); errors are logged and counted. `peer_named`: one side is
    // user memory a peer's message named (the target side): host memory is then copied with mem::guarded_copy,
    // so memory unmapped after registration fails that request (GDX_ERR_INVALID_ADDR), not the process.
    gdx_status_t copy_async(void *dst, const void *src, size_t len, mem::MemKind kind, int device, mem::CopyDir dir,
                            mem::CopyHandle *h, bool peer_named = false);
    gdx_status_t copy_test(mem::CopyHandle *h);
    // Synchronous copy for the small-message path. `dir` says which side is the row's memory: between GPU memory
    // and pageable memory (a message being built, the transport's ring) it goes through a pinned scratch buffer of
    // the device, because the driver stages pageable copies itself, several microseconds slower per copy.
    // `peer_named`: host memory a peer's request named is copied with a guarded copy (a fault fails the request).
    // `mem` describes the GPU side's memory (its row, device, and whether it is device-resident: ops.copy_pinned).
    gdx_status_t copy_sync(void *dst, const void *src, size_t len, const mem::MemInfo &mem, mem::CopyDir dir,
                           bool peer_named = false);

  private:
    gdx_status_t guarded_host_copy(void *dst, const void *src, size_t len);

    CopyFaults faults_;
    size_t scratch_size_;
    Reporter &report_;
    std::map<int, void *> scratch_; // pinned, scratch_size_ bytes, by device (made on first use)
};

} // namespace gdx::fb
