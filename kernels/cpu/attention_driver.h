// Internal, included only by the ISA translation units (attention_avx512.cpp, _avx2.cpp): paged
// attention written once over an ISA's float vector of W lanes. Everything here has internal
// linkage, so each ISA keeps its own copy.
//
// Per kv head, its G query heads run together over tiles of W token rows:
//   1. scores  s[h][r] = scale * row_scale_k[r] * dot(q[h], K[r])   each K row dequantized
//      once into registers and used by every head; the W partial-sum vectors of a head are
//      added across lanes by one W x W transpose (~3 ops per dot instead of a full reduce).
//      int8 / int4 keys are not dequantized: integer dot products with the quantized query,
//      tokens in lanes (attention_int_phases.h).
//   2. softmax m' = max(m, max_r s);  acc *= 2^(m - m');  p = 2^(s - m');  l = l 2^(m - m') + sum p
//      (the online softmax of ref::, one step per tile, or per run of tiles where int8 / int4
//      values are weighed at once, instead of per token, and in base 2: the scale takes log2 e,
//      exp2_nonpositive; l is kept per lane and added across lanes once at the end)
//   3. values  acc[h] += sum_r p[h][r] * row_scale_v[r] * V[r]   each V vector dequantized once
//      per tile of up to 8 heads whose accumulators stay in registers. int8 / int4 values are
//      weighed once per run of tiles (simd_value_run), their codes by 8- or 7-bit codes of p
//      times their group scale and their min into one sum per group
//      (attention_weighted_codes.h).
// A tile's rows may span blocks: row pointers come from the block table, row by row, and the
// next tile's rows are prefetched while this one computes. The newest rows, when the caller
// passes them in f32 (AttentionArgs::recent_k), come last, in tiles of their own read as f32
// rows, whatever the cache's types. The includer provides <immintrin.h>.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/cpu/attention_int_phases.h"
#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/attention_weighted_codes.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

// Scores are kept in base-2 units (the attention scale times log2 e), so the softmax weights are
// powers of 2: Cephes exp2f on [-126, 0], 2^x = 2^n 2^f, n = round(x), f = x - n in [-1/2, 1/2]
// (exact), 2^f ~ 1 + f P(f). Relative error ~1.7e-7; below -126 the result is 0 (std::exp2
// gives a denormal there, which nothing downstream can see). Base e would cost a
// multiplication and a two-part reduction more per vector.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kExp2Lowest = -126.0f;
constexpr float kExp2Poly[6] = {1.535336188319500e-4f, 1.339887440266574e-3f, 9.618437357674640e-3f,
                                5.550332471162809e-2f, 2.402264791363012e-1f, 6.931472028550421e-1f};

template <class Isa>
typename Isa::Vec exp2_nonpositive(typename Isa::Vec x) {
  using Vec = typename Isa::Vec;
  const Vec n = Isa::round(x);
  const Vec f = Isa::fma(n, Isa::set1(-1.0f), x);
  Vec y = Isa::set1(kExp2Poly[0]);
  for (int i = 1; i < 6; ++i) y = Isa::fma(y, f, Isa::set1(kExp2Poly[i]));
  y = Isa::fma(y, f, Isa::set1(1.0f));
  return Isa::zero_below(x, kExp2Lowest, Isa::ldexp(y, n));
}

// One row of a float or fp8 `Type` as vectors: value[c*W + i] = scale(row) * lane i of
// load(row, c). fp8's per-row scale is applied once per row (to the finished dot, or to the
// softmax weight). int8 / int4 rows are read by attention_int_phases.h.
template <class Isa, KvType Type>
struct RowReader {
  using Vec = typename Isa::Vec;
  static constexpr int W = Isa::kLanes;
  static constexpr bool kHasRowScale =
      Type == KvType::FP8_E4M3 || Type == KvType::FP8_E5M2;

  static float scale(const uint8_t* row) {
    if constexpr (kHasRowScale) {
      float s;
      std::memcpy(&s, row, sizeof(s));
      return Type == KvType::FP8_E4M3 ? s * 256.0f : s;   // Isa::load_e4m3 gives value * 2^-8
    }
    return 1.0f;
  }

