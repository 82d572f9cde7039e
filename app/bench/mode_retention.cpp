// kvdesk-bench quality --retention: what each KV retention policy costs in quality at each
// budget, against the full cache on the same text (engine/lab/retention_quality.h): KL divergence,
// top-1 agreement and perplexity over the decoded part of each window, KV kept and peak blocks;
// and query-agnostic reuse: half a window compressed once, then two different continuations
// (the text's own next tokens, and a passage from elsewhere in it) each scored vs the full cache.
#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/lab/retention_quality.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::bench {
namespace {

std::vector<RetentionPolicy> policies_of(const std::vector<std::string>& names) {
  if (names.size() == 1 && names[0] == "all") return {RetentionPolicy::Sinks, RetentionPolicy::H2O, RetentionPolicy::SnapKV};
  std::vector<RetentionPolicy> out;
  for (const std::string& n : names) out.push_back(parse_retention_policy(n));
  return out;
}

// The reuse prompt (BOS + half a window) and two continuations of a quarter window each.
struct ReuseCase {
  std::vector<int32_t> prompt;
  std::vector<std::vector<int32_t>> continuations;
};

ReuseCase reuse_case(const std::vector<int32_t>& text, int32_t ctx, int32_t bos) {
  const size_t half = size_t(ctx / 2), quarter = size_t(ctx / 4);
  if (text.size() < half + 3 * quarter) throw Error("the text is too short for the reuse test: it needs " +
                                                    std::to_string(half + 3 * quarter) + " tokens");
  ReuseCase r;
  if (bos >= 0) r.prompt.push_back(bos);
  r.prompt.insert(r.prompt.end(), text.begin(), text.begin() + ptrdiff_t(half - r.prompt.size()));
  const size_t next = half - (bos >= 0 ? 1 : 0);
  r.continuations.emplace_back(text.begin() + ptrdiff_t(next), text.begin() + ptrdiff_t(next + quarter));
  const size_t far = text.size() - quarter;
  r.continuations.emplace_back(text.begin() + ptrdiff_t(far), text.end());
  return r;
}

}  // namespace

Report run_retention_quality(const BenchOptions& o, Model& model, const std::vector<int32_t>& tokens,
                             const std::string& text_source) {
  ThreadPool pool(resolve_threads(o.knobs.threads));
  RetentionQualityOptions base;
  base.layout.block_size = o.knobs.block_size;
  base.ctx = o.ctx > 0 ? o.ctx : std::min(model.config().context_length, 512);
  base.prompt_tokens = o.retention_prompt;
  base.bos = model.tokenizer().bos_id();
  const ReuseCase reuse = reuse_case(tokens, base.ctx, base.bos);
  Report r;
  r.mode = "quality";
  r.repeated = false;
  Table t{"KV retention vs the full cache (f32 KV)",
          {"policy", "keep", "KV kept %", "peak blocks (full)", "perplexity (full)", "KL mean", "KL max",
           "top-1 %", "reuse A: KL / top-1 %", "reuse B: KL / top-1 %"},
          {}};
  Plot p{"kl", "Mean KL divergence from the full cache", "policy @ keep", "nats", {}, {{"KL mean", {}, {}}}};
  nlohmann::json rows = nlohmann::json::array();
  for (RetentionPolicy policy : policies_of(o.retention_policies)) {
    for (const std::string& keep : o.kv_keep) {
      if (stop_requested()) break;
      RetentionQualityOptions qo = base;
      qo.retention.policy = policy;
      qo.retention.budget = parse_retention_budget(keep);
      const RetentionQualityResult q = evaluate_retention(model, pool, tokens, qo);
      const std::vector<RetentionQualityResult> ru = evaluate_reuse(model, pool, reuse.prompt, reuse.continuations, qo);
      const std::string name = retention_policy_name(policy);
      const std::string budget = qo.retention.budget.describe();
      progress("retention " + name + " " + budget + ": KL " + format_number(q.kl_mean, 5) + ", top-1 " +
               format_number(q.top1_agree, 1) + "%");
      t.rows.push_back({name, budget, format_number(q.kept_pct, 1),
                        std::to_string(q.peak_blocks) + " (" + std::to_string(q.peak_blocks_ref) + ")",
                        format_number(q.ppl, 3) + " (" + format_number(q.ppl_ref, 3) + ")", format_number(q.kl_mean, 5),
                        format_number(q.kl_max, 3), format_number(q.top1_agree, 1),
                        format_number(ru[0].kl_mean, 4) + " / " + format_number(ru[0].top1_agree, 1),
                        format_number(ru[1].kl_mean, 4) + " / " + format_number(ru[1].top1_agree, 1)});
      p.categories.push_back(name + " @ " + budget);
      p.series[0].y.push_back(q.kl_mean);
      const auto reuse_json = [](const RetentionQualityResult& x) {
        return nlohmann::json{{"kl_mean", x.kl_mean}, {"top1_agree", x.top1_agree}, {"ppl", x.ppl},
                              {"ppl_ref", x.ppl_ref}, {"kept_pct", x.kept_pct}, {"tokens", x.tokens}};
      };
      rows.push_back({{"policy", name}, {"keep", keep}, {"kept_pct", q.kept_pct},
                      {"memory_saved_pct", 100.0 - q.kept_pct}, {"peak_blocks", q.peak_blocks},
                      {"peak_blocks_full", q.peak_blocks_ref}, {"ppl", q.ppl}, {"ppl_full", q.ppl_ref},
                      {"kl_mean", q.kl_mean}, {"kl_max", q.kl_max}, {"top1_agree", q.top1_agree},
                      {"tokens", q.tokens}, {"reuse_a", reuse_json(ru[0])}, {"reuse_b", reuse_json(ru[1])}});
    }
  }
  r.partial = stop_requested();
  r.settings = {{"text", text_source},         {"text_tokens", tokens.size()}, {"ctx", base.ctx},
                {"prompt_tokens", base.prompt_tokens > 0 ? base.prompt_tokens : base.ctx / 4},
                {"reference", "full cache, f32"}, {"block_size", o.knobs.block_size},
                {"reuse_prompt_tokens", reuse.prompt.size()}, {"reuse_continuation_tokens", reuse.continuations[0].size()}};
  r.results["retention"] = rows;
  r.tables.push_back(t);
  r.plots.push_back(p);
  r.notes.push_back(
      "Each window: its first prompt tokens are prefilled, the rest decoded one token at a time with the policy "
      "evicting as it goes; KL is KL(full || retained) over the decoded positions, top-1 the share whose most likely "
      "token matches the full cache's, KV kept the mean share of seen tokens still cached (memory saved = 100 - kept). "
      "Reuse: half a window is compressed once, then A (the text's own continuation) and B (a passage from the end "
      "of the text) each run from a fork of it.");
  return r;
}

}  // namespace kvdesk::bench
