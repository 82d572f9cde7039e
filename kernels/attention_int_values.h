// Integer values: over int8 / int4 values a CPU attention kernel may weigh the stored codes by
// integer weights instead of widening every code to f32. Per tile of T consecutive cached rows
// (32, or 16 where AVX2 weighs int8 values: kernels/cpu/attention_isa.h simd_value_run) and per
// query head and value group g (kernels/kv_quant.h: a value group holds x = s_g * code + m_g),
// it writes x = s_g * (code - C) + (m_g + C * s_g), with C the
// middle code (128 for int8, 8 for int4), and takes the tile's share of sum_r p[r] x[r] as
//   w[r] = p[r] * s_g[r],  step = max_r w[r] / K,  k[r] = nearest(w[r] / step)   (K = 255: 8 bits)
//   dims of g:  step * sum_r k[r] * (code[r] - C)            exact in int32
//   + sum_r p[r] * (m_g[r] + C * s_g[r])                     in f32, added once at the end
// so the codes are multiplied as bytes: vpdpbusd (u8 weight x s8 code, 4 rows into int32) on
// AVX-512 VNNI, vpmaddubsw (u8 x s8 pairs into int16) on AVX2, where a 32-row tile adds 16
// int4 products in an int16 lane (at most 255 x 8 each) and int8's centred codes (up to 128 from
// the middle) take 7-bit weights, K = 127, so that a pair stays in int16 (2 x 127 x 128), widened
// pair by pair. A weight moves by at most step / 2, a 2K-th of the tile's largest p * s, on a
// code at most C steps from the middle: a row that dominates its tile moves by at most
// p * s * C / 2K, against its own rounding of p * s / 2: a quarter of it for int8 with 8-bit
// weights (a half with 7-bit ones), a 32nd for int4 (measured: attention NMSE over int8 KV
// 6.3e-5 against 6.8e-5 with f32 weights, test_attention.cpp; over stories260K with int8 KV the
// KL divergence from f32 KV is 2.4e-5 nats with 8-bit weights and 2.5e-5 with 7-bit ones,
// kvdesk-cli perplexity, 8-bit query, newest rows in f32).
#pragma once
#include <cstdint>

#include "kernels/kv_type.h"

namespace kvdesk {

// The weights' largest code K: 255 (8 bits); 127 where AVX2 multiplies centred int8 codes
// (|c - C| <= 128) by vpmaddubsw, whose int16 pair sums 2 * 127 * 128 then stay in range.
constexpr int32_t kValueWeightCodeMax = 255;
constexpr int32_t kValueWeightCodeMaxBytePairs = 127;

// C: the code subtracted from every stored int8 / int4 value code.
constexpr int32_t value_code_center(KvType v_type) { return v_type == KvType::INT8 ? 128 : 8; }

// w[n] (>= 0) -> k[n] in [0, code_max], nearest (ties to even); returns the step (0 when all are 0).
float quantize_value_weights(const float* w, int32_t n, int32_t code_max, uint8_t* k);

}  // namespace kvdesk