  static Vec load(const uint8_t* row, int32_t c, int32_t d) {
    const uint8_t* values = row + kv_row_values_offset(Type, d);
    if constexpr (Type == KvType::F32) return Isa::load_f32(values + sizeof(float) * c * W);
    if constexpr (Type == KvType::F16) return Isa::load_f16(values + sizeof(uint16_t) * c * W);
    if constexpr (Type == KvType::BF16) return Isa::load_bf16(values + sizeof(uint16_t) * c * W);
    if constexpr (Type == KvType::FP8_E4M3) return Isa::load_e4m3(values + c * W);
    if constexpr (Type == KvType::FP8_E5M2) return Isa::load_e5m2(values + c * W);
  }
};

template <class Isa, KvType Type>
typename Isa::Vec row_scales(const uint8_t* const* rows, int32_t n) {
  alignas(64) float s[Isa::kLanes] = {};
  for (int32_t r = 0; r < n; ++r) s[r] = RowReader<Isa, Type>::scale(rows[r]);
  return Isa::load(s);
}

// Step 1 for heads [h0, h0 + HT): p[h] = scale * row_scale_k * dot(q[h], K[r]), -inf past rows.
template <class Isa, KvType Type, int HT>
void score_heads(const RowTile<Isa>& tile, const GroupJob& job, int32_t h0, typename Isa::Vec k_scale) {
  using Vec = typename Isa::Vec;
  constexpr int W = Isa::kLanes;
  for (int32_t r = 0; r < tile.rows; ++r) {
    Vec dot[HT];
    for (int i = 0; i < HT; ++i) dot[i] = Isa::zero();
    for (int32_t c = 0; c < job.d / W; ++c) {
      const Vec k = RowReader<Isa, Type>::load(tile.k[r], c, job.d);
      for (int i = 0; i < HT; ++i) dot[i] = Isa::fma(Isa::load(job.q + (h0 + i) * job.d + c * W), k, dot[i]);
    }
    for (int i = 0; i < HT; ++i) Isa::store(job.parts + (i * W + r) * W, dot[i]);
  }
  for (int32_t r = tile.rows; r < W; ++r) {
    for (int i = 0; i < HT; ++i) Isa::store(job.parts + (i * W + r) * W, Isa::zero());
  }
  for (int i = 0; i < HT; ++i) {
    const Vec s = Isa::mul(Isa::transpose_sum(job.parts + i * W * W), k_scale);
    Isa::store(job.p + (h0 + i) * job.p_stride, Isa::first_lanes(s, tile.rows, -INFINITY));
  }
}

// Step 3 for heads [h0, h0 + HT): acc[h] += sum_r p[h][r] * V[r] (p already has the V scales).
template <class Isa, KvType Type, int HT>
void accumulate_heads(const RowTile<Isa>& tile, const GroupJob& job, int32_t h0) {
  using Vec = typename Isa::Vec;
  constexpr int W = Isa::kLanes;
  for (int32_t c = 0; c < job.d / W; ++c) {
    Vec acc[HT];
    for (int i = 0; i < HT; ++i) acc[i] = Isa::load(job.acc + (h0 + i) * job.d + c * W);
    for (int32_t r = 0; r < tile.rows; ++r) {
      const Vec v = RowReader<Isa, Type>::load(tile.v[r], c, job.d);
      for (int i = 0; i < HT; ++i) acc[i] = Isa::fma(Isa::set1(job.p[(h0 + i) * job.p_stride + r]), v, acc[i]);
    }
    for (int i = 0; i < HT; ++i) Isa::store(job.acc + (h0 + i) * job.d + c * W, acc[i]);
  }
}

template <class Isa, KvType Type>
struct Scores {
  template <int HT>
  struct Step {
    static void run(int32_t h0, const RowTile<Isa>& tile, const GroupJob& job, typename Isa::Vec k_scale) {
      score_heads<Isa, Type, HT>(tile, job, h0, k_scale);
    }
  };
  static void tile(const RowTile<Isa>& tile, const GroupJob& job) {
    const typename Isa::Vec k_scale = Isa::mul(row_scales<Isa, Type>(tile.k, tile.rows), Isa::set1(job.scale));
    for_head_tiles<Step>(job.heads, tile, job, k_scale);
  }
};

template <class Isa, KvType Type>
struct Values {
  template <int HT>
  struct Step {
    static void run(int32_t h0, const RowTile<Isa>& tile, const GroupJob& job) {
      accumulate_heads<Isa, Type, HT>(tile, job, h0);
    }
  };
  static void tile(const RowTile<Isa>& tile, const GroupJob& job) {
    if constexpr (RowReader<Isa, Type>::kHasRowScale) {
      const typename Isa::Vec v_scale = row_scales<Isa, Type>(tile.v, tile.rows);
      for (int32_t h = 0; h < job.heads; ++h) {
        Isa::store(job.p + h * job.p_stride, Isa::mul(Isa::load(job.p + h * job.p_stride), v_scale));
      }
    }
    for_head_tiles<Step>(job.heads, tile, job);
  }
};

