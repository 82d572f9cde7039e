// ConversationStore: everything kvdesk keeps between runs, in one SQLite file. Conversations hold
// a tree of messages (editing a past message and resending adds a sibling branch; old branches
// stay reachable), plus system-prompt presets, settings, recent models and an optional saved KV
// cache per conversation. Every call commits before it returns. One thread at a time.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/store/sqlite_db.h"
#include "app/store/store_types.h"

namespace kvdesk::store {

// $XDG_DATA_HOME/kvdesk/kvdesk.db, else ~/.local/share/kvdesk/kvdesk.db.
std::filesystem::path default_database_path();

struct StoreOptions {
  int busy_timeout_ms = 3000;   // how long to wait for another program's lock before failing
  bool verify_on_open = true;   // PRAGMA quick_check on open: reads the whole file once
  int64_t max_page_count = 0;   // 0: no limit; else the file's size cap in pages (tests: a full disk)
};

struct NewMessage {
  ConversationId conversation = 0;
  std::optional<MessageId> parent;   // empty: a root (the first message, or an edit of it)
  Role role = Role::User;
  std::string_view content;
  MessageStatus status = MessageStatus::Complete;
  std::string_view fields_json = {};   // see Message::fields_json
};

inline constexpr int kMaxRecentModels = 10;

class ConversationStore {
 public:
  // Opens (creating the file and its folder when missing) and migrates to the current schema.
  // Throws kvdesk::Error naming the file when it is locked, read-only, corrupt, not a kvdesk
  // database or from a newer kvdesk; a refused file is left byte for byte as it was.
  static ConversationStore open(const std::filesystem::path& path, const StoreOptions& options = {});
  // Never writes; every change throws kvdesk::Error. The file must exist at the current schema.
  static ConversationStore open_read_only(const std::filesystem::path& path, const StoreOptions& options = {});

  ConversationStore(ConversationStore&&) noexcept;
  ConversationStore& operator=(ConversationStore&&) noexcept;
  ~ConversationStore();

  const std::string& path() const { return db_->path(); }

  // --- conversations (conversation_store.cpp) ---
  ConversationId create_conversation(std::string_view title, std::string_view system_prompt = {});
  void rename_conversation(ConversationId id, std::string_view title);
  // A changed system prompt drops the root messages' token ids (their spans hold the old one).
  void set_system_prompt(ConversationId id, std::string_view system_prompt);
  // Records where the conversation's answers are generated now ("in-process" or a server's URL).
  void set_conversation_engine(ConversationId id, std::string_view engine);
  void delete_conversation(ConversationId id);   // with its messages and saved KV
  std::optional<Conversation> conversation(ConversationId id);
  // Newest activity first. A non-empty `search` keeps conversations whose title or any message
  // (on any branch) contains it, ignoring ASCII case.
  std::vector<Conversation> list_conversations(std::string_view search = {});

  // A conversation's own settings (no row: all empty). Numbers stored as anything but numbers
  // (a hand-edited file) read as empty. Setting all-empty settings removes the row.
  ConversationSettings conversation_settings(ConversationId id);
  void set_conversation_settings(ConversationId id, const ConversationSettings& settings);

