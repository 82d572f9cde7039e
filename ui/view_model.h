// ViewModel: everything the desktop window shows, as plain data. The app fills it from the
// engine's events and statistics and from the conversation store; the panels only read it
// (and keep what the user is typing in UiState). No engine, store or ImGui types in here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ui/layout_report.h"
#include "ui/markdown_cache.h"

namespace kvdesk::ui {

// ---------------------------------------------------------------------------------------
// Chat
// ---------------------------------------------------------------------------------------
enum class MessageRole : uint8_t { System, User, Assistant, Tool };   // Tool: a tool's result
enum class MessageState : uint8_t { Complete, Streaming, Stopped, Failed, Interrupted };

// A call an answer made, as the chat shows it in a block of its own.
struct ToolCallView {
  std::string id;
  std::string name;
  std::string arguments;   // indented when it is JSON, else as the model wrote it
};

struct MessageView {
  int64_t id = 0;
  MessageRole role = MessageRole::User;
  MessageState state = MessageState::Complete;
  std::string text;
  // Branches: this message's place among the messages sharing its parent ("< 1/2 >").
  int32_t sibling_index = 0;     // 0-based
  int32_t sibling_count = 1;
  int64_t prev_sibling = 0;      // message ids; 0: none
  int64_t next_sibling = 0;
  std::string stats;             // for a finished answer: tokens, tok/s, TTFT
  bool can_continue = false;     // an answer that stopped at its token limit: Continue carries it on
  // A streaming answer whose prompt opened the model's <think> (chat_template_opens_reasoning):
  // its text is reasoning until "</think>" arrives. (A stored answer has that "</think>".)
  bool opened_in_reasoning = false;
  std::string reasoning;                  // an answer's reasoning_content kept beside its text (imported, served)
  std::vector<ToolCallView> tool_calls;   // an answer's calls (stored, or written in the model's markup)
  std::string tool_name;                  // a tool result: the function it answers
  std::string tool_call_id;               //   and the call's id
  bool text_is_json = false;              // a tool result whose text is JSON, shown indented in mono
};

struct ConversationSummary {
  int64_t id = 0;
  std::string title;
  bool generating = false;
  std::string engine;            // where its answers come from: "in-process" or a server's URL; "": unknown
};

// The generation settings a conversation can set for itself, in the order the chat panel shows them.
enum class SettingField : uint8_t { ContextLength, MaxTokens, Temperature, TopP, TopK, MinP, Seed, Retention, KvKeep };
inline constexpr size_t kSettingFieldCount = 9;
inline constexpr int32_t kMinConversationContext = 16;   // the smallest context length a conversation may set

struct SamplingView {
  int32_t context_length = 0;     // tokens the prompt and answer may take together; 0: the model's
  float temperature = 0.7f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.1f;
  int32_t max_tokens = 256;
  int32_t seed = 0;               // 0: a new random seed for every answer
  bool slide_context = true;       // a full context keeps the start and slides (else: stop)
  int32_t retention = 0;           // KV retention: index into kRetentionPolicyNames (0: none)
  float kv_keep = 0.5f;            // KV retention budget: share of the tokens seen, (0, 1]
};

// The selected conversation's settings as the chat panel edits them. `values` are what its
// answers use: its own where own[field] is set, the app's defaults (Settings) elsewhere.
struct ConversationSettingsView {
  SamplingView values;
  bool own[kSettingFieldCount] = {};
  int32_t model_context = 0;      // the loaded model's context length; 0: no model
  std::string note;               // stored values that were out of range (the default is used)

  bool is_own(SettingField f) const { return own[size_t(f)]; }
  void set_own(SettingField f, bool value) { own[size_t(f)] = value; }
};

// One piece of the prompt as the model sees it: text the chat template wrote (where its control
// tokens such as "<|im_start|>" live) or the conversation's own content (plain characters).
struct PromptPiece {
  std::string text;
  bool from_template = false;