// The int8 / int4 values' min terms of head h scale with its accumulator.
template <class Isa>
void rescale_min_terms(const GroupJob& job, int32_t h, float alpha) {
  const int32_t groups = job.ints.value_groups;
  float* terms = job.ints.value_min_terms + h * groups * Isa::kLanes;
  for (int32_t i = 0; i < groups * Isa::kLanes; i += Isa::kLanes) Isa::store(terms + i, Isa::mul(Isa::load(terms + i), Isa::set1(alpha)));
}

// The weighted codes' accumulator of head h scales with its accumulator.
template <class Isa>
void rescale_value_acc(const GroupJob& job, int32_t h, float alpha) {
  if (job.ints.value_groups == 0) return;
  const int64_t floats = simd_value_units(job.d) * 64;
  float* sums = job.ints.value_acc + h * floats;
  for (int64_t i = 0; i < floats; i += Isa::kLanes) Isa::store(sums + i, Isa::mul(Isa::load(sums + i), Isa::set1(alpha)));
}

// Step 2 for every head: turns the scores of `tiles` tiles (a tile, or a run of them whose
// values are weighed at once) into weights and rescales what came before. One max, one check
// and one rescale per run: the run's tiles share them.
template <class Isa>
void softmax_tiles(const GroupJob& job, int32_t tiles) {
  using Vec = typename Isa::Vec;
  constexpr int W = Isa::kLanes;
  for (int32_t h = 0; h < job.heads; ++h) {
    float* p = job.p + h * job.p_stride;
    Vec s_max = Isa::load(p);
    for (int32_t t = 1; t < tiles; ++t) s_max = Isa::max(s_max, Isa::load(p + t * W));
    // Past the first tiles the running max rarely moves: one compare skips the reduction.
    const float tile_max = Isa::any_above(s_max, job.m[h]) ? Isa::reduce_max(s_max) : job.m[h];
    float* l_lanes = job.l_lanes + h * W;
    if (tile_max > job.m[h]) {
      if (job.m[h] != -INFINITY) {
        const float alpha = std::exp2(job.m[h] - tile_max);
        Isa::store(l_lanes, Isa::mul(Isa::load(l_lanes), Isa::set1(alpha)));
        float* acc = job.acc + h * job.d;
        for (int32_t c = 0; c < job.d; c += W) Isa::store(acc + c, Isa::mul(Isa::load(acc + c), Isa::set1(alpha)));
        rescale_min_terms<Isa>(job, h, alpha);
        rescale_value_acc<Isa>(job, h, alpha);
      }
      job.m[h] = tile_max;
    }
    const Vec minus_max = Isa::set1(-job.m[h]);
    Vec l = Isa::load(l_lanes);
    for (int32_t t = 0; t < tiles; ++t) {
      const Vec weight = exp2_nonpositive<Isa>(Isa::add(Isa::load(p + t * W), minus_max));
      l = Isa::add(l, weight);
      Isa::store(p + t * W, weight);
    }
    Isa::store(l_lanes, l);
  }
}

template <class Isa>
using TileFn = void (*)(const RowTile<Isa>&, const GroupJob&);

template <class Isa, template <class, KvType> class Phase>
TileFn<Isa> float_tile_fn(KvType type) {
  switch (type) {
    case KvType::F32: return &Phase<Isa, KvType::F32>::tile;
    case KvType::F16: return &Phase<Isa, KvType::F16>::tile;
    case KvType::BF16: return &Phase<Isa, KvType::BF16>::tile;
    case KvType::FP8_E4M3: return &Phase<Isa, KvType::FP8_E4M3>::tile;
    case KvType::FP8_E5M2: return &Phase<Isa, KvType::FP8_E5M2>::tile;
    case KvType::INT8:
    case KvType::INT4: break;   // IntScores / WeightedValues take these
  }
  KVDESK_ASSERT(false);
  return nullptr;
}

