// The engine's public vocabulary: settings, requests, events and statistics. Plain structs,
// cheap to copy, no pointers into the engine: the UI thread and the engine thread exchange
// only these.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/device_memory.h"
#include "engine/runtime/generator.h"
#include "engine/kv/kv_retention.h"
#include "engine/kv_snapshot.h"
#include "engine/runtime/sampler.h"

namespace kvdesk {

using RequestId = uint64_t;

enum class PreemptMode : uint8_t {
  Recompute,  // drop the victim's blocks (full ones stay in the prefix cache), prefill again
  Swap,       // copy the victim's blocks to host memory as stored, copy back later
};
const char* preempt_mode_name(PreemptMode mode);

struct SchedulerLimits {
  int32_t step_token_budget = 256;  // tokens per forward step: decodes first, then prefill chunks
  int32_t max_running = 32;         // sequences in one batch
  PreemptMode preempt_mode = PreemptMode::Recompute;
};

struct EngineSettings {
  std::string model_path;
  std::string tokenizer_path;        // optional SentencePiece .model
  std::string chat_template;         // a chat_format_name() to use instead of the model's; "": the model's
  BackendRequest backend = BackendRequest::Auto;   // see engine/backend/backend.h
  int32_t threads = 0;               // 0: all cores
  KvLayout kv;                       // types, block size; num_blocks 0: from the budget
  size_t kv_budget_bytes = 0;        // 0: 1/4 of free memory, at most what the context needs x 8
  uint64_t memory_limit_bytes = 0;   // weights + KV pool must fit in this; 0: MemAvailable
  bool prefix_caching = true;
  SchedulerLimits scheduler;
};

// What happens when a conversation reaches the model's context length.
enum class ContextPolicy : uint8_t {
  Stop,         // finish with FinishReason::ContextFull
  SinkWindow,   // keep the first sink_tokens and the most recent tokens (StreamingLLM) and go on
};

struct ChatMessage {
  std::string role;      // "system", "user", "assistant"
  std::string content;
};

struct Request {
  // One of: tokens (used as they are), messages (rendered with the model's chat template), or
  // plain text (encoded as text, BOS first when the vocabulary asks for it).
  std::vector<int32_t> prompt_tokens;
  std::vector<ChatMessage> messages;
  std::string prompt_text;
  SamplingParams sampling;
  int32_t max_tokens = 256;
  bool stop_at_eos = true;
  ContextPolicy context_policy = ContextPolicy::Stop;
  int32_t sink_tokens = 4;
  RetentionOptions retention;        // KV retention of this request's sequence (off by default)
  // Requests with the same non-zero key are turns of one conversation: when one finishes,
  // its sequence is kept ("parked") so the next turn appends only its new tokens.
  uint64_t conversation_key = 0;
  int32_t priority = 0;              // higher runs first; ties: earlier first
};

struct RequestMetrics {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;         // prompt tokens whose KV was reused, not computed
  int32_t generated_tokens = 0;
  int32_t preemptions = 0;
  double queue_ms = 0;               // submitted -> first scheduled
  double ttft_ms = 0;                // submitted -> first token
  double prefill_tok_s = 0;          // computed prompt tokens / prefill time
  double decode_tok_s = 0;
  double itl_p50_ms = 0;             // inter-token latency
  double itl_p95_ms = 0;
};

enum class EventKind : uint8_t { ModelLoaded, Token, Finished, Error };

struct Event {
  EventKind kind = EventKind::Token;
  RequestId request = 0;             // 0 for model events
  int32_t token = -1;                // Token: the id (-1 for a held-back UTF-8 tail)
  std::string text;                  // Token: printable text; Error: the message;
                                     // ModelLoaded after load_model: the backend's note
  FinishReason finish = FinishReason::Stop;
  RequestMetrics metrics;            // Finished
};

struct ModelSummary {
  std::string path;
  std::string name;
  std::string architecture;
  int32_t context_length = 0;
  int32_t layers = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int64_t parameters = 0;
  uint64_t weight_bytes = 0;
  std::string backend = "cpu";         // the backend chosen at load (backend_name)
  std::string backend_note;            // why (BackendChoice::note); empty when cpu was asked for
  int32_t threads = 1;
  std::string chat_template;           // the family prompts are rendered with (chat_format_name)
  std::string chat_template_warning;   // non-empty when the model's template was not recognized
  DeviceMemoryUse device_memory;       // the CUDA backend's device memory; empty on the CPU
  bool kv_on_device = false;           // the KV pool (EngineStats::kv.pool_bytes) is in device memory
};

// Who holds a KV sequence: a live request, or a conversation's parked last turn.
struct SequenceOwner {
  int32_t seq_id = -1;
  RequestId request = 0;             // 0 for a parked turn
  uint64_t conversation_key = 0;     // 0 when the request has none
};

struct EngineStats {
  bool model_loaded = false;
  ModelSummary model;
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t swapped = 0;
  int32_t parked = 0;
  uint64_t steps = 0;
  double tokens_per_s = 0;           // generated tokens per second over the last second
  uint64_t generated_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t swapped_bytes = 0;
  double swap_ms = 0;
  size_t activation_bytes = 0;       // the forward pass's scratch buffers
  bool prefix_caching = true;
  KvSnapshot kv;
  std::vector<SequenceOwner> owners;   // one per sequence in kv.sequences
};

}  // namespace kvdesk
