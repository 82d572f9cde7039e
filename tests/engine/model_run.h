// A loaded model with a KV cache and the engine step over it, stepped on the test's thread
// (engine/runtime/sync_driver.h): what the CLI runs, for tests that generate or read logits.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/forward_backend.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"
#include "engine/runtime/sync_driver.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::test {

struct ModelRun {
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CpuForward> forward;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<EngineCore> core;

  // A pool of one full context unless config names its blocks; prefill chunk tokens per step.
  ModelRun(std::unique_ptr<Model> loaded, KvCacheConfig config, int threads = 1, int32_t prefill_chunk = 512)
      : model(std::move(loaded)), pool(std::make_unique<ThreadPool>(threads)) {
    if (config.layout.num_blocks == 0) {
      config.layout.num_blocks =
          kv_blocks_for_sequence(model->config(), config.layout.block_size, model->config().context_length, prefill_chunk);
    }
    forward = std::make_unique<CpuForward>(*model, *pool);
    kv = std::make_unique<KvCache>(model->config(), config);
    core = std::make_unique<EngineCore>(*model, *forward, *kv, SchedulerLimits{prefill_chunk, 32, PreemptMode::Recompute});
  }

  // Greedy, end-of-generation tokens ignored.
  Completion greedy(const std::vector<int32_t>& prompt, int32_t max_tokens, uint64_t conversation_key = 0) {
    Request request;
    request.prompt_tokens = prompt;
    request.max_tokens = max_tokens;
    request.stop_at_eos = false;
    request.conversation_key = conversation_key;
    return complete(*core, request);
  }

  std::vector<float> logits(const std::vector<int32_t>& prompt) { return prompt_logits(*core, prompt); }
};

}  // namespace kvdesk::test