// Step 1 for the layer's K type: integer dot products over int8 / int4 keys (every head dim
// the SIMD kernels take is a multiple of 8), else float.
template <class Isa>
TileFn<Isa> scores_fn(KvType type, int32_t d) {
  if (int_key_scores(type, d)) return type == KvType::INT8 ? &IntScores<Isa, KvType::INT8>::tile : &IntScores<Isa, KvType::INT4>::tile;
  return float_tile_fn<Isa, Scores>(type);
}

inline bool int_values(KvType type) { return type == KvType::INT8 || type == KvType::INT4; }

// Step 3 for float and fp8 values, tile by tile; nullptr for int8 / int4 (run_values_fn).
template <class Isa>
TileFn<Isa> values_fn(KvType type) {
  return int_values(type) ? nullptr : float_tile_fn<Isa, Values>(type);
}

template <class Isa>
using RunFn = void (*)(const ValueRows&, const GroupJob&);

// Step 3 for int8 / int4 values, weighed by codes over a run of tiles; nullptr for others.
template <class Isa>
RunFn<Isa> run_values_fn(KvType type) {
  if (type == KvType::INT8) return &WeightedValues<Isa, KvType::INT8>::run;
  if (type == KvType::INT4) return &WeightedValues<Isa, KvType::INT4>::run;
  return nullptr;
}

// Row pointers of positions [first, first + W) of kv head `head`, as many as the sequence has.
template <class Isa>
void locate_rows(const PagedKvLayer& layer, const PagedSeq& seq, int32_t head, int32_t first, RowTile<Isa>& tile) {
  tile.rows = seq.num_tokens - first < Isa::kLanes ? seq.num_tokens - first : Isa::kLanes;
  const uint8_t* k_head = layer.k.data + size_t(head) * layer.k.head_stride;
  const uint8_t* v_head = layer.v.data + size_t(head) * layer.v.head_stride;
  int32_t b = first / layer.block_size;
  int32_t offset = first % layer.block_size;
  if (offset + tile.rows <= layer.block_size) {   // one block: rows at a fixed stride
    const size_t block = size_t(seq.block_table[b]);
    const uint8_t* k = k_head + block * layer.k.block_stride + size_t(offset) * layer.k.row_stride;
    const uint8_t* v = v_head + block * layer.v.block_stride + size_t(offset) * layer.v.row_stride;
    for (int32_t r = 0; r < tile.rows; ++r) tile.k[r] = k + size_t(r) * layer.k.row_stride, tile.v[r] = v + size_t(r) * layer.v.row_stride;
    fill_past_rows(tile);
    return;
  }
  for (int32_t r = 0; r < tile.rows; ++r) {
    const size_t block = size_t(seq.block_table[b]);
    tile.k[r] = k_head + block * layer.k.block_stride + size_t(offset) * layer.k.row_stride;
    tile.v[r] = v_head + block * layer.v.block_stride + size_t(offset) * layer.v.row_stride;
    if (++offset == layer.block_size) offset = 0, ++b;
  }
  fill_past_rows(tile);
}

// Row pointers of the f32 recent rows of kv head `head` at positions [first, first + W), as
// many as come before `end`; recent row 0 is position recent_first.
template <class Isa>
void locate_recent_rows(const AttentionArgs& args, int32_t d, int32_t head, int32_t recent_first, int32_t first,
                        int32_t end, RowTile<Isa>& tile) {
  tile.rows = end - first < Isa::kLanes ? end - first : Isa::kLanes;
  for (int32_t r = 0; r < tile.rows; ++r) {
    const int64_t offset = (first + r - recent_first) * args.recent_stride + int64_t(head) * d;
    tile.k[r] = reinterpret_cast<const uint8_t*>(args.recent_k + offset);
    tile.v[r] = reinterpret_cast<const uint8_t*>(args.recent_v + offset);
  }
  fill_past_rows(tile);
}

// Asks for the rows of the next tile while this one computes: scattered blocks defeat the
// hardware prefetcher, which only follows sequential streams.
template <class Isa>
void prefetch_rows(const RowTile<Isa>& tile, size_t k_row_bytes, size_t v_row_bytes) {
  constexpr size_t kLine = 64;
  for (int32_t r = 0; r < tile.rows; ++r) {
    for (size_t o = 0; o < k_row_bytes; o += kLine) __builtin_prefetch(tile.k[r] + o);
    for (size_t o = 0; o < v_row_bytes; o += kLine) __builtin_prefetch(tile.v[r] + o);
  }
}

