// Perplexity and KV-quality comparison (see perplexity.h). Each window is a request through
// the engine step that scores its prompt in chunks; a chunk's logits are scored (and compared
// with the reference run's chunk) as they come, so memory stays at a chunk of logits per run.
#include "engine/lab/perplexity.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>

#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"
#include "engine/runtime/engine_core.h"
#include "kernels/check.h"

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

// One KV cache holding one window at a time, run through the engine step: each window is a
// request that scores its prompt, and its logits come back one step's chunk at a time.
class WindowRun {
 public:
  WindowRun(Model& model, ThreadPool& pool, const KvLayout& layout, int32_t ctx)
      : forward_(model, pool),
        kv_(model.config(), cache_config(layout, ctx)),
        core_(model, forward_, kv_, SchedulerLimits{kChunkTokens, 1, PreemptMode::Recompute}) {}

  void start(const std::vector<int32_t>& window) {
    Request request;
    request.max_tokens = 0;
    request.logits = LogitsOutput::Prompt;
    core_.add(kWindowRequest, request, window, EngineCore::Clock::now());
  }

  // The next chunk of logits rows; nullopt when the window is done.
  std::optional<Event> next() {
    while (pending_.empty() && core_.has_work()) {
      std::vector<Event> events;
      core_.step(events);
      for (Event& e : events) {
        if (e.kind == EventKind::Error) throw Error(e.text);
        if (e.kind == EventKind::Logits) pending_.push_back(std::move(e));
      }
    }
    if (pending_.empty()) return std::nullopt;
    Event e = std::move(pending_.front());
    pending_.pop_front();
    return e;
  }

 private:
  static constexpr RequestId kWindowRequest = 1;

  // A pool of exactly one window; windows differ, so nothing is worth caching by prefix.
  static KvCacheConfig cache_config(const KvLayout& layout, int32_t ctx) {
    KvCacheConfig config;
    config.layout = layout;
    config.layout.num_blocks = kv_blocks_for(ctx, layout.block_size);
    config.prefix_caching = false;
    return config;
  }

  CpuForward forward_;
  KvCache kv_;
  EngineCore core_;
  std::deque<Event> pending_;
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
    run.start(window);
    if (ref_run) ref_run->start(window);
    // Both runs take the same chunks, so their rows arrive for the same positions.
    while (std::optional<Event> chunk = run.next()) {
      const std::optional<Event> ref_chunk = ref_run ? ref_run->next() : std::nullopt;
      KVDESK_ASSERT(!ref_run || (ref_chunk && ref_chunk->position == chunk->position));
      const int32_t rows = int32_t(chunk->logits.size() / size_t(vocab));
      // Position p predicts window[p + 1]: every position but the window's last is scored.
      for (int32_t p = chunk->position; p < std::min(chunk->position + rows, len - 1); ++p) {
        const float* z = chunk->logits.data() + size_t(p - chunk->position) * size_t(vocab);
        const RowStats s = row_stats(z, vocab);
        const int32_t target = window[size_t(p) + 1];
        totals.nll -= z[target] - s.log_sum_exp;
        result.argmax.push_back(s.argmax);
        if (!ref_chunk) continue;
        const float* zr = ref_chunk->logits.data() + size_t(p - chunk->position) * size_t(vocab);
        const RowStats r = row_stats(zr, vocab);
        totals.nll_ref -= zr[target] - r.log_sum_exp;
        const double kl = kl_divergence(zr, r, z, s, vocab);
        totals.kl += kl;
        totals.kl_max = std::max(totals.kl_max, kl);
        totals.agree += s.argmax == r.argmax;
      }
    }
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
