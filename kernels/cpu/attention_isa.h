// Internal: the per-ISA entry points behind cpu::paged_attention (kernels/attention.cpp picks
// one after the CPU check). Each needs head_dim to be a multiple of its vector width.
#pragma once
#include <cstdint>

#include "kernels/attention.h"

namespace kvdesk {

constexpr int kSimdMaxLanes = 16;      // floats per vector, widest ISA
constexpr int kSimdMaxHeadTile = 8;    // query heads whose accumulators share the registers

// Scratch of the SIMD kernels: partial dot vectors of one head tile ([8][lanes][lanes]), then
// per query head the tile's weights [lanes], its accumulator [head_dim], running max and sum.
constexpr int64_t simd_scratch_floats(int32_t num_heads, int32_t head_dim) {
  return int64_t(kSimdMaxHeadTile) * kSimdMaxLanes * kSimdMaxLanes +
         int64_t(num_heads) * (kSimdMaxLanes + head_dim + 2);
}

void paged_attention_avx512(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args);  // head_dim % 16 == 0
void paged_attention_avx2(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args);    // head_dim % 8 == 0

}  // namespace kvdesk
