// gdx_status_string: the one table of human-readable status names.
#include "gdx/status.h"

extern "C" const char *gdx_status_string(gdx_status_t status) {
    switch (status) {
    case GDX_OK: return "success";
    case GDX_INPROGRESS: return "operation in progress";
    case GDX_ERR_NO_RESOURCE: return "no resources available (retry after progress)";
    case GDX_ERR_INVALID_PARAM: return "invalid parameter";
    case GDX_ERR_NO_MEMORY: return "out of memory";
    case GDX_ERR_UNSUPPORTED: return "unsupported operation";
    case GDX_ERR_NOT_FOUND: return "not found";
    case GDX_ERR_UNREACHABLE: return "destination is unreachable";
    case GDX_ERR_IO: return "input/output error";
    case GDX_ERR_TIMEOUT: return "timed out";
    case GDX_ERR_CONNECTION_RESET: return "connection reset by peer";
    case GDX_ERR_CANCELED: return "operation canceled";
    case GDX_ERR_ACCESS_DENIED: return "remote access denied";
    case GDX_ERR_PROTOCOL: return "protocol error (malformed or unexpected message)";
    case GDX_ERR_NO_DEVICE: return "no such device";
    case GDX_ERR_BUSY: return "resource busy";
    case GDX_ERR_INVALID_CONFIG: return "invalid configuration value";
    case GDX_ERR_DRIVER: return "driver error";
    case GDX_ERR_INVALID_ADDR: return "invalid address";
    case GDX_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
