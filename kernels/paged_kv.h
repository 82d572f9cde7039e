// PagedKvLayer: the plain-data contract between the KV cache (engine/) and the attention
// kernels (CPU now, CUDA later) for one layer. Keys and values live in fixed-size physical
// blocks; a sequence's block table maps its logical block i (positions [i*B, (i+1)*B)) to a
// physical block. Scattered blocks then read as one contiguous sequence.
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
  INT8,      // int8 times one f32 scale per row
  INT4,      // 4-bit ints times one f16 scale per group of 32 values
};

std::span<const KvType> all_kv_types();
const char* kv_type_name(KvType type);   // "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4"
std::optional<KvType> kv_type_from_name(std::string_view name);
// Bytes of one stored row of head_dim values, scales included.
size_t kv_row_bytes(KvType type, int32_t head_dim);

// Layout of one layer's K (and, separately, V) storage:
//   data[num_blocks][num_kv_heads][block_size][kv_row_bytes(type, head_dim)]
// so one (block, kv head) is block_size rows, contiguous: the rows a query head of that
// group reads one after another.
struct PagedKvTensor {
  KvType type = KvType::F32;
  uint8_t* data = nullptr;
  size_t block_stride = 0;   // bytes between physical blocks
  size_t head_stride = 0;    // bytes between kv heads inside a block
  size_t row_stride = 0;     // bytes between token rows inside a (block, head)
};

struct PagedKvLayer {
  PagedKvTensor k;
  PagedKvTensor v;
  int32_t block_size = 16;   // tokens per block
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

// One sequence as attention sees it.
struct PagedSeq {
  const int32_t* block_table = nullptr;  // [ceil(num_tokens / block_size)] physical block ids
  int32_t num_tokens = 0;                // positions [0, num_tokens) are readable
};

}  // namespace kvdesk
