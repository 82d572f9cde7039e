// KvType and AttentionNumerics: how cached keys and values are stored and read. The smallest
// vocabulary the engine's public face and the kernels share; no kernel code behind it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvdesk {

// Storage type of cached keys or values. Each stores one token's row for one kv head as a
// self-contained row (its scales, then its values; kernels/kv_quant.h has the exact layouts),
// so appending a token never touches another token's bytes.
enum class KvType : uint8_t {
  F32,
  F16,
  BF16,
  FP8_E4M3,  // 8-bit float (4 exponent, 3 mantissa bits) times one f32 scale per row
  FP8_E5M2,  // 8-bit float (5 exponent, 2 mantissa bits) times one f32 scale per row
  INT8,      // 8-bit codes, affine: f16 scale and min per group of 32 values
  INT4,      // 4-bit codes, affine: f16 scale and min per group of 64 values
};

std::span<const KvType> all_kv_types();
const char* kv_type_name(KvType type);   // "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4"
std::optional<KvType> kv_type_from_name(std::string_view name);
// Stored in 8 bits or fewer a value (fp8, int8, int4): the types whose rows lose enough that
// keys are smoothed (engine/model/key_smoothing.h) and the newest rows kept in f32 as well.
constexpr bool kv_type_low_bit(KvType type) {
  return type != KvType::F32 && type != KvType::F16 && type != KvType::BF16;
}
// Bytes of one stored row of head_dim values, scales included.
size_t kv_row_bytes(KvType type, int32_t head_dim);

// Exact: all arithmetic in f32. LlamaCpp: where K or V is stored in f16, round q and the V
// accumulator to f16 at the points llama.cpp's CPU flash attention does, which reproduces its
// logits to ~1e-5 (the reference files in ../shared/models were made that way).
enum class AttentionNumerics : uint8_t { Exact, LlamaCpp };

}  // namespace kvdesk
