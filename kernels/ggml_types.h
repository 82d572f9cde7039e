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
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // kvdesk's own in-memory layouts, made from a file's type at load, never read from a file
  // (kernels/weight_repack.h).
  Q4_0x8 = 1000, Q4_Kx8 = 1001, Q6_Kx8 = 1002, Q8_0x8 = 1003, Q5_Kx8 = 1004, IQ4_XSx8 = 1005,
  IQ4_NLx8 = 1006, Q3_Kx8 = 1007, Q2_Kx8 = 1008,
  Q5_0x8 = 1009, Q5_1x8 = 1010, Q4_1x8 = 1011, MXFP4x8 = 1012,
};

struct GgmlTypeInfo {
  std::string_view name;   // "q8_0"
  int64_t block_values;    // values per block (1 for plain floats)
  int64_t block_bytes;     // bytes per block
  bool computable;         // kvdesk has dot-product kernels for it
  bool in_files = true;    // a GGUF file may name it (false: a repacked in-memory layout)
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

constexpr int kQ4_1BlockValues = 32;
struct BlockQ4_1 {
  uint16_t d;                          // scale, IEEE half
  uint16_t m;                          // minimum, IEEE half
  uint8_t qs[kQ4_1BlockValues / 2];    // value i (i<16) = d * (qs[i] & 15) + m; value i+16 uses qs[i] >> 4
};
static_assert(sizeof(BlockQ4_1) == 20);

// 5-bit quants: the low 4 bits as in Q4_0, the 5th bit of value i in bit i of qh
// (little-endian uint32): q[i] = (nibble i) | ((qh >> i) & 1) << 4.
constexpr int kQ5_0BlockValues = 32;
struct BlockQ5_0 {
  uint16_t d;                          // scale, IEEE half
  uint8_t qh[4];                       // [32] 5th bits
  uint8_t qs[kQ5_0BlockValues / 2];    // low nibbles: value i (i<16) in qs[i] & 15, value i+16 in qs[i] >> 4
};
static_assert(sizeof(BlockQ5_0) == 22);  // value i = d * (q[i] - 16)

constexpr int kQ5_1BlockValues = 32;
struct BlockQ5_1 {
  uint16_t d;                          // scale, IEEE half
  uint16_t m;                          // minimum, IEEE half
  uint8_t qh[4];                       // [32] 5th bits, as in Q5_0
  uint8_t qs[kQ5_1BlockValues / 2];    // low nibbles, as in Q5_0
};
static_assert(sizeof(BlockQ5_1) == 24);  // value i = d * q[i] + m

// K-quants: super-blocks of QK_K = 256 values in sub-blocks with their own small scales.
constexpr int kQK_K = 256;
constexpr int kKScaleBytes = 12;

// 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s] and 6-bit min m[s], packed in
// `scales` (get_scale_min_k4): s < 4: sc = scales[s] & 63, m = scales[s + 4] & 63;
// s >= 4: sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4,
//         m  = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4.
// Value 32s + l = d * sc[s] * q - dmin * m[s], q = nibble of qs[32 * (s / 2) + l]: low for even
// s, high for odd s.
struct BlockQ4_K {
  uint16_t d;                    // scale of the sub-block scales, IEEE half
  uint16_t dmin;                 // scale of the sub-block mins, IEEE half
  uint8_t scales[kKScaleBytes];  // [8] scales and [8] mins, 6 bits each
  uint8_t qs[kQK_K / 2];         // [256] nibbles
};
static_assert(sizeof(BlockQ4_K) == 144);

struct KScaleMin {
  uint8_t scale;  // 0..63
  uint8_t min;    // 0..63
};
// Sub-block s (0..7) of Q4_K / Q5_K scales (ggml's get_scale_min_k4).
inline KScaleMin k_scale_min(const uint8_t* scales, int s) {
  if (s < 4) return KScaleMin{static_cast<uint8_t>(scales[s] & 63), static_cast<uint8_t>(scales[s + 4] & 63)};
  return KScaleMin{static_cast<uint8_t>((scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4),
                   static_cast<uint8_t>((scales[s + 4] >> 4) | (scales[s] >> 6) << 4)};
}

// As Q4_K with a 5th bit: q of value 32s + l gains ((qh[l] >> s) & 1) << 4.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];         // [32] bit s of qh[l]: 5th bit of value 32s + l
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16 values with int8 scales; 6-bit quants offset by 32. Value
// v = 128h + 32k + l (half h, quarter k, l < 32) = d * scales[8h + 2k + l / 16] * (q - 32) with
// q = (nibble of ql[64h + 32 * (k & 1) + l]: low for k < 2, high for k >= 2)
//   | ((qh[32h + l] >> 2k) & 3) << 4.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];         // [256] low 4 bits
  uint8_t qh[kQK_K / 4];         // [256] high 2 bits
  int8_t scales[kQK_K / 16];     // [16] sub-block scales
  uint16_t d;                    // super-block scale, IEEE half
};
static_assert(sizeof(BlockQ6_K) == 210);

// 16 sub-blocks of 16 values, 2-bit quants with a 4-bit scale and a 4-bit min each. Value
// v = 128h + 32k + l (half h, quarter k, l < 32) has sub-block i = v / 16 and
//   q = (qs[32h + l] >> 2k) & 3,  value = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];    // [16] low nibble scale, high nibble min
  uint8_t qs[kQK_K / 4];         // [256] 2-bit quants, four per byte
  uint16_t d;                    // scale of the sub-block scales, IEEE half
  uint16_t dmin;                 // scale of the sub-block mins, IEEE half
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16 values, 3-bit quants (-4..3) with 6-bit scales offset by 32. Value
// v = 128h + 32k + l has sub-block i = v / 16 and
//   q = ((qs[32h + l] >> 2k) & 3) + 4 * ((hmask[l] >> (v / 32)) & 1) - 4,
//   value = d * (sc[i] - 32) * q,
// with sc[i] = ((scales[i % 8] >> 4 (i / 8)) & 15) | ((scales[8 + i % 4] >> 2 (i / 4)) & 3) << 4.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];      // [256] third bits: bit v / 32 of hmask[v % 32]
  uint8_t qs[kQK_K / 4];         // [256] low 2 bits, four per byte
  uint8_t scales[kKScaleBytes];  // [16] 6-bit scales
  uint16_t d;                    // super-block scale, IEEE half
};
static_assert(sizeof(BlockQ3_K) == 110);

