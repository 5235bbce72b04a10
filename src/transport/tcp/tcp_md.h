// The tcp memory domain: the software-key domain of the transport base (soft_key_md.h). The kernel's socket
// calls read and write host memory in place; GPU memory is staged by the fallback layer. Remote keys are enforced
// by the target (RkeyTable).
#pragma once

#include "transport/soft_key_md.h"

namespace gdx::tp::tcp {

class TcpMd final : public SoftKeyMd {
  public:
    TcpMd()
        : SoftKeyMd("tcp", wire::TransportId::Tcp, "host memory: the kernel's socket calls read and write it in place",
                    "stage it through host buffers") {}
};

} // namespace gdx::tp::tcp
