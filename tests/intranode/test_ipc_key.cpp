// The cuda_ipc remote key codec (CPU): every field survives encode/decode, the export epoch included, and the
// validation refuses what a peer must never get away with.
#include "transport/cuda_ipc/ipc_key.h"
#include "transport/transport.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gdx::test {
namespace {

using tp::cuda_ipc::decode_key;
using tp::cuda_ipc::encode_key;
using tp::cuda_ipc::ExportKind;
using tp::cuda_ipc::kKeySize;
using tp::cuda_ipc::PackedKey;

PackedKey sample() {
    PackedKey k;
    k.kind = ExportKind::Legacy;
    k.access = tp::kAccessRemoteRead | tp::kAccessRemoteWrite;
    k.exporter_nonce = 0x1122334455667788ull;
    k.exporter_pid = 4242;
    k.exporter_device = 1;
    k.buffer_id = 929;
    k.alloc_base = 0x7f0000000000ull;
    k.alloc_size = 64u << 20;
    k.reg_base = k.alloc_base + 4096;
    k.reg_len = 1u << 20;
    k.token = 0xdeadbeefcafef00dull;
    k.pool_id = 0;
    k.epoch = 7;
    for (size_t i = 0; i < sizeof(k.handle); ++i) k.handle[i] = static_cast<uint8_t>(i * 3 + 1);
    return k;
}

TEST(IpcKey, EveryFieldRoundTripsTheEpochToo) {
    const PackedKey k = sample();
    uint8_t raw[kKeySize];
    encode_key(k, raw);
    PackedKey d;
    std::string why;
    ASSERT_EQ(decode_key(raw, &d, &why), GDX_OK) << why;
    EXPECT_EQ(d.kind, k.kind);
    EXPECT_EQ(d.access, k.access);
    EXPECT_EQ(d.exporter_nonce, k.exporter_nonce);
    EXPECT_EQ(d.exporter_pid, k.exporter_pid);
    EXPECT_EQ(d.exporter_device, k.exporter_device);
    EXPECT_EQ(d.buffer_id, k.buffer_id);
    EXPECT_EQ(d.alloc_base, k.alloc_base);
    EXPECT_EQ(d.alloc_size, k.alloc_size);
    EXPECT_EQ(d.reg_base, k.reg_base);
    EXPECT_EQ(d.reg_len, k.reg_len);
    EXPECT_EQ(d.token, k.token);
    EXPECT_EQ(d.epoch, k.epoch); // what REVOKE names: a later registration of the allocation has another
    EXPECT_EQ(std::memcmp(d.handle, k.handle, sizeof(k.handle)), 0);
}

TEST(IpcKey, ForgedOrDamagedKeysAreRefusedWithAReason) {
    uint8_t raw[kKeySize];
    PackedKey d;
    std::string why;
    encode_key(sample(), raw);
    raw[155] = 1; // the reserved tail after the epoch
    EXPECT_EQ(decode_key(raw, &d, &why), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(why.find("reserved"), std::string::npos) << why;

    PackedKey k = sample();
    k.reg_base = k.alloc_base + k.alloc_size - 4096; // registered range reaching past the allocation
    k.reg_len = 8192;
    encode_key(k, raw);
    why.clear();
    EXPECT_EQ(decode_key(raw, &d, &why), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(why.find("outside"), std::string::npos) << why;

    k = sample();
    k.kind = ExportKind::None; // an unexported key may grant nothing
    encode_key(k, raw);
    why.clear();
    EXPECT_EQ(decode_key(raw, &d, &why), GDX_ERR_INVALID_PARAM);

    encode_key(sample(), raw);
    EXPECT_EQ(decode_key(std::span<const uint8_t>(raw, kKeySize - 1), &d, &why), GDX_ERR_INVALID_PARAM);
}

// A shared segment's key (kCapPeerMap: the staging engine's pools) names its key id in the exporter's table; one
// without an id, or of a kind past the last, is refused.
TEST(IpcKey, SharedSegmentKeysCarryTheirKeyId) {
    PackedKey k = sample();
    k.kind = ExportKind::Shared;
    k.buffer_id = 0;
    k.alloc_base = k.reg_base;
    k.alloc_size = k.reg_len;
    uint8_t raw[kKeySize];
    encode_key(k, raw);
    PackedKey d;
    std::string why;
    ASSERT_EQ(decode_key(raw, &d, &why), GDX_OK) << why;
    EXPECT_EQ(d.kind, ExportKind::Shared);
    EXPECT_EQ(d.token, k.token);
    EXPECT_STREQ(tp::cuda_ipc::export_kind_name(d.kind), "shared-segment");
    EXPECT_EQ(tp::cuda_ipc::ipc_kind(d.kind), mem::IpcKind::None); // nothing the GPU driver imports

    k.token = 0;
    encode_key(k, raw);
    why.clear();
    EXPECT_EQ(decode_key(raw, &d, &why), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(why.find("key id"), std::string::npos) << why;

    encode_key(sample(), raw);
    raw[2] = static_cast<uint8_t>(ExportKind::Shared) + 1;
    why.clear();
    EXPECT_EQ(decode_key(raw, &d, &why), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(why.find("kind"), std::string::npos) << why;
}

} // namespace
} // namespace gdx::test
