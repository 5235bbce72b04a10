// Internal to src/memtype: the registry behind note_ipc_import/note_ipc_close (memory_ops.h). CUDA has no pointer
// attribute for "opened with cuIpcOpenMemHandle"; the CUDA row's query consults this instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gdx::mem::ipc {

struct Range {
    uintptr_t base = 0;
    size_t size = 0;
    int device = -1;
    uint64_t buffer_id = 0; // of the mapping when it was noted; 0 = unknown
};

// The noted import containing p, unless the allocation there now has another buffer id than the one noted (the
// mapping was closed without note_ipc_close, and something else lives there).
bool find(uintptr_t p, uint64_t buffer_id, Range *out);

} // namespace gdx::mem::ipc
