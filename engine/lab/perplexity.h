// Perplexity of a model over a text, and what a KV storage type costs in quality: the text is
// cut into windows of ctx tokens (each starting with BOS), every token is scored from the
// logits of the position before it, and with a reference KV layout the same windows run twice
// so each position's next-token distribution can be compared with the reference's
// (KL divergence, top-1 agreement): the measure of KV quantization (llama.cpp's
// perplexity --kl-divergence does the same for weights).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/kv/kv_storage.h"

namespace kvdesk {

class Model;
class ThreadPool;

struct PerplexityOptions {
  KvLayout layout;                    // KV types, block size, numerics (num_blocks is sized here)
  std::optional<KvLayout> reference;  // when set: run it too and compare distributions
  int32_t ctx = 0;                    // tokens per window, BOS included; 0: min(model context, 512)
  int32_t bos = -1;                   // token starting every window; -1: none
};

struct PerplexityResult {
  int64_t tokens = 0;            // tokens scored
  int32_t ctx = 0;               // window used
  double ppl = 0;                // exp(mean negative log-likelihood)
  std::vector<int32_t> argmax;   // [tokens] most likely next token at each scored position
  // With a reference layout (else 0):
  double ppl_ref = 0;
  double kl_mean = 0;            // mean over positions of KL(reference || this), nats
  double kl_max = 0;
  double top1_agree = 0;         // % of positions whose most likely token is the reference's
};

// log-softmax of one logits row: log p[i] = z[i] - log_sum_exp.
struct RowStats {
  double log_sum_exp = 0;
  int32_t argmax = 0;
};
RowStats row_stats(const float* z, int32_t n);
// KL(p || q) = sum_i p[i] (log p[i] - log q[i]) for two logits rows and their stats.
double kl_divergence(const float* zp, const RowStats& p, const float* zq, const RowStats& q, int32_t n);
// The scoring window: `requested` tokens, or min(context, 512) when 0. Throws kvdesk::Error
// naming the allowed range when it is under min_tokens or over the model's context.
int32_t scoring_window(const Model& model, int32_t requested, int32_t min_tokens);

// text: the tokens to score, without BOS. Throws kvdesk::Error for an empty text or a window
// the model cannot hold.
PerplexityResult evaluate_perplexity(Model& model, ThreadPool& pool, std::span<const int32_t> text,
                                     const PerplexityOptions& options);

}  // namespace kvdesk
