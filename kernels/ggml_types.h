// The tensor element types of GGUF/ggml: their ids as stored in files, block geometry,
// and which of them kvdesk can compute with. Block layouts follow ggml exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvdesk {

// Ids as written in GGUF tensor infos (ggml_type). Gaps are retired ids.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
};

struct GgmlTypeInfo {
  std::string_view name;   // "q8_0"
  int64_t block_values;    // values per block (1 for plain floats)
  int64_t block_bytes;     // bytes per block
  bool computable;         // kvdesk has dot-product kernels for it
};

// nullptr when the id is not a ggml type at all (a corrupt or future file).
const GgmlTypeInfo* ggml_type_info(uint32_t raw_type);
const GgmlTypeInfo& ggml_type_info(GgmlType type);

// Bytes of one row of n values; n must be a multiple of the block size.
size_t ggml_row_bytes(GgmlType type, int64_t n);

// ggml block layouts. A row of n values is n / block_values consecutive blocks.
constexpr int kQ8_0BlockValues = 32;
struct BlockQ8_0 {
  uint16_t d;                      // scale, IEEE half
  int8_t qs[kQ8_0BlockValues];     // value i = d * qs[i]
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int kQ4_0BlockValues = 32;
struct BlockQ4_0 {
  uint16_t d;                          // scale, IEEE half
  uint8_t qs[kQ4_0BlockValues / 2];    // value i (i<16) = d * ((qs[i] & 15) - 8); value i+16 uses qs[i] >> 4
};
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace kvdesk
