// The engine's public vocabulary: settings, requests, events and statistics. Plain structs,
// cheap to copy, no pointers into the engine: the UI thread and the engine thread exchange
// only these. Engine internals include this header, never the reverse, so the app and the
// panels compile against a face that does not change when the engine's insides do.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/kv_snapshot.h"

namespace kvdesk {

using RequestId = uint64_t;

namespace grammar {
struct Grammar;
}

// Which compute backend to load a model on (engine/backend/backend.h decides).
enum class BackendRequest : uint8_t { Auto, Cpu, Cuda };

// How the next token is picked from one row of logits (engine/runtime/sampler.h). Order of the
// filters, as llama.cpp's default chain: repetition penalty -> top-k -> temperature ->
// softmax -> top-p -> min-p -> draw.
struct SamplingParams {
  float temperature = 0.0f;     // 0: greedy
  int32_t top_k = 0;            // 0: off
  float top_p = 1.0f;           // 1: off
  float min_p = 0.0f;           // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;   // tokens of history the penalties look at
  // OpenAI's additive penalties over the same window: a token seen c times there loses
  // c x frequency_penalty + presence_penalty from its logit. 0: off; range [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  // OpenAI's logit_bias: each (token id, bias) adds bias to that token's logit before every
  // other step, greedy included: -100 bans a token in practice, 100 all but forces it. Biases
  // in [-100, 100]; an id outside the vocabulary is ignored here (the server refuses it).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// Throws kvdesk::Error with the reason when a value is out of its range.
void validate_sampling_params(const SamplingParams& params);

// KV retention (engine/kv/kv_retention.h has the design): which cached tokens a sequence keeps.
enum class RetentionPolicy : uint8_t { None, Sinks, H2O, SnapKV };

const char* retention_policy_name(RetentionPolicy policy);   // "none", "sinks", "h2o", "snapkv"
// Throws kvdesk::Error listing the known names.
RetentionPolicy parse_retention_policy(std::string_view name);

// How many tokens a sequence may keep: a fraction of the tokens it has seen, or a count.
struct RetentionBudget {
  double fraction = 1.0;   // in (0, 1]; used when tokens is 0
  int32_t tokens = 0;      // > 0: keep this many

  // Tokens to keep out of `seen`, in [min(seen, 1), seen].
  int32_t resolve(int32_t seen) const;
  std::string describe() const;   // "50%" or "128 tokens"
};

// "0.5", "50%" (a fraction) or "128" (tokens). Throws kvdesk::Error on anything else.
RetentionBudget parse_retention_budget(std::string_view text);

struct RetentionOptions {
  RetentionPolicy policy = RetentionPolicy::None;
  RetentionBudget budget;
  int32_t sink_tokens = 4;          // sinks: first tokens always kept
  double recent_fraction = 0.5;     // h2o: share of the budget kept for the most recent tokens
  int32_t observation_window = 16;  // snapkv: last prompt tokens whose attention votes
  int32_t pool_kernel = 7;          // snapkv: max-pool width over the votes (odd)

