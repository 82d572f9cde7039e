// KV comparison (see kv_comparison.h). Each run is one window as a request through the engine
// step that scores its prompt in chunks; a chunk's logits are kept (the reference's) or
// compared with the kept rows (a layout's) as they come.
#include "engine/quality/kv_comparison.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"
#include "engine/runtime/engine_core.h"

namespace kvdesk {

RowStats row_stats(const float* z, int32_t n) {
  RowStats r;
  r.argmax = int32_t(std::max_element(z, z + n) - z);
  const double max = z[r.argmax];
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(z[i]) - max);
  r.log_sum_exp = max + std::log(sum);
  return r;
}

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

// One layout's sums over the windows it has run.
struct KvComparison::Totals {
  double nll = 0;
  double kl = 0;
  double kl_max = 0;
  int64_t agree = 0;
  std::vector<int32_t> argmax;   // [positions scored so far]
};

// One KV cache holding one window, run through the engine step: the window is a request that
// scores its prompt, its logits coming back one step's chunk at a time.
class KvComparison::WindowRun {
 public:
  WindowRun(Model& model, ForwardBackend& forward, const KvLayout& layout, int32_t ctx, int32_t chunk_tokens,
            const std::vector<int32_t>& window)
      : kv_(model.config(), cache_config(layout, ctx, forward)),
        core_(model, forward, kv_, SchedulerLimits{chunk_tokens, 1, PreemptMode::Recompute}) {
    Request request;
    request.max_tokens = 0;
    request.logits = LogitsOutput::Prompt;
    core_.add(kWindowRequest, request, window, EngineCore::Clock::now());
  }

  bool has_work() const { return core_.has_work(); }

  // One engine step; its Logits events are appended to chunks.
  void step(std::vector<Event>& chunks) {
    std::vector<Event> events;
    core_.step(events);
    for (Event& e : events) {
      if (e.kind == EventKind::Error) throw Error(e.text);
      if (e.kind == EventKind::Logits) chunks.push_back(std::move(e));
    }
  }

 private:
  static constexpr RequestId kWindowRequest = 1;

  // A pool of exactly one window, where the forward backend keeps KV; windows differ, so
  // nothing is worth caching by prefix.
  static KvCacheConfig cache_config(const KvLayout& layout, int32_t ctx, const ForwardBackend& forward) {
    KvCacheConfig config;
    config.layout = layout;
    config.layout.num_blocks = kv_blocks_for(ctx, layout.block_size);
    config.prefix_caching = false;
    config.device_pool = forward.kv_pool();
    return config;
  }

  KvCache kv_;
  EngineCore core_;
};

KvComparison::KvComparison(Model& model, ForwardBackend& forward, std::vector<int32_t> text,
                           const KvComparisonOptions& options)
    : model_(model), forward_(forward), text_(std::move(text)), options_(options) {
  if (options_.layouts.empty()) throw Error("no KV layout to score");
  ctx_ = scoring_window(model, options_.ctx, 2);
  vocab_ = model.config().vocab_size;
  const bool has_bos = options_.bos >= 0;
  text_per_window_ = size_t(ctx_ - (has_bos ? 1 : 0));
  // A window scores every position but its last, so a text with no token to score is one
  // whose only window is a lone token.
  if (text_.empty() || (!has_bos && text_.size() == 1)) {
    throw Error("the text has no token to score (it needs at least one token after BOS)");
  }
  for (int32_t t : text_) {
    if (t < 0 || t >= vocab_) throw Error("token id " + std::to_string(t) + " is out of range");
  }
  totals_.resize(options_.layouts.size());
  run_ = options_.reference ? -1 : 0;
}

KvComparison::~KvComparison() = default;

bool KvComparison::done() const { return window_start_ >= text_.size(); }

size_t KvComparison::finished() const {
  if (done()) return options_.layouts.size();
  const bool last_window = window_start_ + text_per_window_ >= text_.size();
  return last_window && run_ > 0 ? size_t(run_) : 0;
}

bool KvComparison::step() {
  if (done()) return false;
  if (!window_run_) start_run();
  std::vector<Event> chunks;
  window_run_->step(chunks);
  for (const Event& chunk : chunks) score_chunk(chunk);
  if (!window_run_->has_work()) end_run();
  return !done();
}

void KvComparison::start_run() {
  if (run_ == (options_.reference ? -1 : 0)) {
    const size_t end = std::min(text_.size(), window_start_ + text_per_window_);
    window_.assign(options_.bos >= 0 ? 1 : 0, options_.bos);
    window_.insert(window_.end(), text_.begin() + std::ptrdiff_t(window_start_), text_.begin() + std::ptrdiff_t(end));
  }
  const KvLayout& layout = run_ < 0 ? *options_.reference : options_.layouts[size_t(run_)];
  window_run_ = std::make_unique<WindowRun>(model_, forward_, layout, ctx_, options_.chunk_tokens, window_);
}

void KvComparison::end_run() {
  window_run_.reset();
  if (++run_ < int32_t(options_.layouts.size())) return;
  window_start_ += text_per_window_;
  run_ = options_.reference ? -1 : 0;
}

// Position p predicts window[p + 1]: every position but the window's last is scored.
void KvComparison::score_chunk(const Event& chunk) {
  const int32_t len = int32_t(window_.size());
  const int32_t rows = int32_t(chunk.logits.size() / size_t(vocab_));
  const int32_t end = std::min(chunk.position + rows, len - 1);
  if (run_ < 0) {
    reference_rows_.resize(size_t(len - 1) * size_t(vocab_));
    reference_stats_.resize(size_t(len - 1));
  }
  for (int32_t p = chunk.position; p < end; ++p) {
    const float* z = chunk.logits.data() + size_t(p - chunk.position) * size_t(vocab_);
    const RowStats s = row_stats(z, vocab_);
    const int32_t target = window_[size_t(p) + 1];
    if (run_ < 0) {
      std::copy(z, z + vocab_, reference_rows_.begin() + std::ptrdiff_t(size_t(p) * size_t(vocab_)));
      reference_stats_[size_t(p)] = s;
      reference_nll_ -= z[target] - s.log_sum_exp;
      continue;
    }
    Totals& t = totals_[size_t(run_)];
    t.nll -= z[target] - s.log_sum_exp;
    t.argmax.push_back(s.argmax);
    if (!options_.reference) continue;
    const float* zr = reference_rows_.data() + size_t(p) * size_t(vocab_);
    const RowStats& r = reference_stats_[size_t(p)];
    const double kl = kl_divergence(zr, r, z, s, vocab_);
    t.kl += kl;
    t.kl_max = std::max(t.kl_max, kl);
    t.agree += s.argmax == r.argmax;
  }
}

PerplexityResult KvComparison::result(size_t layout) const {
  const Totals& t = totals_.at(layout);
  PerplexityResult r;
  r.ctx = ctx_;
  r.tokens = int64_t(t.argmax.size());
  r.argmax = t.argmax;
  if (r.tokens == 0) return r;
  const double n = double(r.tokens);
  r.ppl = std::exp(t.nll / n);
  if (options_.reference) {
    // The reference has run every window this layout has, and maybe the next one too.
    r.ppl_ref = std::exp(reference_nll_ / n);
    r.kl_mean = t.kl / n;
    r.kl_max = t.kl_max;
    r.top1_agree = 100.0 * double(t.agree) / n;
  }
  return r;
}

}  // namespace kvdesk
