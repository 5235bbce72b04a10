// The software-enforced remote-key table of a transport whose target side is a CPU (tcp, shm): what a
// peer may touch through a key, and nothing else.
//
// A key is the id of one registration: 64 random bits from getrandom(2), so a peer cannot guess another
// registration's key. The target looks the id up in THIS table and checks the requested range and rights
// against its own record; the base and length inside a packed key are never trusted. Deregistration
// (revoke) removes the record, after which the id opens nothing.
//
// Thread safety: every member takes the table's lock. A Pin holds it shared while bytes move into or out of a
// checked range, so a registration revoked from another thread cannot disappear under a copy in progress:
// revoke() takes it exclusively and waits for the Pins (each covers a single non-blocking socket call or one
// bounded copy, so the wait is short). Pins are shared so the helper threads of tcp's lanes can write into
// registered memory at the same time.
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace gdx::tp {

// 64 unpredictable bits from getrandom(2). Never falls back to a weaker source: fails with GDX_ERR_IO.
gdx_status_t secure_random_u64(uint64_t *out);

class RkeyTable {
  public:
    struct Record {
        uintptr_t base = 0;
        size_t length = 0;
        unsigned access = 0; // tp::Access bits granted to peers
    };

    // Records [base, base+length) with `access` and returns a fresh non-zero id unused by any live record.
    gdx_status_t add(uintptr_t base, size_t length, unsigned access, uint64_t *key_id);
    // Forgets the key; later checks of it fail. Unknown ids are ignored.
    void revoke(uint64_t key_id);
    size_t size() const;

    class Pin {
      public:
        explicit Pin(std::shared_mutex &m) : lock_(m) {}

      private:
        std::shared_lock<std::shared_mutex> lock_;
    };
    Pin pin() const { return Pin(mutex_); }

    // With the pin held: GDX_OK and *ptr = the local address of `addr` when [addr, addr+len) lies inside the
    // record of `key_id` and the record grants every bit of `need`; otherwise GDX_ERR_ACCESS_DENIED and *why
    // says which check failed (unknown key, range, rights).
    gdx_status_t check(const Pin &pin, uint64_t key_id, uint64_t addr, uint64_t len, unsigned need, uint8_t **ptr,
                       std::string *why) const;

  private:
    mutable std::shared_mutex mutex_;
    std::unordered_map<uint64_t, Record> records_;
};

} // namespace gdx::tp