// The optional weights output: a tile's raw scores (base 2) are kept as they come; once the
// final max and sum are known they become softmax weights, 2^(s - m) / l, as ref:: computes
// them in base e.
template <class Isa>
void keep_scores(const GroupJob& job, int32_t first, int32_t rows) {
  for (int32_t h = 0; h < job.heads; ++h) {
    std::memcpy(job.weights + int64_t(h) * job.num_tokens + first, job.p + h * job.p_stride, sizeof(float) * size_t(rows));
  }
}

// Rows before first_token (outside a sliding window) get weight 0.
inline void normalize_weights(const GroupJob& job, int32_t first_token) {
  for (int32_t h = 0; h < job.heads; ++h) {
    float* w = job.weights + int64_t(h) * job.num_tokens;
    for (int32_t j = 0; j < first_token; ++j) w[j] = 0;
    for (int32_t j = first_token; j < job.num_tokens; ++j) w[j] = std::exp2(w[j] - job.m[h]) / job.l[h];
  }
}

// The IntParts of query heads from h0 in the scratch that starts at `base`.
inline IntParts int_parts(const PagedKvLayer& layer, float* base, int32_t num_heads, int64_t h0) {
  constexpr int64_t W = kSimdMaxLanes;
  const int32_t d = layer.head_dim;
  const int64_t groups = simd_int_groups(d);
  const int64_t units = simd_value_units(d);
  float* key_scales = base + d / 4 * W;
  float* value_scales = key_scales + 2 * groups * W;
  float* query_codes = value_scales + 4 * groups * W;
  float* value_codes = query_codes + d / 2;
  float* q_chunks = value_codes + units * 512;
  float* q_scales = q_chunks + int64_t(num_heads) * (d / 4);
  float* q_sums = q_scales + num_heads;
  float* value_min_terms = q_sums + num_heads * groups;
  float* weight_codes = value_min_terms + num_heads * groups * W;
  float* weight_steps = weight_codes + num_heads * groups * 8;
  float* value_acc = weight_steps + num_heads * groups;
  const int32_t k_groups = kv_row_scales(layer.k.type, d);
  const int32_t v_groups = int_values(layer.v.type) ? kv_row_scales(layer.v.type, d) : 0;
  return IntParts{reinterpret_cast<int16_t*>(query_codes),
                  reinterpret_cast<uint32_t*>(q_chunks) + h0 * (d / 4),
                  q_scales + h0,
                  q_sums + h0 * k_groups,
                  reinterpret_cast<uint32_t*>(base),
                  key_scales,
                  k_groups,
                  value_scales,
                  value_min_terms + h0 * v_groups * W,
                  v_groups,
                  reinterpret_cast<uint8_t*>(value_codes),
                  reinterpret_cast<uint8_t*>(weight_codes) + h0 * v_groups * 32,
                  weight_steps + h0 * v_groups,
                  value_acc + h0 * units * 64};
}

// Group g's share of the scratch: parts [8][W][W] shared by all groups, then for every query
// head p [num_heads][kSimdMaxValueRun], acc [num_heads][d], m [num_heads], l [num_heads], l_lanes
// [num_heads][W]; then the int8 / int4 parts (IntParts), shared (sized for the widest ISA) and
// per query head; group g owns the heads [g * G, (g + 1) * G).
template <class Isa>
GroupJob group_job(const PagedKvLayer& layer, const AttentionArgs& args, int32_t num_tokens, int32_t g, int32_t group_heads) {
  constexpr int W = Isa::kLanes;
  const int32_t d = layer.head_dim;
  const int32_t num_heads = args.num_heads;
  const int64_t h0 = int64_t(g) * group_heads;
  float* p = args.scratch + kSimdMaxHeadTile * W * W;
  float* acc = p + int64_t(num_heads) * kSimdMaxValueRun;
  float* m = acc + int64_t(num_heads) * d;
  float* l = m + num_heads;
  float* l_lanes = l + num_heads;
  float* weights = args.weights ? args.weights + h0 * num_tokens : nullptr;
  return GroupJob{args.q + h0 * d,
                  args.out + h0 * d,
                  group_heads,
                  d,
                  args.scale * kLog2e,
                  args.scratch,
                  p + h0 * kSimdMaxValueRun,
                  kSimdMaxValueRun,
                  acc + h0 * d,
                  m + h0,
                  l + h0,
                  l_lanes + h0 * W,
                  weights,
                  num_tokens,
                  int_parts(layer, l_lanes + int64_t(num_heads) * kSimdMaxLanes, num_heads, h0),
                  args.sinks ? args.sinks + h0 : nullptr};
}

