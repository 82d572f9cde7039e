// Perplexity of a model over a text, and what a KV storage type costs in quality: the text is
// cut into windows of ctx tokens (each starting with BOS), every token is scored from the
// logits of the position before it, and with a reference KV layout each position's next-token
// distribution is compared with the reference's (KL divergence, top-1 agreement): the measure
// of KV quantization (llama.cpp's perplexity --kl-divergence does the same for weights). The
// scoring itself is the engine's KV comparison (engine/quality/kv_comparison.h), run here on
// the CPU forward pass.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/kv/kv_storage.h"
#include "engine/quality/kv_comparison.h"

namespace kvdesk {

class Model;
class ThreadPool;

struct PerplexityOptions {
  KvLayout layout;                    // KV types, block size, numerics (num_blocks is sized here)
  std::optional<KvLayout> reference;  // when set: run it too and compare distributions
  int32_t ctx = 0;                    // tokens per window, BOS included; 0: min(model context, 512)
  int32_t bos = -1;                   // token starting every window; -1: none
};

// text: the tokens to score, without BOS. Throws kvdesk::Error for an empty text or a window
// the model cannot hold.
PerplexityResult evaluate_perplexity(Model& model, ThreadPool& pool, std::span<const int32_t> text,
                                     const PerplexityOptions& options);

}  // namespace kvdesk
