// What KV retention costs in quality, measured against the full cache on the same text: two
// caches (full, retained) run the same tokens side by side; each window's first prompt_tokens
// are prefilled at once, the rest decoded one token at a time (teacher-forced, so retention
// evicts as a real decode would), and every decoded position's next-token distribution is
// compared (KL divergence, top-1 agreement, perplexity of both). Query-agnostic reuse (a dropped
// token may be needed later): one prompt is compressed once,
// then each of several follow-up continuations runs from a fork of it and is scored alone.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/kv_retention.h"
#include "engine/kv/kv_storage.h"

namespace kvdesk {

class Model;
class ThreadPool;

struct RetentionQualityOptions {
  KvLayout layout;              // KV types, block size (num_blocks is sized here)
  RetentionOptions retention;
  int32_t ctx = 0;              // tokens per window, BOS included; 0: min(model context, 512)
  int32_t prompt_tokens = 0;    // prefilled tokens per window; 0: a quarter of the window
  int32_t bos = -1;             // token starting every window; -1: none
};

struct RetentionQualityResult {
  int64_t tokens = 0;           // positions scored
  double ppl = 0;               // with retention
  double ppl_ref = 0;           // full cache
  double kl_mean = 0;           // mean KL(full || retained), nats
  double kl_max = 0;
  double top1_agree = 0;        // % of positions whose most likely token is the full cache's
  double kept_pct = 0;          // mean over scored positions of rows kept / positions seen
  int32_t peak_blocks = 0;      // most blocks the retained sequence held
  int32_t peak_blocks_ref = 0;  // ... and the full one
};

// text: the tokens to score, without BOS. Throws kvdesk::Error when the text is too short.
RetentionQualityResult evaluate_retention(Model& model, ThreadPool& pool, std::span<const int32_t> text,
                                          const RetentionQualityOptions& options);

// prompt (BOS included when wanted) is prefilled and compressed once; each continuation is
// then decoded from a fork of it: one result per continuation. Throws kvdesk::Error when
// prompt + a continuation exceeds the model's context.
std::vector<RetentionQualityResult> evaluate_reuse(Model& model, ThreadPool& pool, std::span<const int32_t> prompt,
                                                   const std::vector<std::vector<int32_t>>& continuations,
                                                   const RetentionQualityOptions& options);

}  // namespace kvdesk