  bool enabled() const { return policy != RetentionPolicy::None; }
  bool needs_attention() const { return policy == RetentionPolicy::H2O || policy == RetentionPolicy::SnapKV; }
};

enum class FinishReason : uint8_t { Stop, Length, ContextFull, Cancelled };
const char* finish_reason_name(FinishReason reason);   // "stop", "length", "context_full", ...

enum class PreemptMode : uint8_t {
  Recompute,  // drop the victim's blocks (full ones stay in the prefix cache), prefill again
  Swap,       // copy the victim's blocks to host memory as stored, copy back later
};
const char* preempt_mode_name(PreemptMode mode);

// The host tier's default budget (engine/kv/host_tier.h).
inline constexpr size_t kDefaultHostTierMib = 512;

struct SchedulerLimits {
  int32_t step_token_budget = 256;  // tokens per forward step: decodes first, then prefill chunks
  int32_t max_running = 32;         // sequences in one batch
  PreemptMode preempt_mode = PreemptMode::Recompute;
  // Host memory for KV out of the pool: parked conversations moved out of a full pool, and
  // sequences preempted by swapping. 0: no tier (parked turns are released and swap
  // preemption recomputes).
  size_t host_tier_bytes = kDefaultHostTierMib << 20;
  int32_t host_tier_zstd_level = 0;   // zstd level of the tier's blocks; 0: kept as stored
};

struct EngineSettings {
  std::string model_path;
  std::string tokenizer_path;        // optional SentencePiece .model
  std::string chat_template;         // a family (chat_template_names) to use instead of the model's; "": the model's
  std::string chat_template_source;  // non-empty: this Jinja source instead of both (--chat-template-file)
  std::string chat_template_file;    // the source's file name, for what the template is called
  BackendRequest backend = BackendRequest::Auto;   // see engine/backend/backend.h
  int32_t threads = 0;               // 0: all cores
  KvLayout kv;                       // types, block size; num_blocks 0: from the budget
  size_t kv_budget_bytes = 0;        // 0: 1/4 of free memory, at most 4 full contexts (engine.cpp)
  uint64_t memory_limit_bytes = 0;   // weights + KV pool must fit in this; 0: MemAvailable
  bool prefix_caching = true;
  SchedulerLimits scheduler;
};

// What happens when a conversation reaches the model's context length.
enum class ContextPolicy : uint8_t {
  Stop,         // finish with FinishReason::ContextFull
  SinkWindow,   // keep the first sink_tokens and the most recent tokens (StreamingLLM) and go on
};

// Which next-token logits a request hands back as Logits events.
enum class LogitsOutput : uint8_t {
  None,
  Prompt,   // every prompt position's row; the prompt is then computed in full (no cached prefix)
};

struct ChatMessage {
  std::string role;      // "system", "user", "assistant", "tool"
  std::string content;
  // The message's other OpenAI fields as a JSON object's text ("" when none): an answer's
  // tool_calls (arguments a JSON string or object), a tool result's tool_call_id and name,
  // reasoning_content. The chat template sees them as fields of the message.
  std::string fields_json = {};
};

// Constrained decoding (engine/grammar/): each sampled token keeps the answer's bytes a
// prefix of the grammar's language, and end-of-generation comes only where the grammar may
// end. With triggers (lazy), the answer is free until one of them appears in it; the grammar
// then holds from that trigger's first byte on (a tool call that begins inside free text).
// The compiled grammar is immutable, so one is shared by every request that asks for it.
struct OutputConstraint {
  std::shared_ptr<const grammar::Grammar> grammar;   // null: free text
  std::vector<std::string> triggers;