// Sub-block i (0..15) of a Q3_K block: its 6-bit scale, 0..63 (32 is zero).
inline int q3_k_scale(const uint8_t* scales, int i) {
  return ((scales[i % 8] >> (4 * (i / 8))) & 15) | ((scales[8 + i % 4] >> (2 * (i / 4))) & 3) << 4;
}

// IQ4 ("non-linear") quants: a 4-bit index into this table of int8 levels, denser near zero.
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 32 values, one fp16 scale: value i (i<16) = d * kIq4nlValues[qs[i] & 15], value i+16 uses qs[i] >> 4.
constexpr int kIq4nlBlockValues = 32;
struct BlockIQ4_NL {
  uint16_t d;                            // scale, IEEE half
  uint8_t qs[kIq4nlBlockValues / 2];     // [32] table indices, nibbles as in Q4_0
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// 8 sub-blocks of 32 with 6-bit scales offset by 32:
//   ls[s] = ((scales_l[s / 2] >> 4 (s % 2)) & 15) | ((scales_h >> 2s) & 3) << 4,
//   value 32s + l = d * (ls[s] - 32) * kIq4nlValues[index], index the nibble of qs[16s + l % 16]
//   (low for l < 16, high for l >= 16).
struct BlockIQ4_XS {
  uint16_t d;                    // super-block scale, IEEE half
  uint16_t scales_h;             // [8] high 2 bits of the sub-block scales
  uint8_t scales_l[kQK_K / 64];  // [8] low 4 bits of the sub-block scales
  uint8_t qs[kQK_K / 2];         // [256] table indices
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// Sub-block s (0..7) of an IQ4_XS block: its 6-bit scale, 0..63 (32 is zero).
inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((b.scales_h >> (2 * s)) & 3) << 4;
}

// MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): 32 values of E2M1 sharing a power-of-
// two scale. ggml stores the E2M1 codes as indices into this table of doubled values and halves
// the scale to match: value i (i<16) = mxfp4_scale(e) * kMxfp4Values[qs[i] & 15], value i+16
// uses qs[i] >> 4.
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr int kMxfp4BlockValues = 32;
struct BlockMXFP4 {
  uint8_t e;                            // E8M0 exponent: scale 2^(e - 127), stored halved
  uint8_t qs[kMxfp4BlockValues / 2];    // [32] table indices, nibbles as in Q4_0
};
static_assert(sizeof(BlockMXFP4) == 17);

// 2^(e - 128), the halved E8M0 scale (ggml's GGML_E8M0_TO_FP32_HALF), exact for every e:
// e < 2 are the denormals 2^-128 and 2^-127.
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float out;
  __builtin_memcpy(&out, &bits, sizeof(out));
  return out;
}

}  // namespace kvdesk