template <class Isa>
void start_group(const GroupJob& job, const PagedKvLayer& layer) {
  for (int32_t h = 0; h < job.heads; ++h) job.m[h] = -INFINITY;
  std::memset(job.l_lanes, 0, sizeof(float) * size_t(job.heads) * Isa::kLanes);
  std::memset(job.acc, 0, sizeof(float) * size_t(job.heads) * size_t(job.d));
  if (int_key_scores(layer.k.type, job.d)) {
    if (layer.k.type == KvType::INT8) prepare_int_query<Isa, KvType::INT8>(job);
    if (layer.k.type == KvType::INT4) prepare_int_query<Isa, KvType::INT4>(job);
  }
  if (job.ints.value_groups) {
    std::memset(job.ints.value_min_terms, 0, sizeof(float) * size_t(job.heads) * size_t(job.ints.value_groups) * Isa::kLanes);
    std::memset(job.ints.value_acc, 0, sizeof(float) * size_t(job.heads) * size_t(simd_value_units(job.d)) * 64);
  }
}

template <class Isa>
void finish_weighted_values(const GroupJob& job, KvType v_type) {
  if (v_type == KvType::INT8) WeightedValues<Isa, KvType::INT8>::finish(job);
  if (v_type == KvType::INT4) WeightedValues<Isa, KvType::INT4>::finish(job);
}

template <class Isa>
void finish_group(const GroupJob& job, const PagedKvLayer& layer, int32_t first_token) {
  constexpr int W = Isa::kLanes;
  if (job.ints.value_groups) {
    add_value_min_terms<Isa>(job, layer.v.type);
    finish_weighted_values<Isa>(job, layer.v.type);
  }
  for (int32_t h = 0; h < job.heads; ++h) job.l[h] = Isa::reduce_add(Isa::load(job.l_lanes + h * W));
  // A sink joins the sum as one more row, in base 2 like the scores.
  for (int32_t h = 0; h < job.heads && job.sinks; ++h) job.l[h] += std::exp2(job.sinks[h] * kLog2e - job.m[h]);
  for (int32_t h = 0; h < job.heads; ++h) {
    const typename Isa::Vec inv_l = Isa::set1(1.0f / job.l[h]);
    for (int32_t c = 0; c < job.d; c += W) {
      Isa::store(job.out + h * job.d + c, Isa::mul(Isa::load(job.acc + h * job.d + c), inv_l));
    }
  }
  if (job.weights) normalize_weights(job, first_token);
}

// One tile's three steps for one kv head.
template <class Isa>
void attend_tile(const RowTile<Isa>& tile, const GroupJob& job, int32_t first, TileFn<Isa> scores, TileFn<Isa> values) {
  scores(tile, job);
  if (job.weights) keep_scores<Isa>(job, first, tile.rows);
  softmax_tiles<Isa>(job, 1);
  values(tile, job);
}

// Where values are weighed by codes, tile j of a run of `run` tiles (simd_value_run; run_tiles
// [0..j] the run so far): its scores; after the run's last tile, or the cached rows' last (which
// may end a run early, the missing tiles weighed 0), the softmax and the values of the whole run.
template <class Isa>
void attend_run_tile(const RowTile<Isa>* const* run_tiles, int32_t j, int32_t run, const GroupJob& job, int32_t first,
                     bool last, TileFn<Isa> scores, RunFn<Isa> run_values) {
  constexpr int W = Isa::kLanes;
  const RowTile<Isa>& tile = *run_tiles[j];
  GroupJob part = job;
  part.p += j * W;
  scores(tile, part);
  if (part.weights) keep_scores<Isa>(part, first, tile.rows);
  if (j + 1 < run && !last) return;
  softmax_tiles<Isa>(job, j + 1);
  ValueRows rows;
  rows.rows = j * W + tile.rows;
  for (int32_t k = 0; k < run; ++k) {
    for (int32_t r = 0; r < W; ++r) rows.v[k * W + r] = k <= j ? run_tiles[k]->v[r] : run_tiles[0]->v[0];
  }
  for (int32_t h = 0; h < job.heads; ++h) {
    for (int32_t r = (j + 1) * W; r < run * W; r += W) Isa::store(job.p + h * job.p_stride + r, Isa::zero());
  }
  run_values(rows, job);
}

