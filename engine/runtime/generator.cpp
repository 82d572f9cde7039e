// Generator: prefill, then sample-decode until a stop token, the length limit, the model's
// context or the KV pool runs out.
#include "engine/runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "engine/tokenizer/utf8_stream.h"

namespace kvdesk {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Frees the sequence's blocks however generation ends.
class ScopedSequence {
 public:
  explicit ScopedSequence(KvCache& kv) : kv_(kv), id_(kv.create_sequence()) {}
  ~ScopedSequence() { kv_.free_sequence(id_); }
  SeqId id() const { return id_; }

 private:
  KvCache& kv_;
  SeqId id_;
};

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::ContextFull: return "context_full";
    case FinishReason::KvFull: return "kv_full";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

Generator::Generator(Model& model, KvCache& kv, ThreadPool& pool)
    : model_(model), kv_(kv), own_cpu_(std::make_unique<CpuForward>(model, pool)), forward_(own_cpu_.get()) {}

Generator::Generator(Model& model, KvCache& kv, ForwardBackend& forward) : model_(model), kv_(kv), forward_(&forward) {}

double GenerateResult::decode_tok_s() const {
  return tokens.size() > 1 && decode_ms > 0 ? double(tokens.size() - 1) * 1000.0 / decode_ms : 0;
}

double GenerateResult::prefill_tok_s() const {
  return prefill_ms > 0 ? double(prompt_tokens.size()) * 1000.0 / prefill_ms : 0;
}

int32_t Generator::prefill(SeqId seq, const std::vector<int32_t>& prompt, bool all_logits,
                           int32_t prefill_chunk, std::vector<float>& logits) {
  const int32_t vocab = model_.config().vocab_size;
  const int32_t n = int32_t(prompt.size());
  const int32_t cached = all_logits ? 0 : kv_.attach_cached_prefix(seq, prompt);
  if (!kv_.append(seq, std::span<const int32_t>(prompt).subspan(size_t(cached)))) {
    throw Error("the prompt (" + std::to_string(n) + " tokens) does not fit in the KV cache");
  }
  peak_blocks_ = std::max(peak_blocks_, int32_t(kv_.block_table(seq).size()));
  std::vector<float> chunk_logits;
  if (all_logits) logits.resize(size_t(n) * size_t(vocab));
  for (int32_t begin = cached; begin < n; begin += prefill_chunk) {
    const int32_t end = std::min(n, begin + prefill_chunk);
    ForwardBatch batch;
    for (int32_t p = begin; p < end; ++p) batch.add(prompt[p], p, seq, all_logits || p == n - 1);
    forward_->forward(batch, kv_, chunk_logits);
    kv_.mark_computed(seq, end);
    if (all_logits) {
      std::copy(chunk_logits.begin(), chunk_logits.end(), logits.begin() + size_t(begin) * size_t(vocab));
    } else if (end == n) {
      logits = chunk_logits;
    }
  }
  return cached;
}

std::vector<float> Generator::prompt_logits(const std::vector<int32_t>& prompt, int32_t prefill_chunk) {
  ScopedSequence seq(kv_);
  std::vector<float> logits;
  prefill(seq.id(), prompt, true, prefill_chunk, logits);
  return logits;
}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                   const TokenCallback& on_token) {
  if (prompt.empty()) throw Error("the prompt is empty");
  const ModelConfig& config = model_.config();
  if (int32_t(prompt.size()) >= config.context_length) {
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens; the model's context is " +
                std::to_string(config.context_length));
  }
  GenerateResult result;
  result.prompt_tokens = prompt;
  peak_blocks_ = 0;
  ScopedSequence seq(kv_);
  kv_.set_retention(seq.id(), options.retention, int32_t(prompt.size()));
  Sampler sampler(options.sampling);
  Utf8Stream utf8;
  std::vector<int32_t> history = prompt;
  std::vector<float> logits;

  const auto start = Clock::now();
  result.cached_tokens = prefill(seq.id(), prompt, false, options.prefill_chunk, logits);
  result.prefill_ms = ms_since(start);

  const Tokenizer& tokenizer = model_.tokenizer();
  Clock::time_point first_token_time;
  int32_t position = int32_t(prompt.size());
  for (int32_t i = 0; i < options.max_tokens; ++i) {
    const int32_t token = sampler.sample(logits.data(), config.vocab_size, history);
    if (i == 0) {
      first_token_time = Clock::now();
      result.ttft_ms = ms_since(start);
    } else {
      result.decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - first_token_time).count();
    }
    if (options.stop_at_eos && tokenizer.is_end_of_generation(token)) {
      result.finish = FinishReason::Stop;
      break;
    }
    result.tokens.push_back(token);
    history.push_back(token);
    const std::string piece = utf8.push(tokenizer.token_bytes(token));
    result.text += piece;
    if (on_token && !on_token(token, piece)) {
      result.finish = FinishReason::Cancelled;
      break;
    }
    if (i + 1 == options.max_tokens) break;
    if (position + 1 > config.context_length) {
      result.finish = FinishReason::ContextFull;
      break;
    }
    if (!kv_.append(seq.id(), std::span<const int32_t>(&token, 1))) {
      result.finish = FinishReason::KvFull;
      break;
    }
    peak_blocks_ = std::max(peak_blocks_, int32_t(kv_.block_table(seq.id()).size()));
    ForwardBatch batch;
    batch.add(token, position, seq.id(), true);
    forward_->forward(batch, kv_, logits);
    kv_.mark_computed(seq.id(), ++position);
  }
  result.peak_blocks = peak_blocks_;
  result.kv = kv_.snapshot();
  const std::string tail = utf8.flush();
  result.text += tail;
  if (on_token && !tail.empty()) on_token(-1, tail);
  return result;
}

}  // namespace kvdesk
