// Perplexity and KV-quality comparison (see perplexity.h). Each window runs through
// Model::forward in chunks; a chunk's logits are scored (and compared with the reference run's
// chunk) as they come, so memory stays at a chunk of logits per run.
#include "engine/lab/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"

namespace kvdesk {
namespace {

constexpr int32_t kChunkTokens = 256;   // positions per forward call

}  // namespace

RowStats row_stats(const float* z, int32_t n) {
  RowStats r;
  r.argmax = int32_t(std::max_element(z, z + n) - z);
  const double max = z[r.argmax];
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(z[i]) - max);
  r.log_sum_exp = max + std::log(sum);
  return r;
}

// KL(p || q) = sum_i p[i] (log p[i] - log q[i]) for two logits rows.
double kl_divergence(const float* zp, const RowStats& p, const float* zq, const RowStats& q, int32_t n) {
  double kl = 0;
  for (int32_t i = 0; i < n; ++i) {
    const double log_p = zp[i] - p.log_sum_exp;
    kl += std::exp(log_p) * (log_p - (zq[i] - q.log_sum_exp));
  }
  return std::max(kl, 0.0);   // rounding can leave a tiny negative for identical rows
}

int32_t scoring_window(const Model& model, int32_t requested, int32_t min_tokens) {
  const int32_t context = model.config().context_length;
  const int32_t ctx = requested > 0 ? requested : std::min(context, 512);
  if (ctx < min_tokens || ctx > context) {
    throw Error("a window of " + std::to_string(ctx) + " tokens does not fit: choose --ctx between " +
                std::to_string(min_tokens) + " and " + std::to_string(context) + " (the model's context)");
  }
  return ctx;
}

namespace {

// One KV cache holding one window at a time: feeds a chunk, returns its logits.
class WindowRun {
 public:
  WindowRun(Model& model, ThreadPool& pool, const KvLayout& layout, int32_t ctx)
      : model_(model), pool_(pool), kv_(model.config(), cache_config(layout, ctx)) {}

  void begin_window() { seq_ = kv_.create_sequence(); }
  void end_window() { kv_.free_sequence(seq_); }

  // Runs positions [first, first + tokens.size()) of the window; rows for positions < scored_end.
  const std::vector<float>& forward(std::span<const int32_t> tokens, int32_t first, int32_t scored_end) {
    const bool appended = kv_.append(seq_, tokens);
    KVDESK_ASSERT(appended);   // the pool holds a whole window
    ForwardBatch batch;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int32_t pos = first + int32_t(i);
      batch.add(tokens[i], pos, seq_, pos < scored_end);
    }
    model_.forward(batch, kv_, pool_, logits_);
    kv_.mark_computed(seq_, first + int32_t(tokens.size()));
    return logits_;
  }

 private:
  // A pool of exactly one window; windows differ, so nothing is worth caching by prefix.
  static KvCacheConfig cache_config(const KvLayout& layout, int32_t ctx) {
    KvCacheConfig config;
    config.layout = layout;
    config.layout.num_blocks = (ctx + layout.block_size - 1) / layout.block_size;
    config.prefix_caching = false;
    return config;
  }

  Model& model_;
  ThreadPool& pool_;
  KvCache kv_;
  SeqId seq_ = -1;
  std::vector<float> logits_;   // [rows][vocab]
};

struct Totals {
  double nll = 0;
  double nll_ref = 0;
  double kl = 0;
  double kl_max = 0;
  int64_t agree = 0;
};


}  // namespace

PerplexityResult evaluate_perplexity(Model& model, ThreadPool& pool, std::span<const int32_t> text,
                                     const PerplexityOptions& options) {
  PerplexityResult result;
  result.ctx = scoring_window(model, options.ctx, 2);
  const bool has_bos = options.bos >= 0;
  const size_t text_per_window = size_t(result.ctx - (has_bos ? 1 : 0));
  const int32_t vocab = model.config().vocab_size;
  WindowRun run(model, pool, options.layout, result.ctx);
  std::optional<WindowRun> ref_run;
  if (options.reference) ref_run.emplace(model, pool, *options.reference, result.ctx);

  Totals totals;
  std::vector<int32_t> window;
  for (size_t start = 0; start < text.size(); start += text_per_window) {
    window.assign(has_bos ? 1 : 0, options.bos);
    window.insert(window.end(), text.begin() + start, text.begin() + std::min(text.size(), start + text_per_window));
    const int32_t len = int32_t(window.size());
    run.begin_window();
    if (ref_run) ref_run->begin_window();
    for (int32_t first = 0; first < len; first += kChunkTokens) {
      const std::span<const int32_t> chunk(window.data() + first, size_t(std::min(len - first, kChunkTokens)));
      // Position p predicts window[p + 1]: every position but the window's last is scored.
      const std::vector<float>& logits = run.forward(chunk, first, len - 1);
      const std::vector<float>* ref_logits = ref_run ? &ref_run->forward(chunk, first, len - 1) : nullptr;
      for (int32_t p = first; p < std::min(first + int32_t(chunk.size()), len - 1); ++p) {
        const float* z = logits.data() + size_t(p - first) * size_t(vocab);
        const RowStats s = row_stats(z, vocab);
        const int32_t target = window[size_t(p) + 1];
        totals.nll -= z[target] - s.log_sum_exp;
        result.argmax.push_back(s.argmax);
        if (!ref_logits) continue;
        const float* zr = ref_logits->data() + size_t(p - first) * size_t(vocab);
        const RowStats r = row_stats(zr, vocab);
        totals.nll_ref -= zr[target] - r.log_sum_exp;
        const double kl = kl_divergence(zr, r, z, s, vocab);
        totals.kl += kl;
        totals.kl_max = std::max(totals.kl_max, kl);
        totals.agree += s.argmax == r.argmax;
      }
    }
    run.end_window();
    if (ref_run) ref_run->end_window();
  }

  result.tokens = int64_t(result.argmax.size());
  if (result.tokens == 0) throw Error("the text has no token to score (it needs at least one token after BOS)");
  const double n = double(result.tokens);
  result.ppl = std::exp(totals.nll / n);
  if (ref_run) {
    result.ppl_ref = std::exp(totals.nll_ref / n);
    result.kl_mean = totals.kl / n;
    result.kl_max = totals.kl_max;
    result.top1_agree = 100.0 * double(totals.agree) / n;
  }
  return result;
}

}  // namespace kvdesk
