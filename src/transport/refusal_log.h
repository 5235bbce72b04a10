// The level at which a transport logs a request it refused as a target (bad key, range or rights; memory gone
// since registration) or one that failed at the peer (issue 16, class 5). The first of a kind per peer is logged
// at WARN with its status and cause; the same kind again is logged at debug. The request's own status (and at the
// initiator gdx_request_error) still carries every one to the caller, and a retry loop of a bad request must not
// write a line per attempt: it wrote 1.3 M lines in 3 s. One helper for every transport that serves a peer's
// requests on the CPU (tcp, shm), so they say it the same way.
#pragma once

#include "core/log.h"
#include "gdx/status.h"

#include <cctype>
#include <string>
#include <string_view>

namespace gdx::tp {

// `peer` names the peer as the transport knows it (tcp: its address and port; shm: its pid); `cause` is the
// reason text of the line, if any. A kind is (transport, peer, status, cause without its numbers): another cause
// from the same peer is news ("opens no registration" after "outside registration"), the same cause with another
// key, address or length is not, so a loop over addresses writes one WARN, not one per address.
inline log::Level refusal_level(std::string_view transport, std::string_view peer, gdx_status_t st,
                                std::string_view cause = {}) {
    std::string key = "refused:";
    key.append(transport).append(":").append(peer).append(":").append(std::to_string(static_cast<int>(st))).append(":");
    for (size_t i = 0; i < cause.size(); ++i) {
        if (cause[i] == '0' && i + 1 < cause.size() && (cause[i + 1] == 'x' || cause[i + 1] == 'X')) {
            for (i += 2; i < cause.size() && std::isxdigit(static_cast<unsigned char>(cause[i])); ++i) {
            }
            --i;
        } else if (!std::isdigit(static_cast<unsigned char>(cause[i]))) {
            key += cause[i];
        }
    }
    return log::first_time(key) ? log::Level::Warn : log::Level::Debug;
}

} // namespace gdx::tp