  bool operator==(const PromptPiece&) const = default;
};

// The selected conversation rendered with the chat template in use (the chat's "Prompt as the
// model sees it" toggle): its pieces, or why there are none.
struct PromptView {
  int64_t conversation_id = 0;
  std::vector<PromptPiece> pieces;
  std::string error;             // the template could not render it (its message names the line)
  std::string note;              // nothing to render, and why (no messages, no model, a server's template)
};

struct ChatView {
  int64_t conversation_id = 0;   // 0: no conversation selected
  std::string title;
  std::string system_prompt;     // edited in place; committed by a SetSystemPrompt action
  std::vector<MessageView> messages;   // the active branch, root first
  bool generating = false;
  int32_t context_used = 0;      // tokens of the conversation's KV sequence, when known
  ConversationSettingsView settings;
  PromptView prompt;             // kept up to date while ui.show_prompt is on
};

struct PresetView {
  int64_t id = 0;
  std::string name;
  std::string system_prompt;
};

// The KV retention policies the settings panel offers, in SamplingView::retention order.
inline constexpr const char* kRetentionPolicyNames[] = {"none", "sinks", "h2o", "snapkv"};

// ---------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------
enum class ModelState : uint8_t { None, Loading, Loaded, Failed };

// The weights of one tensor role stored in one type ("attn_q", "q4_K", 8 tensors, bytes).
struct WeightTypeView {
  std::string group;
  std::string type;
  int32_t tensors = 0;
  uint64_t bytes = 0;
};

struct ModelView {
  ModelState state = ModelState::None;
  std::string path;
  std::string name;
  std::string architecture;
  std::string backend;
  int32_t context_length = 0;
  int32_t layers = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int32_t threads = 0;
  int64_t parameters = 0;
  uint64_t weight_bytes = 0;
  std::string chat_template;           // what prompts are rendered with: "own", a family name, "file <name>", "plain"
  std::string chat_template_warning;   // non-empty: the template does not parse (its line named)
  std::string chat_template_source;    // its Jinja source; empty for a server's model (the server renders)
  std::string bos_text;                // what the template's bos_token and eos_token stand for
  std::string eos_text;
  int32_t embedding_length = 0;
  int32_t feed_forward_length = 0;
  int32_t expert_count = 0;            // a mixture of experts' FFNs per layer; 0: a dense FFN
  int32_t expert_used_count = 0;
  int32_t expert_feed_forward_length = 0;
  int32_t expert_shared_feed_forward_length = 0;   // 0: no shared expert
  int32_t vocab_size = 0;
  std::string tokenizer_kind;
  int32_t sliding_window = 0;          // 0: every layer attends to the whole context
  int32_t local_layers = 0;
  std::vector<WeightTypeView> weight_types;
  double loading_seconds = 0;    // while Loading
  double load_progress = 0;      // while Loading: the share of the load done, 0..1
  std::string error;             // when Failed
  std::vector<std::string> recent;   // most recent first
};

// ---------------------------------------------------------------------------------------
// KV cache (a copy of the engine's KvSnapshot in UI terms, plus who owns each sequence)
// ---------------------------------------------------------------------------------------
enum class BlockKind : uint8_t { Free, Cached, Used, Shared };

struct KvBlockView {
  BlockKind kind = BlockKind::Free;
  int32_t ref_count = 0;
  int32_t filled = 0;            // tokens written (block_size when full)
};

struct KvSequenceView {
  int32_t seq_id = 0;
  int64_t conversation_id = 0;   // 0: not known to belong to a conversation
  std::string label;             // conversation title, or "seq N"
  int32_t num_tokens = 0;
  std::vector<int32_t> block_table;   // [blocks] physical ids in logical order (layer group 0's)
};

struct WhatIfView {
  int32_t block_size = 0;
  int64_t waste_tokens = 0;
  uint64_t waste_bytes = 0;
};

// The host tier: KV out of the pool (idle conversations, swapped requests) in host memory.
struct HostTierView {
  uint64_t budget_bytes = 0;     // 0: off
  int32_t compression_level = 0; // zstd level; 0: blocks kept as stored
  int32_t entries = 0;
  int64_t blocks = 0;
  uint64_t stored_bytes = 0;     // the blocks as the pool stores them
  uint64_t held_bytes = 0;       // what the tier holds (compressed, or stored_bytes)
  uint64_t hits = 0;             // conversation turns that continued from it
  uint64_t swap_ins = 0;
  uint64_t drops = 0;
};

struct KvView {
  bool valid = false;            // false until a model is loaded
  std::string k_type;
  std::string v_type;
  int32_t block_size = 0;
  int32_t recent_rows = 0;        // newest rows per sequence also kept in f32 (low-bit KV)
  uint64_t recent_row_bytes = 0;  // what the live sequences' f32 rows take
  bool prefix_caching = true;
  uint64_t bytes_per_token = 0;
  uint64_t bytes_per_block = 0;
  uint64_t pool_bytes = 0;
  int32_t max_context = 0;
  // Sliding-window layers (engine/kv/kv_layer_groups.h): blocks of layers_per_block layers in
  // layer_groups groups, local ones keeping sliding_window tokens; 1 group without them.
  int32_t layer_groups = 1;
  int32_t local_layer_groups = 0;
  int32_t layers_per_block = 0;
  int32_t sliding_window = 0;
  int64_t window_held_blocks = 0;   // blocks the live sequences hold
  int64_t window_full_blocks = 0;   // what they would hold if every layer kept every token

