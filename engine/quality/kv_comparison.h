// KV comparison: a text scored under several KV layouts, each position's next-token
// distribution compared with a reference layout's (KL divergence, top-1 agreement), through the
// engine step and the caller's forward backend, so it measures what a chat with that layout
// computes. The text is cut into windows of ctx tokens (each starting with BOS); every window
// runs once with the reference layout, whose rows are kept, then once with each layout, compared
// row by row as its chunks come: the reference costs one run per window whatever the number of
// layouts, and memory stays at one window of reference rows. It advances one forward step at a
// time, so a caller can interleave it with other work (the engine measures in its idle time).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/engine_types.h"
#include "engine/kv/kv_storage.h"

namespace kvdesk {

class ForwardBackend;
class Model;

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

// What one layout gave over the whole text.
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

struct KvComparisonOptions {
  std::vector<KvLayout> layouts;      // [layouts] scored, in this order (num_blocks is sized here)
  std::optional<KvLayout> reference;  // when set: every layout is compared with it
  int32_t ctx = 0;                    // tokens per window, BOS included; 0: min(model context, 512)
  int32_t bos = -1;                   // token starting every window; -1: none
  int32_t chunk_tokens = 256;         // positions per forward step
};

class KvComparison {
 public:
  // text: the tokens to score, without BOS. Throws kvdesk::Error for a text with no token to
  // score, a window the model cannot hold or no layout. model and forward must outlive this.
  KvComparison(Model& model, ForwardBackend& forward, std::vector<int32_t> text, const KvComparisonOptions& options);
  ~KvComparison();
  KvComparison(const KvComparison&) = delete;
  KvComparison& operator=(const KvComparison&) = delete;

  // Runs one forward step (at most chunk_tokens positions of one layout's window); false once
  // every layout has been scored. Throws kvdesk::Error when the engine step fails.
  bool step();
  bool done() const;
  // Layouts whose result is final: the first finished() of options.layouts.
  size_t finished() const;
  // Layout i's result; final once i < finished().
  PerplexityResult result(size_t layout) const;

 private:
  struct Totals;
  class WindowRun;

  void start_run();
  void score_chunk(const Event& chunk);
  void end_run();

  Model& model_;
  ForwardBackend& forward_;
  const std::vector<int32_t> text_;
  KvComparisonOptions options_;
  int32_t ctx_ = 0;
  int32_t vocab_ = 0;
  size_t text_per_window_ = 0;
  // Where the comparison is: window_start_ is the text offset of the current window; run_ is -1
  // for the reference's run of it, else the index of the layout running it.
  size_t window_start_ = 0;
  int32_t run_ = 0;
  std::vector<int32_t> window_;            // [window tokens] BOS first when there is one
  std::unique_ptr<WindowRun> window_run_;  // the current run; null between runs
  // The reference run's rows of the current window, by scored position.
  std::vector<float> reference_rows_;      // [window tokens - 1][vocab]
  std::vector<RowStats> reference_stats_;  // [window tokens - 1]
  double reference_nll_ = 0;               // over every window the reference has run
  std::vector<Totals> totals_;             // [layouts]
};

}  // namespace kvdesk