  // --- messages and branches (conversation_store.cpp) ---
  // Adds a message and makes it the conversation's active leaf; committed when it returns, so a
  // user message is safe before generation starts (it survives a crash of kvdesk; with WAL and
  // synchronous=NORMAL only a power cut can lose the last commits). The parent must be in the
  // same conversation.
  MessageId add_message(const NewMessage& message);
  // The streaming save: one UPDATE by primary key, cheap enough to call every second.
  void update_message(MessageId id, std::string_view content, MessageStatus status);
  // The final save of an answer: text, status and what generating it took.
  void finish_message(MessageId id, std::string_view content, MessageStatus status, const AnswerStats& stats);
  // Stores messages' token ids (their spans of the conversation's token sequence), in one commit.
  void set_message_tokens(std::span<const std::pair<MessageId, MessageTokens>> updates);
  std::optional<Message> message(MessageId id);
  // The messages from a root to the conversation's active leaf (what the chat shows).
  std::vector<Message> branch_path(ConversationId id);
  std::vector<Message> children(MessageId id);   // oldest first
  std::vector<Message> roots(ConversationId id);  // the root messages, oldest first
  // The messages sharing `id`'s parent, `id` included, oldest first: the "< 2/3 >" of a branch.
  std::vector<Message> siblings(MessageId id);
  void set_active_leaf(ConversationId id, MessageId leaf);
  // The leaf reached from `id` by always taking the newest child: where switching to a branch lands.
  MessageId newest_leaf_under(MessageId id);
  // Deletes a message with every reply under it. Each later message was written with it in its
  // context: keeping them would leave answers to a question nobody asked, or a turn that
  // follows an answer that no longer exists. Where the active branch ran through it, the
  // branch moves to a remaining sibling's newest leaf (the one before it, else after it), else
  // it ends at the message's parent (nothing, for a root without siblings). Returns how many
  // messages were deleted. One transaction.
  int64_t delete_message(MessageId id);
  ConversationTree load_tree(ConversationId id);
  // Adds `tree` as a new conversation (new ids, the same shape and active leaf); returns its id.
  ConversationId import_conversation(const ConversationTree& tree);
  // Marks answers left Streaming by a kvdesk that did not finish them as Interrupted. Call it at
  // startup, before this process streams anything; returns how many were marked.
  int64_t mark_interrupted_answers();

  // --- presets, settings, recent models, saved KV (store_preferences.cpp) ---
  PresetId create_preset(std::string_view name, std::string_view system_prompt);   // names are unique
  void update_preset(PresetId id, std::string_view name, std::string_view system_prompt);
  void delete_preset(PresetId id);
  std::vector<Preset> list_presets();   // by name

  std::optional<std::string> setting(std::string_view key);
  void set_setting(std::string_view key, std::string_view value);
  void erase_setting(std::string_view key);

  // Moves `path` to the front of the recent models, keeping the newest kMaxRecentModels.
  void note_model_opened(std::string_view path);
  std::vector<RecentModel> recent_models();   // most recent first
  void forget_recent_model(std::string_view path);

  // A conversation's saved KV cache. `key` identifies the model and KV settings; load_kv returns
  // nothing when none is saved or it was saved under another key. Stored zstd-compressed.
  void save_kv(ConversationId id, std::string_view key, std::span<const uint8_t> bytes);
  // save_kv within a cap on all saved KV together (stored bytes): other conversations' KV is
  // dropped, least recently saved first, until the new one fits. One transaction: a crash
  // leaves the old KV or the new one, never a torn one, and no message is touched. A KV larger
  // than the cap on its own is not saved (the conversation keeps its previous one).
  KvSaveResult save_kv_capped(ConversationId id, std::string_view key, std::span<const uint8_t> bytes,
                              int64_t max_total_bytes);
  int64_t total_kv_bytes();   // stored bytes of every saved KV
  std::optional<std::vector<uint8_t>> load_kv(ConversationId id, std::string_view key);
  std::optional<KvBlobInfo> kv_info(ConversationId id);
  void clear_kv(ConversationId id);

  // --- KV quality measurements (kv_quality_store.cpp) ---
  // Stores one measurement, replacing the one of the same model, type and text.
  void save_kv_quality(const KvQualityRecord& record);
  // The model's measurements on that text, by KV type name.
  std::vector<KvQualityRecord> kv_quality(std::string_view model_identity, std::string_view text_id);

 private:
  explicit ConversationStore(std::unique_ptr<Database> db);
  void require_conversation(ConversationId id);
  Message require_message(MessageId id);
  [[noreturn]] void throw_parent_loop(MessageId id);   // the file's parents form a loop through id
  MessageId insert_message(const Message& m);
  void set_leaf_unchecked(ConversationId id, std::optional<MessageId> leaf, bool touch);
  void write_settings(ConversationId id, const ConversationSettings& settings);   // inside a transaction

  std::unique_ptr<Database> db_;
};

}  // namespace kvdesk::store
