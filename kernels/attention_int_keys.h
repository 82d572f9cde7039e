// Integer key scores: over int8 / int4 keys the CPU attention kernels do not dequantize key
// rows; they quantize the query once per call and take integer dot products with the stored
// codes, group by group (kernels/kv_quant.h: a key group holds x = s_g * code + m_g):
//   q[i] ~ sq * c[i],  |c[i]| <= 127, one scale sq per query head (on AVX2 over int8 keys also
//                      |c[2i]| + |c[2i+1]| <= 128, below)
//   dot(q, k) ~ sq * sum_g (s_g * D_g + m_g * C_g),  D_g = sum_{i in g} c[i] * code[i],  C_g = sum_{i in g} c[i]
// D_g and C_g are exact in int32, so every ISA that computes them agrees with the scalar twin
// up to the float arithmetic of the last line. One s8 factor per u8 code: AVX-512 VNNI's
// vpdpbusd multiplies 4 codes of a row per lane; AVX2's vpmaddubsw 2 into an int16 pair sum:
// int4 codes' (at most 2 * 15 * 127 = 3810) 8 chunks may add in int16 before widening; int8
// codes' would overflow (2 * 255 * 127 > 32767), so there each pair of query codes, dims 2i and
// 2i + 1 (a chunk's bytes 0, 1 and 2, 3), stays within 128 in sum: 255 * 128 = 32640. The scale
// then follows the largest |q[2i]| + |q[2i+1]| instead of the largest |q[i]|: its step is at
// most twice the 8-bit one (a 7-bit query), about 1.3 to 1.5 times it when the largest value's
// neighbour is typical. Over stories260K with int8 KV (newest rows in f32; values weighed by
// 7-bit codes as AVX2 does) the KL divergence from f32 KV is 2.5e-5 nats with the 8-bit query,
// 3.9e-5 with the pair-limited one and 4.7e-5 with a 7-bit one, top-1 agreement 99.79%,
// 99.58%, 99.51%; the pair-limited query's one multiply and widening per chunk instead of the
// 8-bit query's two (int8 codes widened to 16 bits for vpmaddwd) took AVX2 int8 attention at
// depth 2048 from 1.40-1.47x to 1.53x f16's speed.
// The query's rounding, half a 127th of its largest value, is 8 times finer than an int4 key's
// (half a 15th of a group's range) and of the order of an int8 key's (half a 255th): over
// stories260K with int8 KV and the newest rows in f32 it moves the KL divergence from f32 KV
// from 1.3e-5 (a 14-bit query) to 2.3e-5 nats, top-1 agreement unchanged at 99.93%
// (kvdesk-cli perplexity), for half the multiplies of a 14-bit query on AVX-512 (two 7-bit
// halves): int8 attention at depth 2048 went from 1.43x to 1.58x f16's speed there.
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

// The query's largest code, and the largest sum |c[2i]| + |c[2i+1]| where AVX2 multiplies int8
// key codes by vpmaddubsw (attention_isa.h simd_int_scheme; 0 elsewhere: no limit).
constexpr int32_t kQueryCodeMax = 127;
constexpr int32_t kQueryPairMaxBytePairs = 128;

// Whether cpu:: scores keys of this type and head dim by integer dot products (ref:: has a twin).
// int8 / int4 with head_dim a multiple of 8: every group is then a whole number of chunks.
constexpr bool int_key_scores(KvType k_type, int32_t head_dim) {
  return (k_type == KvType::INT8 || k_type == KvType::INT4) && head_dim % 8 == 0;
}

// The dim held by code j of chunk k (j in 0..3).
constexpr int32_t int_key_chunk_dim(KvType k_type, int32_t k, int32_t j) {
  return k_type == KvType::INT8 ? 4 * k + j : 8 * (k / 2) + 2 * j + k % 2;
}

// q[head_dim] -> c[head_dim] = nearest(q / sq), |c| <= kQueryCodeMax, and when pair_max > 0,
// |c[2i]| + |c[2i+1]| <= pair_max; returns sq (0 for an all-zero q).
float quantize_query(const float* q, int32_t head_dim, int32_t pair_max, int16_t* c);

namespace ref {
// sum_g (s_g * D_g + m_g * C_g) of one int8 / int4 key row and a quantized query c[head_dim]
// in dim order; times sq it is dot(q, k) up to the query's rounding.
float int_key_dot(KvType k_type, const uint8_t* row, const int16_t* c, int32_t head_dim);
}  // namespace ref

}  // namespace kvdesk
