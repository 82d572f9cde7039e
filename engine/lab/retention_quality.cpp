// Retention quality (see retention_quality.h): a full and a retained KV cache fed the same
// tokens; each decoded position's distributions are compared as they come.
#include "engine/lab/retention_quality.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"
#include "engine/lab/perplexity.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

constexpr int32_t kChunkTokens = 256;   // prefill positions per forward call

// One KV cache and the sequences run through it; feeds tokens and returns last-row logits.
class CacheRun {
 public:
  CacheRun(Model& model, ThreadPool& pool, const KvLayout& layout, int32_t blocks)
      : model_(model), pool_(pool), kv_(model.config(), config(layout, blocks)) {}

  KvCache& kv() { return kv_; }

  // Appends tokens at the sequence's next positions; logits of the last one.
  const std::vector<float>& feed(SeqId seq, std::span<const int32_t> tokens) {
    for (size_t first = 0; first < tokens.size(); first += kChunkTokens) {
      const std::span<const int32_t> chunk = tokens.subspan(first, std::min<size_t>(kChunkTokens, tokens.size() - first));
      const int32_t start = kv_.num_tokens(seq);
      const bool appended = kv_.append(seq, chunk);
      KVDESK_ASSERT(appended);   // the pool holds every sequence of a run
      peak_blocks_ = std::max(peak_blocks_, int32_t(kv_.block_table(seq).size()));
      ForwardBatch batch;
      for (size_t i = 0; i < chunk.size(); ++i) batch.add(chunk[i], start + int32_t(i), seq, i + 1 == chunk.size());
      model_.forward(batch, kv_, pool_, logits_);
      kv_.mark_computed(seq, start + int32_t(chunk.size()));
    }
    return logits_;
  }
  int32_t peak_blocks() const { return peak_blocks_; }

 private:
  static KvCacheConfig config(const KvLayout& layout, int32_t blocks) {
    KvCacheConfig c;
    c.layout = layout;
    c.layout.num_blocks = blocks;
    c.prefix_caching = false;
    return c;
  }

  Model& model_;
  ThreadPool& pool_;
  KvCache kv_;
  std::vector<float> logits_;   // [1][vocab]
  int32_t peak_blocks_ = 0;
};

struct Totals {
  double nll = 0, nll_ref = 0, kl = 0, kl_max = 0, kept = 0;
  int64_t agree = 0, tokens = 0;

  // Compares the retained run's logits z with the full run's zr for the next token target.
  void add(const float* z, const float* zr, int32_t vocab, int32_t target, double kept_share) {
    const RowStats s = row_stats(z, vocab);
    const RowStats r = row_stats(zr, vocab);
    nll -= z[target] - s.log_sum_exp;
    nll_ref -= zr[target] - r.log_sum_exp;
    const double d = kl_divergence(zr, r, z, s, vocab);
    kl += d;
    kl_max = std::max(kl_max, d);
    agree += s.argmax == r.argmax;
    kept += kept_share;
    ++tokens;
  }

  RetentionQualityResult result(int32_t peak, int32_t peak_ref) const {
    if (tokens == 0) throw Error("the text leaves no position to score after the prompt: give a longer text");
    const double n = double(tokens);
    return {tokens, std::exp(nll / n), std::exp(nll_ref / n), kl / n, kl_max, 100.0 * double(agree) / n,
            100.0 * kept / n, peak, peak_ref};
  }
};

double kept_share(const KvCache& kv, SeqId seq) { return double(kv.num_slots(seq)) / double(kv.num_tokens(seq)); }

// Decodes tokens one at a time on both runs from logits predicting tokens[0]; scores each.
void decode_and_score(CacheRun& run, SeqId seq, CacheRun& ref, SeqId ref_seq, std::span<const int32_t> tokens,
                      std::vector<float> logits, std::vector<float> ref_logits, int32_t vocab, Totals& totals) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    totals.add(logits.data(), ref_logits.data(), vocab, tokens[i], kept_share(run.kv(), seq));
    if (i + 1 == tokens.size()) break;
    logits = run.feed(seq, tokens.subspan(i, 1));
    ref_logits = ref.feed(ref_seq, tokens.subspan(i, 1));
  }
}


}  // namespace

