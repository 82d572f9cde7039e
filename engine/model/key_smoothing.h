// Key smoothing (SageAttention's idea, with per-model constants): a quantized K type stores
// k - mu, mu the mean key of its layer and kv head. Each score of a query then moves by the same
// q·mu, which the softmax ignores, so attention is unchanged in exact arithmetic; what changes is
// the rows' range. stories260K's keys carry a large, mostly constant part in one channel pair
// (|k| up to 28 among values of a few units): removing it narrows every row.
//
// The integer K types (int8, int4) also scale each channel: they store D^-1 (k - mu) and attention
// reads it with the query D q, so q'·k' = q·(k - mu) still holds exactly (D diagonal, after RoPE).
// A key's quantization error e moves a score by (D q)·e, and the Hadamard rotation those rows go
// through (kernels/hadamard.h) spreads e evenly over channels with a step proportional to the
// row's norm, so the expected squared score error is about |D^-1 (k - mu)|^2 |D q|^2 times a
// constant; by Cauchy-Schwarz it is smallest when D_c^2 = sigma_k(c) / sigma_q(c), sigma_k the
// RMS of k - mu and sigma_q that of the queries (over the kv head's query heads) in channel c.
// Channels with large queries get finer steps. D is tied within each RoPE pair (the pair's
// mean squares), so it commutes with RoPE and holds at any position, not just the measured ones.
// Measured on stories260K (kvdesk-cli perplexity, 1427 tokens, mean KL vs f32 KV): int8 2.1e-4
// -> 1.6e-4, int4 8.4e-2 -> 5.5e-2. fp8 rows keep D = 1: a float format's error is relative to
// each value, so a diagonal scale cancels out (measured 9.6e-3 -> 1.0e-2, noise).
//
// Valid only while every key a query reads went through the same mu and D, so both are constants
// of the model: measured once, with f32 KV, on a built-in text (key_smoothing_text); shared
// prefix blocks, swapped and saved KV all keep them. Measured on another machine's kernels they
// differ in their last bits, which moves the scores of mixed keys by about 1e-6: harmless.
// Soft-capped scores (Gemma 2) and scores that share the softmax with a fixed sink logit (gpt-oss)
// are not shift invariant, so such models keep plain keys. After
// RoPE the channel pair that carries the constant part still turns slowly with position (0.5 rad
// over 512 tokens in stories260K), so the statistics are taken over 256 positions, not a handful.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv_snapshot.h"
#include "engine/model/model_config.h"

namespace kvdesk {

class Model;
class ThreadPool;

// Whether a pool of this layout stores smoothed keys for this model: quantized K types (fp8,
// int8, int4) in models whose attention scores are neither soft-capped nor beside sink logits.
bool kv_keys_smoothed(const KvLayout& layout, const ModelConfig& config);

// Whether its smoothed keys are also scaled by D^-1 (and its queries by D): int8 and int4 keys.
bool kv_keys_scaled(const KvLayout& layout, const ModelConfig& config);

// The model's constants of key smoothing, each [layers][kv_dim]; all empty when the measuring
// text gives fewer than two tokens. Invariant: scale * inverse_scale == 1 up to rounding, every
// scale finite and positive, equal within each RoPE pair.
struct KeySmoothing {
  std::vector<float> mean;            // mu
  std::vector<float> scale;           // D, multiplies the queries
  std::vector<float> inverse_scale;   // 1 / D, multiplies k - mu
  bool empty() const { return mean.empty(); }
};

// mu, the mean post-RoPE key, and D from the RMS of k - mu and of the queries, over positions 1..
// of key_smoothing_text (BOS, an attention sink with a key of its own, left out) run through
// model with f32 KV.
KeySmoothing measure_key_smoothing(const Model& model, ThreadPool& pool);

// One token's keys k [kv_heads][head_dim] of layer into what the rows store: k - mu, times 1 / D
// when scaled.
void smooth_keys(const KeySmoothing& s, int32_t layer, bool scaled, float* k, const ModelConfig& c);

// One token's queries q [heads][head_dim] of layer times D of their kv head: the queries that
// read scaled keys.
void scale_queries(const KeySmoothing& s, int32_t layer, float* q, const ModelConfig& c);

// Plain English prose (any tokenizer encodes it): about 200 tokens of a large vocabulary, more of
// a small one (stories260K's: the 256 measured).
const char* key_smoothing_text();

}  // namespace kvdesk
