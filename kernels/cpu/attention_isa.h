// Internal: the per-ISA entry points behind cpu::paged_attention (kernels/attention.cpp picks
// one after the CPU check). Each needs head_dim to be a multiple of its vector width.
#pragma once
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/kv_quant.h"

namespace kvdesk {

constexpr int kSimdMaxLanes = 16;      // floats per vector, widest ISA
constexpr int kSimdMaxHeadTile = 8;    // query heads whose accumulators share the registers

// Most scale groups of an int8 / int4 row (int8's groups are the smaller).
constexpr int64_t simd_int_groups(int32_t head_dim) { return kv_row_scales(KvType::INT8, head_dim); }

// How an ISA's kernel rounds over int8 / int4 KV. Values are weighed by codes over a run of its
// tiles (attention_int_values.h, simd_value_run): AVX-512 VNNI multiplies 4 rows of bytes per
// vpdpbusd, 8-bit query and weight codes into int32; AVX2's vpmaddubsw multiplies 2 into int16
// pairs, which int4 codes (|c| <= 15) leave room for at 8 bits, a run of four tiles adding up
// before widening, and int8 codes (|c| <= 255 as keys, 128 centred as values) only with the
// query's pairs of codes limited to 128 in sum (attention_int_keys.h) and 7-bit weights. The
// AVX-VNNI tier is AVX2's kernel with vpdpbusd for the byte products: it rounds as AVX2 does.
constexpr bool simd_byte_pairs(CpuIsa isa) { return isa != CpuIsa::Avx512; }
// Rows of the run of tiles whose int8 / int4 values an ISA weighs at once: 32 (AVX-512: a pair
// of tiles; AVX2 over int4: four, 16 products of at most 255 x 8 adding up in an int16 lane),
// except AVX2 over int8 values, a pair of tiles (16 rows) whose sums widen quad by quad.
constexpr int32_t kSimdMaxValueRun = 2 * kSimdMaxLanes;
constexpr int32_t simd_value_run(KvType v_type, CpuIsa isa) {
  return simd_byte_pairs(isa) && v_type == KvType::INT8 ? 16 : kSimdMaxValueRun;
}
constexpr int32_t simd_query_pair_max(KvType k_type, CpuIsa isa) {
  return simd_byte_pairs(isa) && k_type == KvType::INT8 ? kQueryPairMaxBytePairs : 0;
}
constexpr int32_t simd_weight_code_max(KvType v_type, CpuIsa isa) {
  return simd_byte_pairs(isa) && v_type == KvType::INT8 ? kValueWeightCodeMaxBytePairs : kValueWeightCodeMax;
}
constexpr IntAttentionScheme simd_int_scheme(KvType k_type, KvType v_type, CpuIsa isa) {
  IntAttentionScheme scheme;
  scheme.query_pair_max = simd_query_pair_max(k_type, isa);
  scheme.value_tile = v_type == KvType::INT8 || v_type == KvType::INT4 ? simd_value_run(v_type, isa) : 0;
  scheme.weight_code_max = simd_weight_code_max(v_type, isa);
  return scheme;
}

// Units of 64 dims, each weighted value code vectors cover (attention_weighted_codes.h), and
// the bytes of one quad of 4 rows' codes of a unit.
constexpr int64_t simd_value_units(int32_t head_dim) { return (head_dim + 63) / 64; }
constexpr int kValueQuadBytes = 4 * 64;

// Floats of the shared int8 / int4 parts (attention_tile.h IntParts): the tile's key chunks
// [head_dim / 4][lanes], key scales [2][groups][lanes], value scales [2][groups]
// [kSimdMaxValueRun], one head's int16 query codes [head_dim / 2], a run of tiles' interleaved
// value codes [units][8 quads][256 bytes].
constexpr int64_t simd_int_shared_floats(int32_t head_dim) {
  return int64_t(head_dim / 4) * kSimdMaxLanes + 6 * simd_int_groups(head_dim) * kSimdMaxLanes + head_dim / 2 +
         simd_value_units(head_dim) * 512;
}

// Floats of the int8 / int4 parts of one query head: packed query [head_dim / 4], scale,
// code sums [groups], value min terms [groups][lanes], weight codes [groups][32 bytes], steps
// [groups], the weighted codes' accumulator [units][64].
constexpr int64_t simd_int_head_floats(int32_t head_dim) {
  return int64_t(head_dim / 4) + 1 + simd_int_groups(head_dim) * (1 + kSimdMaxLanes + 8 + 1) +
         simd_value_units(head_dim) * 64;
}

// Scratch of the SIMD kernels: partial dot vectors of one head tile ([8][lanes][lanes]), then
// per query head a run of tiles' weights [kSimdMaxValueRun], its accumulator [head_dim], running max and
// sum, the sum by lane [lanes], then the int8 / int4 parts, shared and per head.
constexpr int64_t simd_scratch_floats(int32_t num_heads, int32_t head_dim) {
  return int64_t(kSimdMaxHeadTile) * kSimdMaxLanes * kSimdMaxLanes +
         int64_t(num_heads) * (3 * kSimdMaxLanes + head_dim + 2) + simd_int_shared_floats(head_dim) +
         int64_t(num_heads) * simd_int_head_floats(head_dim);
}

void paged_attention_avx512(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args);  // head_dim % 16 == 0
void paged_attention_avx2(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args);    // head_dim % 8 == 0
void paged_attention_avxvnni(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args); // head_dim % 8 == 0

}  // namespace kvdesk