  bool active() const { return grammar != nullptr; }
};

// One token's log-probability in the distribution the sampler drew from: after logit bias,
// penalties and the grammar's mask, before temperature, top-k/top-p/min-p.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  std::string bytes = {};   // what the token prints (possibly part of a UTF-8 character)
};

// A conversation's token sequence is the concatenation of its messages' spans: a message's span
// is every token the rendered conversation gains with it (for the first message, whatever the
// template writes before it too: BOS, the system turn), an answer's span the ids the model
// generated. Spans make a continued conversation token-exact with the KV that holds it. Ids are
// valid only for the model and chat template named by identity ("model <hash>; template <name>").
struct MessageTokens {
  std::string identity;
  std::vector<int32_t> ids;
};

// What a finished chat turn (a request with messages) added to its conversation's token sequence.
struct ChatTokens {
  std::string identity;                        // the engine's token identity; "" when none was reported
  std::vector<std::vector<int32_t>> messages;  // [request messages] each one's span; empty: a system
                                               // message, or not attributable to it alone
  std::vector<int32_t> answer;                 // the generated ids
  int32_t reused_messages = 0;                 // messages whose given ids built the prompt
};

inline constexpr int32_t kMaxSamples = 16;   // parallel samples one request may ask for

struct Request {
  // One of: tokens (used as they are), messages (rendered with the model's chat template), or
  // plain text (encoded as text, BOS first when the vocabulary asks for it).
  std::vector<int32_t> prompt_tokens;
  std::vector<ChatMessage> messages;
  // Empty, or one per message: its stored span. The prompt takes a leading run of messages from
  // their ids when they carry the engine's identity (the rest is rendered text), so a continued
  // conversation is never re-tokenized.
  std::vector<MessageTokens> message_tokens;
  std::string prompt_text;
  // With messages ending in an answer: the model carries that answer on. The prompt ends with
  // the answer's text (its stored ids when usable), not closed by the template, and the tokens
  // generated continue it (Finished's chat_tokens.answer holds only the new ones).
  bool continue_answer = false;
  // The time the chat template's strftime_now() dates show (Llama 3.2's "Today Date", Granite's
  // and Mistral Small 3's default system messages), in Unix seconds; 0: now. A stored
  // conversation passes the time it began: its first message's stored ids hold the date it was
  // first rendered with, and a turn rendered from text (ids of another model) shows the same.
  int64_t template_time = 0;
  // Rendered into the prompt by the chat template with the messages: OpenAI-shaped tool
  // definitions (a JSON array's text) and the template's extra variables (chat_template_kwargs,
  // a JSON object's text); "": none.
  std::string tools_json;
  std::string template_kwargs_json;
  SamplingParams sampling;
  OutputConstraint constraint;
  // Token events carry the sampled token's log-probability and this many of the most likely
  // alternatives (0-20); -1: none.
  int32_t top_logprobs = -1;
  // Control tokens print their text ("[TOOL_CALLS]", "<|python_tag|>"): a tool call's markup
  // that the caller parses. Off, they print nothing.
  bool print_control_tokens = false;
  // Parallel samples of one prompt: the request's id and the next samples - 1 ids are one
  // answer each, each its own sampler (seed + i); the prompt is computed once and its KV blocks
  // shared by every sample (copy-on-write where they diverge).
  int32_t samples = 1;              // 1 to kMaxSamples
  int32_t max_tokens = 256;         // 0 with LogitsOutput::Prompt: score the prompt, sample nothing
  bool stop_at_eos = true;
  LogitsOutput logits = LogitsOutput::None;
  ContextPolicy context_policy = ContextPolicy::Stop;
  int32_t sink_tokens = 4;
  // The most tokens (prompt + answer) this request's sequence may hold; 0, or more than the
  // model's context length: the model's. Reaching it acts as reaching the model's context:
  // context_policy says whether the answer stops (ContextFull) or the window slides.
  int32_t context_limit = 0;
  RetentionOptions retention;        // KV retention of this request's sequence (off by default)
  // Requests with the same non-zero key are turns of one conversation: when one finishes,
  // its sequence is kept ("parked") so the next turn appends only its new tokens.
  uint64_t conversation_key = 0;
  int32_t priority = 0;              // higher runs first; ties: earlier first
};

// A conversation's parked KV as bytes: saved with the conversation and given back to an engine
// in a later run, so the conversation's next turn prefills only its new tokens.
struct ConversationKv {
  // What the bytes are valid for: "model <hash of the GGUF header and tensor table>; kv
  // <k type>/<v type>; block <tokens>; template <chat template>"; another engine refuses them.
  std::string identity;
  std::vector<int32_t> tokens;     // [tokens] what the KV holds, every one computed
  std::vector<uint8_t> blocks;     // [blocks][bytes per block] as the pool stores them
};

struct RequestMetrics {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;         // prompt tokens whose KV was reused, not computed
  int32_t host_tier_tokens = 0;      // of those, tokens of a parked turn swapped back from the host tier
  int32_t generated_tokens = 0;
  int32_t preemptions = 0;
  int32_t peak_blocks = 0;           // most KV blocks its sequence held at once
  double queue_ms = 0;               // submitted -> first scheduled
  double ttft_ms = 0;                // submitted -> first token
  double prefill_tok_s = 0;          // computed prompt tokens / prefill time
  double decode_tok_s = 0;
  double itl_p50_ms = 0;             // inter-token latency
  double itl_p95_ms = 0;
};

// What one KV type costs the loaded model itself: its next-token distributions over a short
// built-in text with this type for K and V, against the same model's with f32 KV
// (engine/quality/kv_quality.h).
struct KvQuality {
  std::string model_identity;      // ModelSummary::identity of the model measured
  std::string text_id;             // the built-in text and its length (kv_quality_text_id)
  KvType type = KvType::F32;
  double kl = 0;                   // mean over positions of KL(f32 KV || this type), nats
  double top1 = 0;                 // % of positions whose most likely next token is f32 KV's
  int32_t tokens = 0;              // positions scored
};

// LoadProgress: how far load_model has got (progress), several while a model loads, the last
// one 1 just before ModelLoaded. A cancelled load ends with an Error whose finish is Cancelled.
// KvQuality (request 0): one KV type measured (kv_quality), or, with text set, why that type
// and the ones after it could not be.
enum class EventKind : uint8_t { ModelLoaded, LoadProgress, Token, Logits, Finished, Error, KvQuality };

struct Event {
  EventKind kind = EventKind::Token;
  RequestId request = 0;             // 0 for model events
  int32_t token = -1;                // Token: the id (-1 for a held-back UTF-8 tail)
  std::string text;                  // Token: printable text; Error: the message;
                                     // ModelLoaded after load_model: the backend's note
  FinishReason finish = FinishReason::Stop;   // Finished; Error: Cancelled for a cancelled load
  double progress = 0;               // LoadProgress: the share of the load done, 0..1
  RequestMetrics metrics;            // Finished
  ChatTokens chat_tokens;            // Finished, for a request with messages
  // Token, when the request asked for top_logprobs: the sampled token's log-probability and
  // bytes, and the most likely tokens, most likely first.
  float logprob = 0;
  std::string token_bytes;
  std::vector<TokenLogprob> top_logprobs;
  int32_t position = 0;              // Logits: the prompt position of the first row
  std::vector<float> logits;         // Logits: [rows][vocab], rows for position, position + 1, ...
  KvQuality kv_quality;              // KvQuality
};

// The devices' memory as the CUDA backend planned it; empty on the CPU.
struct DeviceMemoryUse {
  std::string device;              // "NVIDIA H200, sm_90, 139.8 GiB"
  uint64_t total_bytes = 0;        // the device's memory
  uint64_t free_bytes = 0;         // free before the weights were uploaded
  uint64_t budget_bytes = 0;       // utilization x total - others: what this process may take
  uint64_t weight_bytes = 0;       // the weights as uploaded (padding and alignment included)
  uint64_t activation_bytes = 0;   // the forward pass's device buffers
};

// What one KV storage type costs for the loaded model's shape.
struct KvTypeCost {
  KvType type = KvType::F32;
  uint64_t bytes_per_token = 0;    // K + V of every layer and kv head, scales included
};

// The weights of one tensor role ("attn_q", "ffn_down", "token_embd": the GGUF tensor name
// without "blk.N." and ".weight") stored in one type, over every layer.
struct WeightTypeGroup {
  std::string group;
  std::string type;                // ggml type name: "q4_K", "f16", ...
  int32_t tensors = 0;
  uint64_t bytes = 0;
};

// What a model file is, beyond ModelSummary's headline figures (engine/model/model_info.h).
struct ModelDescription {
  int32_t embedding_length = 0;
  int32_t feed_forward_length = 0;
  int32_t vocab_size = 0;
  std::string tokenizer_kind;          // "SentencePiece", "byte-level BPE (pre llama-bpe)", ...
  int32_t sliding_window = 0;          // tokens a local layer attends to; 0: no local layers
  int32_t local_layers = 0;            // layers limited to the sliding window
  int32_t expert_count = 0;            // a mixture of experts' FFNs per layer; 0: a dense FFN
  int32_t expert_used_count = 0;       // experts each token runs
  int32_t expert_feed_forward_length = 0;
  int32_t expert_shared_feed_forward_length = 0;   // a shared expert every token runs (Qwen2 MoE); 0: none
  std::vector<WeightTypeGroup> weight_types;   // by group, then type
};

struct ModelSummary {
  std::string path;
  // A hash of the GGUF header (every metadata value) and tensor table: the model's part of a
  // saved KV's identity, and what its KV quality measurements are stored under.
  std::string identity;
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
  std::string chat_template;           // what prompts are rendered with: "own", a family name, "file <name>", "plain"
  std::string chat_template_warning;   // non-empty: the template does not parse (its line named)
  std::string chat_template_source;    // the Jinja source prompts are rendered with
  std::string bos_text;                // what the template's bos_token and eos_token are
  std::string eos_text;
  // The generation prompt opens the model's <think> (DeepSeek R1, Qwen3 thinking): an answer's
  // text is reasoning until its "</think>".
  bool chat_template_opens_reasoning = false;
  DeviceMemoryUse device_memory;       // the CUDA backend's device memory; empty on the CPU
  bool kv_on_device = false;           // the KV pool (EngineStats::kv.pool_bytes) is in device memory
  std::vector<KvTypeCost> kv_types;    // one per KV type, in all_kv_types() order
  ModelDescription description;
};

// Who holds a KV sequence: a live request, or a conversation's parked last turn.
struct SequenceOwner {
  int32_t seq_id = -1;
  RequestId request = 0;             // 0 for a parked turn
  uint64_t conversation_key = 0;     // 0 when the request has none
};

// A remote server's own view of its KV cache, from its /metrics (vLLM, SGLang, llama-server or
// kvdesk serve). A figure the server does not expose is empty, never zero.
struct ServerStats {
  std::string url;
  std::string kind;                        // "vllm", "sglang", "llama-server", "kvdesk", "unknown"
  std::optional<double> kv_usage;          // held share of the KV cache, 0..1
  std::optional<double> kv_tokens;         // tokens held in the KV cache
  std::optional<double> running;
  std::optional<double> waiting;
  std::optional<double> prefix_queries;    // prefix-cache lookups (server's unit, usually tokens)
  std::optional<double> prefix_hits;
  std::optional<double> prefix_hit_rate;   // hits / queries, or the server's own rate
  std::optional<double> preemptions;
  std::optional<double> block_size;
  std::optional<double> num_blocks;
  std::optional<double> prompt_tokens;     // totals since the server started
  std::optional<double> generation_tokens;
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
  uint64_t memory_available_bytes = 0;   // host memory available now (MemAvailable), as the engine plans with
  bool prefix_caching = true;
  KvSnapshot kv;
  std::vector<SequenceOwner> owners;   // one per sequence in kv.sequences
  // Set when the engine is a remote server: what its /metrics say. kv above is then filled
  // only where the server shows its blocks (kvdesk serve's /v1/kv).
  std::optional<ServerStats> server;
};

}  // namespace kvdesk
