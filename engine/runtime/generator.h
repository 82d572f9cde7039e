// Generator: one sequence from prompt to finish on the calling thread: the prompt's cached
// prefix attached, a batched prefill of the rest (in chunks), then token-by-token decode with
// sampling, streaming each token's text as soon as it forms whole UTF-8 characters. The
// headless front ends (kvdesk-cli) use it directly.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/forward_backend.h"
#include "engine/kv/kv_cache.h"
#include "engine/kv/kv_retention.h"
#include "engine/runtime/sampler.h"

namespace kvdesk {

class Model;
class ThreadPool;

enum class FinishReason { Stop, Length, ContextFull, KvFull, Cancelled };
const char* finish_reason_name(FinishReason reason);

struct GenerateOptions {
  int32_t max_tokens = 64;
  SamplingParams sampling;
  int32_t prefill_chunk = 512;   // prompt tokens per forward call
  bool stop_at_eos = true;
  RetentionOptions retention;    // KV retention of the sequence (off by default)
};

struct GenerateResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;   // generated
  std::string text;              // generated text
  FinishReason finish = FinishReason::Length;
  double prefill_ms = 0;         // prompt forward passes
  double ttft_ms = 0;            // start -> first generated token chosen
  double decode_ms = 0;          // first token chosen -> last token chosen
  int32_t cached_tokens = 0;     // prompt tokens whose KV came from the prefix cache
  int32_t peak_blocks = 0;       // most KV blocks the sequence held at once
  KvSnapshot kv;                 // the KV cache as generation ended, before the sequence was freed
  double decode_tok_s() const;
  double prefill_tok_s() const;
};

// Return false to stop (the result then says Cancelled).
using TokenCallback = std::function<bool(int32_t token, const std::string& text)>;

class Generator {
 public:
  // The CPU forward pass on pool.
  Generator(Model& model, KvCache& kv, ThreadPool& pool);
  // The given backend's forward pass; kv made with its kv_pool().
  Generator(Model& model, KvCache& kv, ForwardBackend& forward);

  GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                          const TokenCallback& on_token = {});

  // Next-token logits at every prompt position: [prompt.size()][vocab].
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt, int32_t prefill_chunk = 512);

 private:
  // Runs the prompt through seq in chunks. Without all_logits its cached prefix is attached
  // first and only the rest is computed; logits: the last token's row. With all_logits every
  // token is computed and logits gets every row. Returns the prompt tokens attached.
  int32_t prefill(SeqId seq, const std::vector<int32_t>& prompt, bool all_logits,
                  int32_t prefill_chunk, std::vector<float>& logits);

  Model& model_;
  KvCache& kv_;
  std::unique_ptr<CpuForward> own_cpu_;   // the first constructor's backend
  ForwardBackend* forward_;
  int32_t peak_blocks_ = 0;   // most blocks the current sequence held (before any compaction)
};

}  // namespace kvdesk
