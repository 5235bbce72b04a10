// The reason text of a failed request (Request::error, gdx_request_error). Statuses of asynchronous failures come
// from many places — the peer's DONE, a transport completion, the silence clock, a copy — and most carry no text
// across the wire; this names the operation, how far it got, and what the status means for it, so an error status
// never reaches the caller without a reason (issue 16, class 5).
#include "fallback/staging_pipeline.h"

#include <cinttypes>
#include <cstdio>

namespace gdx::fb {

namespace {

const char *meaning(gdx_status_t st, bool is_put) {
    switch (st) {
    case GDX_ERR_TIMEOUT:
        return "the peer did not answer while this request was outstanding: its host or link was down for "
               "GDX_PEER_TIMEOUT, or it was silent for GDX_PEER_SILENCE_TIMEOUT (hung, stopped, or not calling "
               "gdx_progress)";
    case GDX_ERR_CONNECTION_RESET:
        return "the peer went away or destroyed its endpoint before the request completed";
    case GDX_ERR_ACCESS_DENIED:
        return is_put ? "the peer refused it: no live registration there covers the range with remote-write rights"
                      : "the peer refused it: no live registration there covers the range with remote-read rights";
    case GDX_ERR_INVALID_ADDR:
        return "registered memory is no longer accessible (unmapped or protected after registration)";
    case GDX_ERR_IO: return "a staging copy or a system call failed (the log names it)";
    case GDX_ERR_CANCELED: return "canceled: the endpoint or its context was closed with the request outstanding";
    case GDX_ERR_PROTOCOL: return "the peer sent a malformed or unexpected message about it";
    case GDX_ERR_NO_MEMORY: return "out of memory while serving it";
    case GDX_ERR_DRIVER: return "the CUDA driver or the verbs provider refused a copy or transfer";
    case GDX_ERR_UNSUPPORTED:
        return "the peer speaks another version of the staging protocol, or cannot serve this staged transfer";
    default: return "";
    }
}

} // namespace

std::string StagingPipeline::describe_failure(const Op &op, gdx_status_t st) const {
    char buf[512];
    const char *m = meaning(st, op.is_put);
    std::snprintf(buf, sizeof(buf), "%s of %" PRIu64 " bytes (%" PRIu64 " direct, %" PRIu64 " staged so far) failed: %s%s%s",
                  op.is_put ? "put" : "get", op.len, op.req->path.bytes_direct, op.req->path.bytes_staged,
                  gdx_status_string(st), *m ? ": " : "", m);
    std::string text = buf;
    // The peer was given up by staging: say what happened to it (silent and for what, or its BYE).
    if (op.peer->dead() && op.peer->failure() == st) text += " (staging: " + op.peer->dead_why() + ")";
    return text;
}

} // namespace gdx::fb
