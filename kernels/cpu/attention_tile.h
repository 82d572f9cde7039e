// Internal, included by attention_driver.h and attention_int_phases.h: what one step of the
// SIMD paged attention works on. A tile is up to W consecutive token rows of one kv head; a
// GroupJob is one kv head with its query heads and its share of the float scratch.
#pragma once
#include <cstdint>

#include "kernels/cpu/attention_isa.h"

namespace kvdesk {
namespace {

// Up to W consecutive token rows of one kv head: where each K and V row is. Entries past
// `rows` repeat row 0, so a whole tile can be read (what those lanes give is masked or weighed 0).
template <class Isa>
struct RowTile {
  int32_t rows = 0;
  const uint8_t* k[Isa::kLanes];
  const uint8_t* v[Isa::kLanes];
};

template <class Isa>
void fill_past_rows(RowTile<Isa>& tile) {
  for (int32_t r = tile.rows; r < Isa::kLanes; ++r) tile.k[r] = tile.k[0], tile.v[r] = tile.v[0];
}

// What the integer key scores and the fused int8 / int4 values keep (attention_int_phases.h);
// unused (nullptr) for other K and V types. Chunks are 4 key codes of one row (one 32-bit lane),
// in the chunk order of attention_int_keys.h; Gk and Gv are the K and V rows' scale groups.
struct IntParts {
  int16_t* query_codes;      // [d]                one head's query codes while quantizing (shared)
  uint32_t* q_chunks;        // [heads][d / 4]     the quantized query, 4 s8 codes a chunk
  float* q_scales;           // [heads]            sq * the attention scale
  float* q_sums;             // [heads][Gk]        C_g: the query codes' sum over each key group
  uint32_t* key_chunks;      // [d / 4][W]         the tile's key codes, word-major (shared; transpose_key_codes)
  float* key_scales;         // [2][Gk][W]         the tile rows' key s_g, then m_g (shared)
  int32_t key_groups;        // Gk, found once per call (kv_row_scales divides)
  float* value_scales;       // [2][Gv][R]         a run of R tiles' rows (simd_value_run): value s_g, then m_g
                             //                    (m_g + C s_g once centred, attention_weighted_codes.h; shared)
  float* value_min_terms;    // [heads][Gv][W]     running sum of softmax weight * the row's value m_g
  int32_t value_groups;      // Gv; 0 when V is not int8 / int4 (nothing below is used then)
  // int8 / int4 values weighed by codes over runs of R tiles (attention_weighted_codes.h); U =
  // units of 64 dims.
  uint8_t* value_codes;      // [U][R / 4][256 bytes]   the run's centred codes, 4 rows per dim (shared)
  uint8_t* weight_codes;     // [heads][Gv][32 bytes]   codes of softmax weight * the row's s_g
  float* weight_steps;       // [heads][Gv]             their steps
  float* value_acc;          // [heads][U][64]          the weighted codes' sums, in the ISA's dim order
};

// Up to simd_value_run consecutive rows of one kv head whose values are weighed at once: a run
// of tiles. Entries past `rows` repeat row 0.
struct ValueRows {
  int32_t rows = 0;
  const uint8_t* v[kSimdMaxValueRun];
};

// One kv head and its query heads, with the float scratch split into its parts.
struct GroupJob {
  const float* q;   // [heads][d]
  float* out;       // [heads][d]
  int32_t heads;
  int32_t d;
  float scale;      // the attention scale times log2 e: scores in base 2 (exp2_nonpositive)
  float* parts;     // [kSimdMaxHeadTile][W][W]   partial dot vectors of one head tile
  float* p;         // [heads][p_stride]      scores, then softmax weights, of one tile (first W) or run
  int32_t p_stride; // kSimdMaxValueRun: room for a run of tiles' weights (attention_weighted_codes.h)
  float* acc;       // [heads][d]
  float* m;         // [heads] running max
  float* l;         // [heads] the sum, from l_lanes at the end
  float* l_lanes;   // [heads][W] running sum of the weights, by lane
  float* weights;   // [heads][num_tokens] or nullptr: raw scores, then softmax weights
  int32_t num_tokens;
  IntParts ints;
  const float* sinks;   // [heads] sink logits (base e, AttentionArgs::sinks) or nullptr
};

// Runs Step<HT> over all heads in tiles of Max (at most kSimdMaxHeadTile), then 4, 2, 1.
template <template <int> class Step, int Max = kSimdMaxHeadTile, class... Args>
void for_head_tiles(int32_t heads, Args&&... args) {
  static_assert(Max == 4 || Max == kSimdMaxHeadTile);
  int32_t h = 0;
  for (; h + Max <= heads; h += Max) Step<Max>::run(h, args...);
  if (heads - h >= 4) Step<4>::run(h, args...), h += 4;
  if (heads - h >= 2) Step<2>::run(h, args...), h += 2;
  if (heads - h >= 1) Step<1>::run(h, args...);
}

}  // namespace
}  // namespace kvdesk