  int32_t blocks_total = 0;
  int32_t blocks_used = 0;
  int32_t blocks_cached = 0;
  int32_t blocks_free = 0;
  int32_t blocks_shared = 0;
  std::vector<KvBlockView> blocks;          // [blocks_total]
  std::vector<KvSequenceView> sequences;

  int64_t tokens_stored = 0;
  int64_t slots_reserved = 0;
  int64_t internal_waste_tokens = 0;
  uint64_t internal_waste_bytes = 0;
  double internal_waste_pct = 0;
  int64_t contiguous_reserved_tokens = 0;
  int64_t contiguous_waste_tokens = 0;
  uint64_t contiguous_waste_bytes = 0;
  double contiguous_waste_pct = 0;
  std::vector<WhatIfView> what_if;

  uint64_t prefix_hits = 0;
  uint64_t prefix_misses = 0;
  uint64_t prefix_hit_tokens = 0;
  double prefix_hit_rate = 0;
  uint64_t evictions = 0;
  uint64_t cow_copies = 0;
  uint64_t forks = 0;

  // KV retention: tokens seen vs kept by the sequences a policy runs on; blocks it freed.
  int64_t retention_tokens_seen = 0;
  int64_t retention_tokens_kept = 0;
  uint64_t retention_compactions = 0;
  uint64_t retention_blocks_freed = 0;

