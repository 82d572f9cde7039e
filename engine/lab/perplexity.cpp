// Perplexity (see perplexity.h): one layout, and the reference when asked for, through the
// engine's KV comparison on the CPU forward pass.
#include "engine/lab/perplexity.h"

#include "engine/backend/forward_backend.h"

namespace kvdesk {

PerplexityResult evaluate_perplexity(Model& model, ThreadPool& pool, std::span<const int32_t> text,
                                     const PerplexityOptions& options) {
  CpuForward forward(model, pool);
  KvComparisonOptions comparison;
  comparison.layouts = {options.layout};
  comparison.reference = options.reference;
  comparison.ctx = options.ctx;
  comparison.bos = options.bos;
  KvComparison run(model, forward, std::vector<int32_t>(text.begin(), text.end()), comparison);
  while (run.step()) {
  }
  return run.result(0);
}

}  // namespace kvdesk
