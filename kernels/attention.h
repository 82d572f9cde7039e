// Attention of one query token (all query heads) over one sequence's cached keys and values,
// read through its block table:
//   for query head h, kv head g = h / (num_heads / num_kv_heads)   (GQA; MQA when 1 kv head)
//     s[j] = scale * dot(q[h], K[g][j])          j in [first_token, seq.num_tokens)
//     s[j] = softcap * tanh(s[j] / softcap)      when softcap > 0 (Gemma 2)
//     p = softmax(s), with the head's sink logit in its sum when the model has one (gpt-oss)
//     out[h] = sum_j p[j] * V[g][j]
// Causality is the caller's: it passes num_tokens = position + 1 for a prompt token, and for a
// sliding-window layer first_token = num_tokens - window.
// One pass over the keys and values with an online softmax (running max m and sum l):
//   m' = max(m, s[j]);  acc = acc * e^(m - m') + V[j] * e^(s[j] - m');  l = l * e^(m - m') + e^(s[j] - m')
// so nothing of size num_tokens is stored and long contexts can later be split into chunks.
// K and V rows are read in their stored KvType and dequantized on the fly (kernels/kv_quant.h).
#pragma once
#include <cstdint>

#include "kernels/attention_int_keys.h"
#include "kernels/attention_int_values.h"
#include "kernels/paged_kv.h"

namespace kvdesk {

struct AttentionArgs {
  const float* q = nullptr;   // [num_heads][head_dim]
  int32_t num_heads = 0;
  float scale = 1.0f;         // usually 1 / sqrt(head_dim)
  float* out = nullptr;       // [num_heads][head_dim]
  float* scratch = nullptr;   // [attention_scratch_floats(num_heads, head_dim)]
  AttentionNumerics numerics = AttentionNumerics::Exact;
  // Optional, for KV retention policies that rank cached tokens by attention (H2O, SnapKV):
  // when set, receives each head's softmax weights p[h][j]. nullptr (the default) costs nothing.
  float* weights = nullptr;   // [num_heads][seq.num_tokens]
  // Gemma-style layers (the CUDA kernels run neither; their backend refuses such models):
  float softcap = 0.0f;       // > 0: scores are soft-capped to (-softcap, softcap)
  int32_t first_token = 0;    // the first cached row attended (sliding window); earlier weights are 0
  // gpt-oss: a learned logit per query head that joins the softmax's denominator as a row with
  // no value would, so a head can attend to nothing: p[j] = e^s[j] / (e^sink + sum_j e^s[j]).
  const float* sinks = nullptr;   // [num_heads] or null
  // The newest recent_count rows, positions [seq.num_tokens - recent_count, seq.num_tokens), are
  // read from these f32 copies instead of the cache: a cache of 8-bit or 4-bit KV keeps each
  // sequence's newest rows at full precision too (engine/kv/recent_rows.h). Row r of kv head g
  // is at recent_k + r * recent_stride + g * head_dim (recent_v alike). recent_count >= 0,
  // at most seq.num_tokens - first_token.
  const float* recent_k = nullptr;   // [recent_count][recent_stride]
  const float* recent_v = nullptr;   // [recent_count][recent_stride]
  int32_t recent_count = 0;
  int64_t recent_stride = 0;         // floats between consecutive rows
};

// Scratch floats of one call with num_heads query heads (ref:: or cpu::).
int64_t attention_scratch_floats(int32_t num_heads, int32_t head_dim);

// Write one token's k[num_kv_heads][head_dim] and v[...] at position pos of a sequence,
// quantized to the layer's K and V types.
void paged_kv_write(const PagedKvLayer& layer, const PagedSeq& seq, int32_t pos,
                    const float* k, const float* v);

// Read back one cached row (tests, CoW checks): out[head_dim].
void paged_kv_read_k(const PagedKvLayer& layer, const PagedSeq& seq, int32_t pos, int32_t kv_head, float* out);
void paged_kv_read_v(const PagedKvLayer& layer, const PagedSeq& seq, int32_t pos, int32_t kv_head, float* out);

// How a kernel rounds over int8 / int4 KV: the quantized query's limit on pairs of codes
// (attention_int_keys.h; 0: none), and the rows per tile whose values it weighs by codes of at
// most weight_code_max (attention_int_values.h; value_tile 0: weighed in f32).
struct IntAttentionScheme {
  int32_t query_pair_max = 0;
  int32_t value_tile = 0;
  int32_t weight_code_max = kValueWeightCodeMax;
};

namespace ref {
// The truth: one key at a time, each row dequantized to f32, std::exp.
void paged_attention(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args);
// The scalar twin of cpu::'s SIMD kernels: as paged_attention, except that scores over int8 /
// int4 keys (head_dim a multiple of 8) come from the query quantized and integer dot products
// with the key codes (kernels/attention_int_keys.h), and, when scheme.value_tile > 0, int8 /
// int4 values are weighted by codes per tile of value_tile cached rows from first_token
// (kernels/attention_int_values.h), as cpu::int_attention_scheme says the SIMD kernel does.
void paged_attention_twin(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args,
                          const IntAttentionScheme& scheme);
}

namespace cpu {
// SIMD (AVX-512 or AVX2, chosen at run time), same result as ref::paged_attention_twin (with
// int_attention_scheme's scheme) up to f32 rounding (which may round a weight code the other way where
// values are weighed by codes): so the same as ref::paged_attention up to f32
// rounding for float and fp8 K/V, and up to the query's rounding for int8 / int4 keys and the
// weights' rounding for int8 / int4 values. Per kv head it runs that head's whole group
// of query heads, so each K/V row is loaded once for the group. Falls back to
// ref::paged_attention for LlamaCpp numerics over f16 K/V, for soft-capped scores and for head
// dims that are not a multiple of 8.
void paged_attention(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args);
// How paged_attention on this CPU rounds over this layer's int8 / int4 KV (value_tile 0 where
// it weighs the values in f32, or runs ref::paged_attention).
IntAttentionScheme int_attention_scheme(const PagedKvLayer& layer, const AttentionArgs& args);
// The same for K / V types and a head dim, with exact numerics and no soft cap.
IntAttentionScheme int_attention_scheme(KvType k_type, KvType v_type, int32_t head_dim);
}

}  // namespace kvdesk