  HostTierView host_tier;
};

// What a KV type costs the loaded model: its next-token distributions with this type for K and
// V against f32 KV's, measured by the engine on a built-in text (KvQuality). kl and top1 are
// meaningful only when Measured.
enum class KvQualityState { Unknown, Measuring, Measured, Failed };
struct KvQualityView {
  KvQualityState state = KvQualityState::Unknown;   // Unknown: not measured (a remote server's model)
  double kl = 0;                                    // mean KL divergence from f32 KV, nats
  double top1 = 0;                                  // % of positions with f32 KV's most likely token
  std::string failure;                              // Failed: why
};

// One KV storage type as the quantization and memory panels compare them.
struct KvTypeCost {
  std::string name;
  uint64_t bytes_per_token = 0;  // K + V, all layers, with this type for both
  KvQualityView quality;
};

struct MemoryView {
  uint64_t weight_bytes = 0;
  uint64_t activation_bytes = 0;   // 0: not reported
  uint64_t available_bytes = 0;    // free memory now (headroom)
};

struct EngineView {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t swapped = 0;
  int32_t parked = 0;
  double tokens_per_s = 0;
  uint64_t preemptions = 0;
};

// Samples over the last minutes, oldest first, one every sample_seconds.
struct TimeSeriesView {
  float sample_seconds = 1.0f;
  std::vector<float> tokens_per_s;
  std::vector<float> blocks_used;
  std::vector<float> hit_rate;    // percent
};

// The app's own HTTP server ("Serve over HTTP"): the window's engine answering HTTP clients too.
struct ServeView {
  bool on = false;
  std::string url;               // while on: where it listens
  int32_t running = 0;           // HTTP requests in flight with a sequence in the engine
  int32_t waiting = 0;           // HTTP requests in flight not scheduled yet
  uint64_t served = 0;           // HTTP requests ended since it started
  uint64_t kept = 0;             // answered chats kept as conversations since it started
  std::string error;             // why the last start failed (port in use, no API key, ...)
};

// A remote OpenAI-compatible server's own figures (its /metrics); an empty one is not exposed
// by that server and shows as unavailable, never as zero.
struct ServerStatsView {
  std::string kind;              // "vllm", "sglang", "llama-server", "kvdesk", "unknown"
  std::optional<double> kv_usage;          // 0..1
  std::optional<double> kv_tokens;
  std::optional<double> running;
  std::optional<double> waiting;
  std::optional<double> prefix_hit_rate;   // 0..1
  std::optional<double> preemptions;
  std::optional<double> block_size;
  std::optional<double> num_blocks;
  std::optional<double> prompt_tokens;
  std::optional<double> generation_tokens;
};

// The server the window chats with instead of the in-process engine ("Connect to server").
struct RemoteView {
  bool connected = false;        // the chat runs on `url`'s server (or is connecting to it)
  std::string url;
  std::string model;             // the model its requests name
  std::vector<std::string> models;   // what its /v1/models lists
  std::string models_error;      // why the list could not be read
  bool stats_read = false;       // its /metrics has been read at least once
  uint64_t stats_reads = 0;      // statistics reads so far (each one a new snapshot)
  ServerStatsView stats;
};

struct StatusView {
  std::string last_answer;        // TTFT and tok/s of the last finished answer
  std::string message;            // the last action's outcome or error
  bool message_is_error = false;
  std::string font_note;          // which font renders Korean, or why none does
  std::string modal;              // non-empty: shown once in a modal (bad database, ...)
};

// ---------------------------------------------------------------------------------------
// What the user is typing and choosing: owned by the window between frames.
// ---------------------------------------------------------------------------------------
enum class Panel : uint8_t { Settings, Model, Blocks, Fragmentation, Sharing, Quantization, Memory, Plots };

struct KvSettingsEdit {
  std::string k_type = "f16";
  std::string v_type = "f16";
  int32_t block_size = 16;
  int32_t budget_mib = 0;        // 0: the engine's default
  bool prefix_caching = true;
  int32_t host_tier_mib = 512;   // host memory for KV out of the pool (0: none); at the next model load
};

enum class Theme : uint8_t { Dark, Light };

// The HTTP server's address as the user edits it (applied when serving starts).
struct ServeEdit {
  std::string host = "127.0.0.1";   // not loopback: needs api_key
  int32_t port = 8080;              // 0: any free port
  std::string api_key;
  bool keep_chats = true;           // answered chats become conversations in the window
};

// The remote server as the user types it in the model picker.
struct RemoteEdit {
  std::string url = "http://127.0.0.1:8080";
  std::string api_key;
  bool open = false;                // the picker's server popup is showing
};

// The window's arrangement, remembered across restarts: its size, the columns' shares of its
// width (conversations on the left, the side panels on the right; the chat takes the rest),
// the colours and the font size.
struct WindowLayout {
  int32_t width = 1280;
  int32_t height = 800;
  float left_share = 0.17f;
  float right_share = 0.42f;
  Theme theme = Theme::Dark;
  float font_size = 17.0f;   // pixels at a content scale of 1 (ui/font_size.h)
};

inline constexpr float kMinLeftShare = 0.08f, kMaxLeftShare = 0.40f;
inline constexpr float kMinRightShare = 0.20f, kMaxRightShare = 0.60f;

// ---------------------------------------------------------------------------------------
// Library: the GGUF models on this machine (app/library), and the file browser
// ---------------------------------------------------------------------------------------
// One KV type's room for a library model in the memory left after its weights.
struct LibraryFitView {
  std::string kv_type;            // "f16", "int8", ...
  int64_t max_context = 0;        // tokens of one conversation
  int64_t conversations = 0;      // 4K-token conversations at once
};

struct LibraryEntryView {
  std::string name;               // as its source names it ("qwen3:8b", "org/repo", ...)
  std::string source;             // "LM Studio", "Ollama", "Hugging Face", "llama.cpp", "folder"
  std::string path;               // the file to open (a split model's first shard)
  uint64_t size_bytes = 0;
  std::string arch;
  uint64_t params = 0;
  std::string weight_type;
  int64_t context_length = 0;
  std::string chat_template;
  int32_t projectors = 0;         // vision projector files beside it
  std::vector<LibraryFitView> fits;   // [KV types]; empty when it cannot run here
  std::string error;              // why it cannot be opened or run
  bool broken = false;            // not a valid GGUF
};

struct LibraryView {
  std::vector<LibraryEntryView> entries;
  std::vector<std::string> folders;     // the user's own folders (remembered)
  std::vector<std::string> problems;    // folders that could not be read
  bool scanning = false;
  uint64_t memory_bytes = 0;            // the memory the fits are for
  std::string summary;                  // "12 models, scanned in 0.4 s (3 read, 9 unchanged)"
};

struct FileBrowserEntry {
  std::string name;
  bool is_folder = false;
  bool is_model = false;           // named .gguf
  uint64_t size_bytes = 0;
};

// The folder the file browser shows, listed by the app: folders first, then files by name.
struct FileBrowserView {
  std::string folder;
  std::vector<FileBrowserEntry> entries;
  std::string error;               // the folder could not be listed
};

// What the file browser is choosing (UiState::browser_purpose).
enum class BrowsePurpose : uint8_t { None, OpenModel, AddLibraryFolder };

struct UiState {
  std::string composer;
  std::string search;
  std::string model_path;
  std::string preset_name;
  int64_t editing_message = 0;   // a user message being edited; 0: none
  std::string edit_text;
  std::vector<int64_t> selectable_messages;   // shown as selectable text
  int64_t rename_conversation = 0;
  std::string rename_text;
  int64_t delete_conversation = 0;            // waiting for confirmation
  int64_t delete_message = 0;                 // waiting for confirmation
  float font_size_edit = 0;                   // the font size slider while dragged; 0: not dragged
  Panel panel = Panel::Settings;
  bool panel_requested = false;  // select `panel` on the next frame (scripts, menus)
  KvSettingsEdit kv_edit;
  ServeEdit serve_edit;
  RemoteEdit remote_edit;
  WindowLayout layout_prefs;
  std::string chat_template;                  // the user's choice; "": the model's own
  std::vector<std::string> chat_templates;    // the names offered
  std::vector<int32_t> block_sizes;           // the KV block sizes offered
  bool scroll_chat_to_bottom = false;
  bool show_prompt = false;                   // the chat shows the prompt as the model sees it, not the messages
  bool focus_composer = false;                // put the keyboard focus there on the next frame
  bool focus_search = false;
  int32_t variants = 3;                       // answers the Variants button writes at once
  bool show_library = false;                  // the middle column shows the library, not the chat
  std::string library_filter;                 // text a listed model's name or path contains
  std::string library_arch;                   // "": every architecture
  int32_t library_max_gib = 0;                // 0: any size
  BrowsePurpose browser_purpose = BrowsePurpose::None;   // the file browser is open for this
  std::string browser_path;                   // the path bar as typed
  int32_t browser_selected = -1;              // index into browser.entries; -1: none
  bool browser_all_files = false;             // list every file, not only .gguf
  std::string file_prompt;                    // "md" / "json": export to file_path; "import": from it
  std::string file_path;
  MarkdownCache markdown;                     // the shown messages, parsed
  LayoutReport layout;                        // the last frame's widths, needed vs had
};

struct ViewModel {
  std::vector<ConversationSummary> conversations;
  ChatView chat;
  std::vector<PresetView> presets;
  SamplingView sampling;
  ModelView model;
  KvView kv;
  std::vector<KvTypeCost> kv_types;
  MemoryView memory;
  EngineView engine;
  TimeSeriesView plots;
  ServeView serve;
  RemoteView remote;
  LibraryView library;
  FileBrowserView browser;
  StatusView status;
  UiState ui;
};

}  // namespace kvdesk::ui
