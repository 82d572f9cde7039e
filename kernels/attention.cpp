// Paged attention, scalar reference: gather each cached row through the block table,
// dequantize it to float, and accumulate softmax(q K^T) V in one online-softmax pass per head.
// cpu:: picks the SIMD kernel for this CPU and head dim, or this reference.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention_int_keys.h"
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

// ref:: keeps q, one row, the accumulator and the quantized query (int16) of one head.
int64_t ref_scratch_floats(int32_t head_dim) { return 4 * int64_t(head_dim); }

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

// Both references: scores from dequantized key rows, or (int_keys) from integer dot products
// of the quantized query with the key codes, as cpu:: computes them (attention_int_keys.h).
void attend(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args, bool int_keys) {
  const int32_t d = layer.head_dim;
  KVDESK_ASSERT(seq.num_tokens > 0 && args.num_heads % layer.num_kv_heads == 0);
  KVDESK_ASSERT(args.first_token >= 0 && args.first_token < seq.num_tokens);
  KVDESK_ASSERT(args.recent_count >= 0 && args.recent_count <= seq.num_tokens - args.first_token);
  const int32_t group = args.num_heads / layer.num_kv_heads;
  const bool compat = args.numerics == AttentionNumerics::LlamaCpp;
  const bool round_q = compat && layer.k.type == KvType::F16;
  const bool round_acc = compat && layer.v.type == KvType::F16;
  float* q = args.scratch;           // [d]
  float* row = args.scratch + d;     // [d]
  float* acc = args.scratch + 2 * d; // [d]
  int16_t* codes = reinterpret_cast<int16_t*>(args.scratch + 3 * d);  // [d] the quantized q
  for (int32_t h = 0; h < args.num_heads; ++h) {
    const int32_t g = h / group;
    for (int32_t i = 0; i < d; ++i) q[i] = round_q ? round_to_fp16(args.q[h * d + i]) : args.q[h * d + i];
    for (int32_t i = 0; i < d; ++i) acc[i] = 0;
    const float q_scale = int_keys ? quantize_query(q, d, codes) : 0.0f;
    float running_max = -INFINITY;
    float running_sum = 0;
    const int32_t recent_first = seq.num_tokens - args.recent_count;
    for (int32_t j = args.first_token; j < seq.num_tokens; ++j) {
      const bool recent = j >= recent_first;
      const int64_t recent_offset = (j - recent_first) * args.recent_stride + int64_t(g) * d;
      float s = 0;
      if (recent) {
        for (int32_t i = 0; i < d; ++i) s += q[i] * args.recent_k[recent_offset + i];
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
      float acc_scale = 1.0f;   // e^(m - m')
      float weight = 1.0f;      // e^(s - m')
      if (s > running_max) {
        acc_scale = std::exp(running_max - s);
        running_max = s;
      } else {
        weight = std::exp(s - running_max);
      }
      if (recent) {
        std::copy_n(args.recent_v + recent_offset, d, row);
      } else {
        paged_kv_read_v(layer, seq, j, g, row);
      }
      for (int32_t i = 0; i < d; ++i) {
        const float a = acc[i] * acc_scale;
        acc[i] = round_acc ? round_to_fp16(round_to_fp16(a) + row[i] * weight) : a + row[i] * weight;
      }
      running_sum = running_sum * acc_scale + weight;
    }
    float* out = args.out + int64_t(h) * d;
    for (int32_t i = 0; i < d; ++i) out[i] = acc[i] / running_sum;
    if (args.weights) {
      float* w = args.weights + int64_t(h) * seq.num_tokens;
      for (int32_t j = 0; j < args.first_token; ++j) w[j] = 0;
      for (int32_t j = args.first_token; j < seq.num_tokens; ++j) w[j] = std::exp(w[j] - running_max) / running_sum;
    }
  }
}

}  // namespace

void paged_attention(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  attend(layer, seq, args, false);
}

void paged_attention_int_keys(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  attend(layer, seq, args, int_key_scores(layer.k.type, layer.head_dim));
}

}  // namespace ref

namespace cpu {

void paged_attention(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  const bool f16_rounding = args.numerics == AttentionNumerics::LlamaCpp &&
                            (layer.k.type == KvType::F16 || layer.v.type == KvType::F16);
  const bool scalar_only = f16_rounding || args.softcap > 0;
  const CpuIsa isa = cpu_isa_active();
  if (!scalar_only && isa == CpuIsa::Avx512 && layer.head_dim % 16 == 0) {
    paged_attention_avx512(layer, seq, args);
  } else if (!scalar_only && isa != CpuIsa::Scalar && layer.head_dim % 8 == 0) {
    paged_attention_avx2(layer, seq, args);
  } else {
    ref::paged_attention(layer, seq, args);
  }
}

}  // namespace cpu
}  // namespace kvdesk
