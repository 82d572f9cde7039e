// The plain data the conversation store reads and writes: conversations, messages (a tree per
// conversation), answer statistics, presets, recent models and KV quality measurements, plus the names roles and statuses
// have in the database and in exported JSON.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::store {

using ConversationId = int64_t;
using MessageId = int64_t;
using PresetId = int64_t;

// Tool: a tool's result, sent back to the model (OpenAI's role "tool"); its call id and the
// function's name are in the message's fields.
enum class Role { System, User, Assistant, Tool };

enum class MessageStatus {
  Complete,      // a finished user message or answer
  Streaming,     // an answer being generated (saved as it grows)
  Stopped,       // the user stopped the answer; the text is what was generated until then
  Failed,        // generation failed; the text is what was generated before the failure
  Interrupted,   // found Streaming after kvdesk ended without finishing it (a crash or kill)
};

std::string_view role_name(Role role);                 // "system", "user", "assistant", "tool"
std::optional<Role> parse_role(std::string_view name);
std::string_view status_name(MessageStatus status);    // "complete", "streaming", ...
std::optional<MessageStatus> parse_status(std::string_view name);

int64_t unix_time_ms();   // the timestamps the store writes: Unix time in milliseconds

// A new conversation's title from its first message: the first line, cut on a UTF-8 character
// boundary that splits no emoji sequence (ZWJ, skin tone, flag); "New chat" when that line is
// empty.
std::string title_from(const std::string& text);

inline constexpr const char* kNewChatTitle = "New chat";

// What generating an answer took; saved once the answer is finished.
struct AnswerStats {
  std::string model;               // the model file's name or path
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double ttft_ms = 0;              // time to first token
  double decode_tok_s = 0;
  std::string finish_reason;       // "stop", "length", "user", "error", ...
};

// A message's token ids as stored: its span of the conversation's token sequence (the ids the
// model generated, for an answer), valid only for the model and chat template named by identity.
struct MessageTokens {
  std::string identity;
  std::vector<int32_t> ids;
};

// The stored form of token ids: "kvT1", the count (u32), the ids (i32), an FNV-1a hash of the
// ids' bytes (u32); host byte order. decode throws kvdesk::Error saying what is wrong.
std::vector<uint8_t> encode_token_ids(const std::vector<int32_t>& ids);
std::vector<int32_t> decode_token_ids(std::span<const uint8_t> bytes);

// A message in a conversation's tree. parent_id is empty for a root; two messages with the same
// parent are sibling branches (e.g. an edited user message and the original).
struct Message {
  MessageId id = 0;
  ConversationId conversation_id = 0;
  std::optional<MessageId> parent_id;
  Role role = Role::User;
  std::string content;
  MessageStatus status = MessageStatus::Complete;
  int64_t created_at_ms = 0;       // Unix time in milliseconds
  int64_t updated_at_ms = 0;
  std::optional<AnswerStats> stats;
  std::optional<MessageTokens> tokens;   // empty: none stored (older rows) or damaged
  std::string tokens_damaged;            // non-empty: why the stored ids were not usable
  // The message's other OpenAI fields as a JSON object's text, "" when none: an answer's
  // tool_calls and reasoning_content, a tool result's tool_call_id and name. The chat template
  // sees them as fields of the message (ChatMessage::fields_json); the chat shows them as blocks.
  std::string fields_json = {};
};

struct Conversation {
  ConversationId id = 0;
  std::string title;
  std::string system_prompt;
  std::optional<MessageId> active_leaf_id;   // the end of the branch shown; empty when no messages
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;                 // last rename, new message or finished answer
  std::string engine;                        // where its latest answer was generated: "in-process" or
                                             // a server's URL; "": unknown (a conversation of an older file)
};

// A conversation's own generation settings. An empty value means "the app's default" (what
// Settings holds), so conversations saved before these existed keep behaving as they did.
// The store keeps what it is given; ranges are checked where the settings are used.
struct ConversationSettings {
  std::optional<int64_t> context_length;   // tokens the prompt and answer together may take
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<int64_t> seed;
  std::optional<std::string> kv_retention;  // a retention policy name ("none", "h2o", ...)
  std::optional<double> kv_keep;            // share of the tokens the retention policy keeps

  bool empty() const { return *this == ConversationSettings{}; }
  bool operator==(const ConversationSettings&) const = default;
};

// A whole conversation: every message of every branch, parents before children.
struct ConversationTree {
  Conversation conversation;
  std::vector<Message> messages;
  ConversationSettings settings;
};

struct Preset {
  PresetId id = 0;
  std::string name;
  std::string system_prompt;
};

struct RecentModel {
  std::string path;
  int64_t last_opened_ms = 0;
};

// What one KV type costs a model, as the engine measured it (KvQuality): one row per model,
// KV type and measuring text, so a model opened again shows its figures without measuring.
struct KvQualityRecord {
  std::string model_identity;   // the engine's hash of the model's GGUF header and tensor table
  std::string kv_type;          // "f16", "int8", ...
  std::string text_id;          // the built-in text it was measured on
  double kl = 0;                // mean KL divergence from f32 KV, nats
  double top1 = 0;              // % of positions with f32 KV's most likely next token
  int64_t tokens = 0;           // positions scored
};

// What is saved of a conversation's KV cache (the bytes themselves are loaded on demand).
struct KvBlobInfo {
  std::string key;                 // identifies the model and KV settings the bytes belong to
  int64_t num_bytes = 0;           // uncompressed size
  int64_t stored_bytes = 0;        // size in the database
  int64_t saved_at_ms = 0;
};

// What save_kv_capped did.
struct KvSaveResult {
  bool saved = false;              // false: larger than the cap on its own
  int64_t stored_bytes = 0;        // its size in the database (compressed)
  int64_t dropped = 0;             // other conversations whose KV made room for it
};

}  // namespace kvdesk::store