RetentionQualityResult evaluate_retention(Model& model, ThreadPool& pool, std::span<const int32_t> text,
                                          const RetentionQualityOptions& options) {
  const int32_t ctx = scoring_window(model, options.ctx, 4);
  const int32_t prompt = options.prompt_tokens > 0 ? std::min(options.prompt_tokens, ctx - 1) : ctx / 4;
  const bool has_bos = options.bos >= 0;
  const size_t text_per_window = size_t(ctx - (has_bos ? 1 : 0));
  const int32_t vocab = model.config().vocab_size;
  const int32_t blocks = kv_blocks_for(ctx, options.layout.block_size);
  CacheRun run(model, pool, options.layout, blocks), ref(model, pool, options.layout, blocks);
  Totals totals;
  std::vector<int32_t> window;
  for (size_t start = 0; start < text.size(); start += text_per_window) {
    window.assign(has_bos ? 1 : 0, options.bos);
    window.insert(window.end(), text.begin() + start, text.begin() + std::min(text.size(), start + text_per_window));
    const int32_t len = int32_t(window.size());
    if (len <= prompt) break;
    const SeqId seq = run.kv().create_sequence(), ref_seq = ref.kv().create_sequence();
    run.kv().set_retention(seq, options.retention, prompt);
    const std::span<const int32_t> w(window);
    const std::vector<float> logits = run.feed(seq, w.first(size_t(prompt)));
    const std::vector<float> ref_logits = ref.feed(ref_seq, w.first(size_t(prompt)));
    decode_and_score(run, seq, ref, ref_seq, w.subspan(size_t(prompt)), logits, ref_logits, vocab, totals);
    run.kv().free_sequence(seq);
    ref.kv().free_sequence(ref_seq);
  }
  return totals.result(run.peak_blocks(), ref.peak_blocks());
}

std::vector<RetentionQualityResult> evaluate_reuse(Model& model, ThreadPool& pool, std::span<const int32_t> prompt,
                                                   const std::vector<std::vector<int32_t>>& continuations,
                                                   const RetentionQualityOptions& options) {
  const int32_t context = model.config().context_length;
  size_t longest = 0;
  for (const std::vector<int32_t>& c : continuations) longest = std::max(longest, c.size());
  if (prompt.empty() || int32_t(prompt.size() + longest) > context) {
    throw Error("the reuse prompt (" + std::to_string(prompt.size()) + " tokens) plus its longest continuation (" +
                std::to_string(longest) + ") must fit the model's context of " + std::to_string(context));
  }
  const int32_t vocab = model.config().vocab_size;
  const int32_t blocks = 2 * kv_blocks_for(int32_t(prompt.size() + longest), options.layout.block_size) + 2;
  CacheRun run(model, pool, options.layout, blocks), ref(model, pool, options.layout, blocks);
  const SeqId base = run.kv().create_sequence(), ref_base = ref.kv().create_sequence();
  run.kv().set_retention(base, options.retention, int32_t(prompt.size()));
  const std::vector<float> logits = run.feed(base, prompt);
  const std::vector<float> ref_logits = ref.feed(ref_base, prompt);
  std::vector<RetentionQualityResult> results;
  for (const std::vector<int32_t>& c : continuations) {
    const SeqId seq = run.kv().fork(base), ref_seq = ref.kv().fork(ref_base);
    Totals totals;
    decode_and_score(run, seq, ref, ref_seq, c, logits, ref_logits, vocab, totals);
    results.push_back(totals.result(run.peak_blocks(), ref.peak_blocks()));
    run.kv().free_sequence(seq);
    ref.kv().free_sequence(ref_seq);
  }
  return results;
}

}  // namespace kvdesk
