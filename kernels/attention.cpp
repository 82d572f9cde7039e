// Paged attention, scalar reference: gather each cached row through the block table,
// dequantize it to float, and accumulate softmax(q K^T) V in one online-softmax pass per head.
// cpu:: picks the SIMD kernel for this CPU and head dim, or this reference.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_int_keys.h"
#include "kernels/attention_int_values.h"
#include "kernels/check.h"
#include "kernels/cpu/attention_isa.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

uint8_t* row_ptr(const PagedKvTensor& t, const PagedSeq& seq, int32_t block_size,
                       int32_t pos, int32_t kv_head) {
  const int32_t block = seq.block_table[pos / block_size];
  return t.data + size_t(block) * t.block_stride + size_t(kv_head) * t.head_stride +
         size_t(pos % block_size) * t.row_stride;
}

float round_to_fp16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// ref:: keeps q, one row, the accumulator with its min terms, the quantized query (int16) of
// one head, and the twin's value tile (attention.cpp Attend).
int64_t ref_scratch_floats(int32_t head_dim) { return 5 * int64_t(head_dim) + 6 * kSimdMaxLanes; }

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return fp16_to_fp32(h);
}

// Code of dim i of an int8 / int4 row.
int32_t int_value_code(KvType type, const uint8_t* row, int32_t head_dim, int32_t i) {
  const uint8_t* values = row + kv_row_values_offset(type, head_dim);
  return type == KvType::INT8 ? values[i] : (values[i / 2] >> (4 * (i % 2))) & 15;
}

}  // namespace

int64_t attention_scratch_floats(int32_t num_heads, int32_t head_dim) {
  return std::max(ref_scratch_floats(head_dim), simd_scratch_floats(num_heads, head_dim));
}

void paged_kv_write(const PagedKvLayer& layer, const PagedSeq& seq, int32_t pos,
                    const float* k, const float* v) {
  KVDESK_ASSERT(pos >= 0 && pos < seq.num_tokens);
  for (int32_t g = 0; g < layer.num_kv_heads; ++g) {
    const float* kg = k + int64_t(g) * layer.head_dim;
    const float* vg = v + int64_t(g) * layer.head_dim;
    ref::quantize_kv_row(layer.k.type, kg, row_ptr(layer.k, seq, layer.block_size, pos, g), layer.head_dim);
    ref::quantize_kv_row(layer.v.type, vg, row_ptr(layer.v, seq, layer.block_size, pos, g), layer.head_dim);
  }
}

void paged_kv_read_k(const PagedKvLayer& layer, const PagedSeq& seq, int32_t pos, int32_t kv_head, float* out) {
  ref::dequantize_kv_row(layer.k.type, row_ptr(layer.k, seq, layer.block_size, pos, kv_head), out, layer.head_dim);
}

void paged_kv_read_v(const PagedKvLayer& layer, const PagedSeq& seq, int32_t pos, int32_t kv_head, float* out) {
  ref::dequantize_kv_row(layer.v.type, row_ptr(layer.v, seq, layer.block_size, pos, kv_head), out, layer.head_dim);
}

namespace ref {
namespace {

// What both references keep of one query head: the running max and sum of the online softmax,
// the accumulator, and (integer values) the f32 min terms of each value group, which scale
// with the accumulator and join it at the end.
struct HeadPass {
  float* acc;                 // [d]
  int32_t d;
  float* min_terms;           // [value groups]
  int32_t value_groups = 0;
  float running_max = -INFINITY;
  float running_sum = 0;

  // A score s joins: returns e^(s - m') and rescales what came before to the new max m'.
  float admit(float s) {
    if (s <= running_max) return std::exp(s - running_max);
    rescale(std::exp(running_max - s), s);
    return 1.0f;
  }
  void rescale(float alpha, float new_max) {
    if (running_max != -INFINITY) {
      for (int32_t i = 0; i < d; ++i) acc[i] *= alpha;
      for (int32_t g = 0; g < value_groups; ++g) min_terms[g] *= alpha;
      running_sum *= alpha;
    }
    running_max = new_max;
  }
};

// Both references: scores from dequantized key rows, or (twin) from integer dot products of
// the quantized query with the key codes, as cpu:: computes them (attention_int_keys.h).
struct Attend {
  const PagedKvLayer& layer;
  const PagedSeq& seq;
  const AttentionArgs& args;
  bool int_keys;
  IntAttentionScheme scheme;   // value_tile > 0: int8 / int4 values weighted by codes over tiles of these rows
  int32_t d = layer.head_dim;
  int32_t recent_first = seq.num_tokens - args.recent_count;
  bool compat = args.numerics == AttentionNumerics::LlamaCpp;
  bool round_q = compat && layer.k.type == KvType::F16;
  bool round_acc = compat && layer.v.type == KvType::F16;
  float* q = args.scratch;            // [d]
  float* row = args.scratch + d;      // [d]
  float* acc = args.scratch + 2 * d;  // [d], then the min terms [value groups]
  int16_t* codes = reinterpret_cast<int16_t*>(args.scratch + 4 * d);  // [d] the quantized q
  float* tile = args.scratch + 5 * d; // [3][scheme.value_tile]: scores, weights, weights * s_g
  float q_scale = 0;

