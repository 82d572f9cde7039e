// Key smoothing (SageAttention's idea, with a per-model constant): a quantized K type stores
// k - mu, mu the mean key of its layer and kv head. Each score of a query then moves by the same
// q·mu, which the softmax ignores, so attention is unchanged in exact arithmetic; what changes is
// the rows' range. stories260K's keys carry a large, mostly constant part in one channel pair
// (|k| up to 28 among values of a few units): removing it narrows every row.
//
// Valid only while every key a query reads had the same mu subtracted, so mu is a constant of the
// model: measured once, with f32 KV, on a built-in text (key_smoothing_text); shared prefix
// blocks, swapped and saved KV all keep it. Measured on another machine's kernels, mu differs in
// its last bits, which moves the scores of mixed keys by about 1e-6: harmless. Soft-capped scores
// (Gemma 2) are not shift invariant, so such models keep plain keys. After RoPE the channel pair
// that carries the constant part still turns slowly with position (0.5 rad over 512 tokens in
// stories260K), so the mean is taken over 256 positions, not a handful.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv_snapshot.h"
#include "engine/model/model_config.h"

namespace kvdesk {

class Model;
class ThreadPool;

// Whether a pool of this layout stores smoothed keys for this model: quantized K types (fp8,
// int8, int4) in models whose attention scores are not soft-capped.
bool kv_keys_smoothed(const KvLayout& layout, const ModelConfig& config);

// mu [layers][kv_dim]: the mean post-RoPE key over positions 1.. of key_smoothing_text (BOS, an
// attention sink with a key of its own, left out) run through model with f32 KV; empty when the
// text gives fewer than two tokens.
std::vector<float> measure_key_means(const Model& model, ThreadPool& pool);

// Plain English prose (any tokenizer encodes it): about 200 tokens of a large vocabulary, more of
// a small one (stories260K's: the 256 measured).
const char* key_smoothing_text();

}  // namespace kvdesk
