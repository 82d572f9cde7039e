// Integer key scores: over int8 / int4 keys the CPU attention kernels do not dequantize key
// rows; they quantize the query once per call and take integer dot products with the stored
// codes, group by group (kernels/kv_quant.h: a key group holds x = s_g * code + m_g):
//   q[i] ~ sq * c[i],  |c[i]| <= query_code_max(key type), one scale sq per query head
//   dot(q, k) ~ sq * sum_g (s_g * D_g + m_g * C_g),  D_g = sum_{i in g} c[i] * code[i],  C_g = sum_{i in g} c[i]
// D_g and C_g are exact in int32, so every ISA that computes them agrees with the scalar twin
// up to the float arithmetic of the last line.
// int8 keys take c in 13 bits and a sign (|c| <= 8127 = 63 * 128 + 63): AVX-512 VNNI's
// vpdpbusd multiplies u8 codes by s8 factors, so it takes c as two 7-bit halves
// (c = 128 * hi + lo, hi and lo in [-63, 63]); AVX2's vpmaddwd takes c as int16 beside codes
// widened to 16 bits. That rounding (relative 2^-14 of the query's largest value) stays far
// below the keys' own (2^-9 of a group's range), so the attention matches the float kernel to
// ~1e-5 and the model's quality does not move. An 8-bit query would halve AVX-512's multiplies
// but is of the keys' own order: over stories260K it moved int8 KV's KL divergence from f32 KV
// from 1.3e-5 to 2.3e-5 nats (and every row as stored from 1.6e-4 to 2.6e-4).
// int4 keys take c in 7 bits and a sign (|c| <= 127): one s8 factor per code, so one vpdpbusd
// per 4 codes on AVX-512, and on AVX2 vpmaddubsw (u8 code x s8 factor, pairs summed into
// int16: at most 2 * 15 * 127 = 3810) whose sums 8 chunks may add in int16 before widening.
// Its rounding (2^-8 of the query's largest value) is still 8 times finer than an int4 key's
// (2^-5 of a group's range).
//
// Chunks: the kernels read a key row 4 codes at a time (one 32-bit lane holds 4 u8 codes of one
// row). int8 chunk k is dims 4k..4k+3. An int4 byte holds dims 2i (low nibble) and 2i+1 (high),
// and the kernels split 4 bytes (8 dims) into their low nibbles, chunk 2j = dims 8j, 8j+2, 8j+4,
// 8j+6, and their high nibbles, chunk 2j+1 = dims 8j+1, 8j+3, 8j+5, 8j+7. The query is laid out
// in the same chunk order; a dot product does not care about the order of its terms.
#pragma once
#include <cstdint>

#include "kernels/kv_type.h"

namespace kvdesk {

// The largest query code over keys of this type (int8 or int4).
constexpr int32_t query_code_max(KvType k_type) { return k_type == KvType::INT4 ? 127 : 8127; }

// Whether cpu:: scores keys of this type and head dim by integer dot products (ref:: has a twin).
// int8 / int4 with head_dim a multiple of 8: every group is then a whole number of chunks.
constexpr bool int_key_scores(KvType k_type, int32_t head_dim) {
  return (k_type == KvType::INT8 || k_type == KvType::INT4) && head_dim % 8 == 0;
}

// The dim held by code j of chunk k (j in 0..3).
constexpr int32_t int_key_chunk_dim(KvType k_type, int32_t k, int32_t j) {
  return k_type == KvType::INT8 ? 4 * k + j : 8 * (k / 2) + 2 * j + k % 2;
}

// q[head_dim] -> c[head_dim] (|c| <= code_max, nearest); returns sq (0 for an all-zero q).
float quantize_query(const float* q, int32_t head_dim, int32_t code_max, int16_t* c);

namespace ref {
// sum_g (s_g * D_g + m_g * C_g) of one int8 / int4 key row and a quantized query c[head_dim]
// in dim order; times sq it is dot(q, k) up to the query's rounding.
float int_key_dot(KvType k_type, const uint8_t* row, const int16_t* c, int32_t head_dim);
}  // namespace ref

}  // namespace kvdesk