  // Score of cached or recent row j for query head h over kv head g.
  float score(int32_t h, int32_t g, int32_t j) const {
    float s = 0;
    if (j >= recent_first) {
      const float* k = args.recent_k + (j - recent_first) * args.recent_stride + int64_t(g) * d;
      for (int32_t i = 0; i < d; ++i) s += q[i] * k[i];
      s *= args.scale;
    } else if (int_keys) {
      s = int_key_dot(layer.k.type, row_ptr(layer.k, seq, layer.block_size, j, g), codes, d) * (q_scale * args.scale);
    } else {
      paged_kv_read_k(layer, seq, j, g, row);
      for (int32_t i = 0; i < d; ++i) s += q[i] * row[i];
      s *= args.scale;
    }
    if (args.softcap > 0) s = args.softcap * std::tanh(s / args.softcap);
    if (args.weights) args.weights[int64_t(h) * seq.num_tokens + j] = s;
    return s;
  }

  // Row j's value with softmax weight e^(s - m), one row at a time.
  void add_row(HeadPass& pass, int32_t g, int32_t j, float s) const {
    const float weight = pass.admit(s);
    if (j >= recent_first) {
      std::copy_n(args.recent_v + (j - recent_first) * args.recent_stride + int64_t(g) * d, d, row);
    } else {
      paged_kv_read_v(layer, seq, j, g, row);
    }
    for (int32_t i = 0; i < d; ++i) {
      pass.acc[i] = round_acc ? round_to_fp16(round_to_fp16(pass.acc[i]) + row[i] * weight) : pass.acc[i] + row[i] * weight;
    }
    pass.running_sum += weight;
  }

  // Cached rows [first, first + n) with integer-weighted values (attention_int_values.h).
  void add_value_tile(HeadPass& pass, int32_t h, int32_t g, int32_t first, int32_t n) const {
    float* p = tile;
    float* w = tile + scheme.value_tile;
    uint8_t* k = reinterpret_cast<uint8_t*>(tile + 2 * scheme.value_tile);
    float tile_max = -INFINITY;
    for (int32_t r = 0; r < n; ++r) tile_max = std::max(tile_max, p[r] = score(h, g, first + r));
    if (tile_max > pass.running_max) pass.rescale(std::exp(pass.running_max - tile_max), tile_max);
    for (int32_t r = 0; r < n; ++r) pass.running_sum += p[r] = std::exp(p[r] - pass.running_max);
    const KvType type = layer.v.type;
    const int32_t group = kv_row_group(type, d);
    const int32_t center = value_code_center(type);
    const uint8_t* rows[2 * kSimdMaxLanes];
    for (int32_t r = 0; r < n; ++r) rows[r] = row_ptr(layer.v, seq, layer.block_size, first + r, g);
    for (int32_t vg = 0; vg < pass.value_groups; ++vg) {
      for (int32_t r = 0; r < n; ++r) {
        const float scale = f16_at(rows[r] + 4 * vg), min = f16_at(rows[r] + 4 * vg + 2);
        w[r] = p[r] * scale;
        pass.min_terms[vg] += p[r] * (min + float(center) * scale);
      }
      const float step = quantize_value_weights(w, n, scheme.weight_code_max, k);
      const int32_t end = kv_group_end(type, d, vg);
      for (int32_t i = vg * group; i < end; ++i) {
        int32_t sum = 0;
        for (int32_t r = 0; r < n; ++r) sum += int32_t(k[r]) * (int_value_code(type, rows[r], d, i) - center);
        pass.acc[i] += step * float(sum);
      }
    }
  }