// Tiles outside, kv heads inside: a block stores every kv head's rows next to each other
// ([block][kv_head][row]), so when one call covers several kv heads, one tile of W positions
// reads each block it touches as one contiguous run, and the next tile's runs are prefetched
// a whole tile ahead. (The engine calls once per kv head, to spread heads over threads.) Up to
// kBatch kv heads at a time, their jobs made once; each tile's rows are located while the tile
// before computes (prefetched), then used; the run's earlier tiles stay for its values.
template <class Isa>
void paged_attention_simd(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  constexpr int W = Isa::kLanes;
  static_assert(W <= kSimdMaxLanes);
  const int32_t d = layer.head_dim;
  KVDESK_ASSERT(seq.num_tokens > 0 && d % W == 0 && args.num_heads % layer.num_kv_heads == 0);
  KVDESK_ASSERT(args.first_token >= 0 && args.first_token < seq.num_tokens);
  KVDESK_ASSERT(args.recent_count >= 0 && args.recent_count <= seq.num_tokens - args.first_token);
  const int32_t groups = layer.num_kv_heads;
  const int32_t group_heads = args.num_heads / groups;
  const TileFn<Isa> scores = scores_fn<Isa>(layer.k.type, d);
  const TileFn<Isa> values = values_fn<Isa>(layer.v.type);
  const RunFn<Isa> run_values = run_values_fn<Isa>(layer.v.type);
  const int32_t run = run_values ? simd_value_run(layer.v.type, Isa::kIsa) / W : 1;
  const size_t k_row_bytes = kv_row_bytes(layer.k.type, d);
  const size_t v_row_bytes = kv_row_bytes(layer.v.type, d);
  // The cached rows, then the recent ones in f32 (tiles do not straddle the two).
  PagedSeq cached = seq;
  cached.num_tokens = seq.num_tokens - args.recent_count;
  const int32_t tiles_cached = (cached.num_tokens - args.first_token + W - 1) / W;
  constexpr int32_t kBatch = 8;
  GroupJob jobs[kBatch];
  constexpr int32_t kRing = kSimdMaxValueRun / W + 1;
  RowTile<Isa> tiles[kRing][kBatch];   // [tile index % kRing]: the run so far, and the next tile
  for (int32_t g0 = 0; g0 < groups; g0 += kBatch) {
    const int32_t batch = groups - g0 < kBatch ? groups - g0 : kBatch;
    for (int32_t i = 0; i < batch; ++i) {
      jobs[i] = group_job<Isa>(layer, args, seq.num_tokens, g0 + i, group_heads);
      start_group<Isa>(jobs[i], layer);
      if (tiles_cached > 0) locate_rows(layer, cached, g0 + i, args.first_token, tiles[0][i]);
    }
    for (int32_t t = 0, j = 0; t < tiles_cached; ++t, j = j + 1 == run ? 0 : j + 1) {   // j: t's place in its run
      const int32_t first = args.first_token + t * W;
      if (t + 1 < tiles_cached) {
        for (int32_t i = 0; i < batch; ++i) {
          locate_rows(layer, cached, g0 + i, first + W, tiles[(t + 1) % kRing][i]);
          prefetch_rows(tiles[(t + 1) % kRing][i], k_row_bytes, v_row_bytes);
        }
      }
      for (int32_t i = 0; i < batch; ++i) {
        if (run_values) {
          const RowTile<Isa>* run_tiles[kRing];
          for (int32_t k = 0; k <= j; ++k) run_tiles[k] = &tiles[(t - j + k) % kRing][i];
          attend_run_tile(run_tiles, j, run, jobs[i], first, t + 1 == tiles_cached, scores, run_values);
        } else {
          attend_tile(tiles[t % kRing][i], jobs[i], first, scores, values);
        }
      }
    }
    for (int32_t first = cached.num_tokens; first < seq.num_tokens; first += W) {
      for (int32_t i = 0; i < batch; ++i) {
        locate_recent_rows(args, d, g0 + i, cached.num_tokens, first, seq.num_tokens, tiles[0][i]);
        attend_tile(tiles[0][i], jobs[i], first, &Scores<Isa, KvType::F32>::tile, &Values<Isa, KvType::F32>::tile);
      }
    }
    for (int32_t i = 0; i < batch; ++i) finish_group<Isa>(jobs[i], layer, args.first_token);
  }
}

}  // namespace
}  // namespace kvdesk