  void head(int32_t h) {
    const int32_t g = h / (args.num_heads / layer.num_kv_heads);
    for (int32_t i = 0; i < d; ++i) q[i] = round_q ? round_to_fp16(args.q[h * d + i]) : args.q[h * d + i];
    q_scale = int_keys ? quantize_query(q, d, scheme.query_pair_max, codes) : 0.0f;
    HeadPass pass{acc, d, acc + d, scheme.value_tile > 0 ? kv_row_scales(layer.v.type, d) : 0};
    std::fill_n(acc, d + pass.value_groups, 0.0f);
    int32_t j = args.first_token;
    while (scheme.value_tile > 0 && j < recent_first) {
      const int32_t rows = std::min(scheme.value_tile, recent_first - j);
      add_value_tile(pass, h, g, j, rows);
      j += rows;
    }
    for (; j < seq.num_tokens; ++j) add_row(pass, g, j, score(h, g, j));
    for (int32_t i = 0; i < d && pass.value_groups; ++i) acc[i] += pass.min_terms[kv_group_of(layer.v.type, d, i)];
    if (args.sinks) pass.running_sum += std::exp(args.sinks[h] - pass.running_max);
    float* out = args.out + int64_t(h) * d;
    for (int32_t i = 0; i < d; ++i) out[i] = acc[i] / pass.running_sum;
    if (args.weights) {
      float* w = args.weights + int64_t(h) * seq.num_tokens;
      for (int32_t t = 0; t < args.first_token; ++t) w[t] = 0;
      for (int32_t t = args.first_token; t < seq.num_tokens; ++t) w[t] = std::exp(w[t] - pass.running_max) / pass.running_sum;
    }
  }
};

void attend(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args, bool int_keys,
            const IntAttentionScheme& scheme) {
  KVDESK_ASSERT(seq.num_tokens > 0 && args.num_heads % layer.num_kv_heads == 0);
  KVDESK_ASSERT(args.first_token >= 0 && args.first_token < seq.num_tokens);
  KVDESK_ASSERT(args.recent_count >= 0 && args.recent_count <= seq.num_tokens - args.first_token);
  KVDESK_ASSERT(scheme.value_tile >= 0 && scheme.value_tile <= 2 * kSimdMaxLanes);
  KVDESK_ASSERT(scheme.query_pair_max == 0 || scheme.query_pair_max > 1);
  KVDESK_ASSERT(scheme.weight_code_max > 0 && scheme.weight_code_max <= kValueWeightCodeMax);
  Attend attend{layer, seq, args, int_keys, scheme};
  for (int32_t h = 0; h < args.num_heads; ++h) attend.head(h);
}

}  // namespace

void paged_attention(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  attend(layer, seq, args, false, IntAttentionScheme{});
}

void paged_attention_twin(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args,
                          const IntAttentionScheme& scheme) {
  const bool int_values = layer.v.type == KvType::INT8 || layer.v.type == KvType::INT4;
  IntAttentionScheme twin = scheme;
  if (!int_values) twin.value_tile = 0;
  attend(layer, seq, args, int_key_scores(layer.k.type, layer.head_dim), twin);
}

}  // namespace ref

namespace cpu {
namespace {

enum class Route { Reference, Avx512, AvxVnni, Avx2 };

Route route(int32_t head_dim, bool scalar_only) {
  const CpuIsa isa = cpu_isa_active();
  if (!scalar_only && isa == CpuIsa::Avx512 && head_dim % 16 == 0) return Route::Avx512;
  if (!scalar_only && isa == CpuIsa::AvxVnni && head_dim % 8 == 0) return Route::AvxVnni;
  if (!scalar_only && isa != CpuIsa::Scalar && head_dim % 8 == 0) return Route::Avx2;
  return Route::Reference;
}

Route route(const PagedKvLayer& layer, const AttentionArgs& args) {
  const bool f16_rounding = args.numerics == AttentionNumerics::LlamaCpp &&
                            (layer.k.type == KvType::F16 || layer.v.type == KvType::F16);
  return route(layer.head_dim, f16_rounding || args.softcap > 0);
}

IntAttentionScheme scheme_of(Route route, KvType k_type, KvType v_type) {
  switch (route) {
    case Route::Avx512: return simd_int_scheme(k_type, v_type, CpuIsa::Avx512);
    case Route::AvxVnni: return simd_int_scheme(k_type, v_type, CpuIsa::AvxVnni);
    case Route::Avx2: return simd_int_scheme(k_type, v_type, CpuIsa::Avx2);
    case Route::Reference: return IntAttentionScheme{};
  }
  return IntAttentionScheme{};
}

}  // namespace

void paged_attention(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  switch (route(layer, args)) {
    case Route::Avx512: return paged_attention_avx512(layer, seq, args);
    case Route::AvxVnni: return paged_attention_avxvnni(layer, seq, args);
    case Route::Avx2: return paged_attention_avx2(layer, seq, args);
    case Route::Reference: return ref::paged_attention(layer, seq, args);
  }
}

IntAttentionScheme int_attention_scheme(const PagedKvLayer& layer, const AttentionArgs& args) {
  return scheme_of(route(layer, args), layer.k.type, layer.v.type);
}

IntAttentionScheme int_attention_scheme(KvType k_type, KvType v_type, int32_t head_dim) {
  return scheme_of(route(head_dim, false), k_type, v_type);
}

}  // namespace cpu
}  // namespace kvdesk
