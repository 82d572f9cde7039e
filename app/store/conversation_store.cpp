// ConversationStore: opening, conversations, messages and branch navigation. Every message's id
// is greater than its parent's (parents are inserted first), so id order lists parents before
// children. Presets, settings, recent models and saved KV are in store_preferences.cpp.
#include "app/store/conversation_store.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "app/store/schema.h"
#include "engine/error.h"

namespace kvdesk::store {
namespace fs = std::filesystem;

namespace {

// The columns read_message() expects, in order; queries alias the messages table as m.
const std::string kMessageSelect =
    "SELECT m.id, m.conversation_id, m.parent_id, m.role, m.content, m.status, m.created_at, m.updated_at, "
    "m.model, m.prompt_tokens, m.completion_tokens, m.ttft_ms, m.decode_tok_s, m.finish_reason, m.token_identity, "
    "m.token_ids, m.fields_json FROM ";

// The message's stored token ids, or why they cannot be used (the text then stands in for them).
void read_tokens(const Statement& s, Message& m, const std::string& path) {
  if (s.is_null(15)) return;
  try {
    if (s.is_null(14)) throw Error("no identity");
    m.tokens = MessageTokens{s.column_text(14), decode_token_ids(s.column_blob(15))};
  } catch (const Error& e) {
    m.tokens_damaged = path + ": message " + std::to_string(m.id) + ": its stored token ids are damaged (" + e.what() +
                       "); its text is used instead";
  }
}

Message read_message(const Statement& s, const std::string& path) {
  Message m;
  m.id = s.column_int(0);
  m.conversation_id = s.column_int(1);
  m.parent_id = s.column_optional_int(2);
  const std::optional<Role> role = parse_role(s.column_text(3));
  const std::optional<MessageStatus> status = parse_status(s.column_text(5));
  if (!role || !status) throw Error(path + ": message " + std::to_string(m.id) + " has an unknown role or status");
  m.role = *role;
  m.content = s.column_text(4);
  m.status = *status;
  m.created_at_ms = s.column_int(6);
  m.updated_at_ms = s.column_int(7);
  if (!s.is_null(13)) {
    m.stats = AnswerStats{
        .model = s.column_text(8),
        .prompt_tokens = s.column_int(9),
        .completion_tokens = s.column_int(10),
        .ttft_ms = s.column_double(11),
        .decode_tok_s = s.column_double(12),
        .finish_reason = s.column_text(13),
    };
  }
  read_tokens(s, m, path);
  if (!s.is_null(16)) m.fields_json = s.column_text(16);
  return m;
}

std::vector<Message> read_messages(Statement& s, const std::string& path) {
  std::vector<Message> out;
  while (s.step()) out.push_back(read_message(s, path));
  return out;
}

constexpr const char* kConversationSelect =
    "SELECT id, title, system_prompt, active_leaf_id, created_at, updated_at, engine FROM conversations c ";

Conversation read_conversation(const Statement& s) {
  return Conversation{
      .id = s.column_int(0),
      .title = s.column_text(1),
      .system_prompt = s.column_text(2),
      .active_leaf_id = s.column_optional_int(3),
      .created_at_ms = s.column_int(4),
      .updated_at_ms = s.column_int(5),
      .engine = s.column_text(6),
  };
}

// A LIKE pattern matching `text` anywhere; \ escapes LIKE's own wildcards in it.
std::string like_pattern(std::string_view text) {
  std::string p = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') p += '\\';
    p += c;
  }
  return p + "%";
}

}  // namespace

fs::path default_database_path() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && *xdg == '/') return fs::path(xdg) / "kvdesk" / "kvdesk.db";   // the spec ignores relative values
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* user = ::getpwuid(::getuid());
    home = user && user->pw_dir ? user->pw_dir : ".";
  }
  return fs::path(home) / ".local" / "share" / "kvdesk" / "kvdesk.db";
}

// ---------------------------------------------------------------------------------------------
// Opening
// ---------------------------------------------------------------------------------------------

ConversationStore::ConversationStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
ConversationStore::ConversationStore(ConversationStore&&) noexcept = default;
ConversationStore& ConversationStore::operator=(ConversationStore&&) noexcept = default;
ConversationStore::~ConversationStore() = default;

ConversationStore ConversationStore::open(const fs::path& path, const StoreOptions& options) {
  if (path.empty()) throw Error("no database path given");
  if (path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw Error(path.string() + ": cannot create the folder " + path.parent_path().string() + ": " + ec.message());
  }
  auto db = std::make_unique<Database>(path.string(), OpenMode::ReadWrite, options.busy_timeout_ms);
  if (db->read_only()) {
    throw Error(path.string() + ": the database is read-only; check the permissions of the file and of its folder, "
                                "or open it read-only");
  }
  db->exec("PRAGMA foreign_keys = ON");
  prepare_schema(*db, OpenMode::ReadWrite, options.verify_on_open);
  if (options.max_page_count > 0) db->exec("PRAGMA max_page_count = " + std::to_string(options.max_page_count));
  return ConversationStore(std::move(db));
}

ConversationStore ConversationStore::open_read_only(const fs::path& path, const StoreOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path.string() + ": no such database file");
  auto db = std::make_unique<Database>(path.string(), OpenMode::ReadOnly, options.busy_timeout_ms);
  prepare_schema(*db, OpenMode::ReadOnly, options.verify_on_open);
  return ConversationStore(std::move(db));
}

// ---------------------------------------------------------------------------------------------
// Conversations
// ---------------------------------------------------------------------------------------------

ConversationId ConversationStore::create_conversation(std::string_view title, std::string_view system_prompt) {
  const int64_t now = unix_time_ms();
  db_->prepare("INSERT INTO conversations (title, system_prompt, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)")
      .bind(1, title)
      .bind(2, system_prompt)
      .bind(3, now)
      .run();
  return db_->last_insert_id();
}

void ConversationStore::rename_conversation(ConversationId id, std::string_view title) {
  db_->prepare("UPDATE conversations SET title = ?2, updated_at = ?3 WHERE id = ?1")
      .bind(1, id)
      .bind(2, title)
      .bind(3, unix_time_ms())
      .run();
  if (db_->changes() == 0) require_conversation(id);
}

// The first messages' token spans hold the system turn as it was rendered: a new system prompt
// drops them, so the next turn renders those messages from their text.
void ConversationStore::set_system_prompt(ConversationId id, std::string_view system_prompt) {
  Transaction tx(*db_);
  const std::optional<Conversation> c = conversation(id);
  if (!c) throw Error(path() + ": conversation " + std::to_string(id) + " does not exist (deleted?)");
  if (c->system_prompt == system_prompt) return;
  db_->prepare("UPDATE conversations SET system_prompt = ?2, updated_at = ?3 WHERE id = ?1")
      .bind(1, id)
      .bind(2, system_prompt)
      .bind(3, unix_time_ms())
      .run();
  db_->prepare("UPDATE messages SET token_identity = NULL, token_ids = NULL WHERE conversation_id = ?1 AND parent_id IS NULL")
      .bind(1, id)
      .run();
  tx.commit();
}

void ConversationStore::set_conversation_engine(ConversationId id, std::string_view engine) {
  require_conversation(id);
  db_->prepare("UPDATE conversations SET engine = ?2 WHERE id = ?1").bind(1, id).bind(2, engine).run();
}

void ConversationStore::delete_conversation(ConversationId id) {
  db_->prepare("DELETE FROM conversations WHERE id = ?1").bind(1, id).run();
}

std::optional<Conversation> ConversationStore::conversation(ConversationId id) {
  static const std::string sql = std::string(kConversationSelect) + "WHERE id = ?1";
  Statement s = db_->prepare(sql);
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_conversation(s);
}

// note: search is a LIKE scan, not FTS5: a full-text index would be rewritten on every streaming
// save, and a desktop's chat history scans in well under a second.
std::vector<Conversation> ConversationStore::list_conversations(std::string_view search) {
  static const std::string sql = std::string(kConversationSelect) +
                                 "WHERE ?1 IS NULL OR c.title LIKE ?1 ESCAPE '\\' OR EXISTS ("
                                 "SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?1 ESCAPE '\\') "
                                 "ORDER BY c.updated_at DESC, c.id DESC";
  Statement s = db_->prepare(sql);
  if (search.empty()) {
    s.bind_null(1);
  } else {
    s.bind(1, like_pattern(search));
  }
  std::vector<Conversation> out;
  while (s.step()) out.push_back(read_conversation(s));
  return out;
}

void ConversationStore::require_conversation(ConversationId id) {
  Statement s = db_->prepare("SELECT 1 FROM conversations WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) throw Error(path() + ": conversation " + std::to_string(id) + " does not exist (deleted?)");
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

Message ConversationStore::require_message(MessageId id) {
  std::optional<Message> m = message(id);
  if (!m) throw Error(path() + ": message " + std::to_string(id) + " does not exist (deleted?)");
  return *m;
}

MessageId ConversationStore::insert_message(const Message& m) {
  Statement s = db_->prepare(
      "INSERT INTO messages (conversation_id, parent_id, role, content, status, created_at, updated_at, model, "
      "prompt_tokens, completion_tokens, ttft_ms, decode_tok_s, finish_reason, token_identity, token_ids, fields_json) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
  s.bind(1, m.conversation_id)
      .bind(2, m.parent_id)
      .bind(3, role_name(m.role))
      .bind(4, m.content)
      .bind(5, status_name(m.status))
      .bind(6, m.created_at_ms)
      .bind(7, m.updated_at_ms);
  if (m.stats) {
    s.bind(8, m.stats->model)
        .bind(9, m.stats->prompt_tokens)
        .bind(10, m.stats->completion_tokens)
        .bind(11, m.stats->ttft_ms)
        .bind(12, m.stats->decode_tok_s)
        .bind(13, m.stats->finish_reason);
  }
  if (m.tokens) s.bind(14, m.tokens->identity).bind_blob(15, encode_token_ids(m.tokens->ids));
  if (!m.fields_json.empty()) s.bind(16, m.fields_json);
  s.run();
  return db_->last_insert_id();
}

void ConversationStore::set_leaf_unchecked(ConversationId id, std::optional<MessageId> leaf, bool touch) {
  db_->prepare("UPDATE conversations SET active_leaf_id = ?2, updated_at = CASE WHEN ?3 THEN ?4 ELSE updated_at END "
               "WHERE id = ?1")
      .bind(1, id)
      .bind(2, leaf)
      .bind(3, int64_t{touch})
      .bind(4, unix_time_ms())
      .run();
}

MessageId ConversationStore::add_message(const NewMessage& n) {
  Transaction tx(*db_);
  require_conversation(n.conversation);
  if (n.parent && require_message(*n.parent).conversation_id != n.conversation) {
    throw Error(path() + ": message " + std::to_string(*n.parent) + " belongs to another conversation");
  }
  const int64_t now = unix_time_ms();
  const MessageId id = insert_message(Message{
      .conversation_id = n.conversation,
      .parent_id = n.parent,
      .role = n.role,
      .content = std::string(n.content),
      .status = n.status,
      .created_at_ms = now,
      .updated_at_ms = now,
      .stats = std::nullopt,
      .tokens = std::nullopt,
      .tokens_damaged = {},
      .fields_json = std::string(n.fields_json),
  });
  set_leaf_unchecked(n.conversation, id, true);
  tx.commit();
  return id;
}

void ConversationStore::update_message(MessageId id, std::string_view content, MessageStatus status) {
  db_->prepare("UPDATE messages SET content = ?2, status = ?3, updated_at = ?4 WHERE id = ?1")
      .bind(1, id)
      .bind(2, content)
      .bind(3, status_name(status))
      .bind(4, unix_time_ms())
      .run();
  if (db_->changes() == 0) require_message(id);
}

void ConversationStore::finish_message(MessageId id, std::string_view content, MessageStatus status,
                                       const AnswerStats& stats) {
  Transaction tx(*db_);
  const int64_t now = unix_time_ms();
  db_->prepare("UPDATE messages SET content = ?2, status = ?3, updated_at = ?4, model = ?5, prompt_tokens = ?6, "
               "completion_tokens = ?7, ttft_ms = ?8, decode_tok_s = ?9, finish_reason = ?10 WHERE id = ?1")
      .bind(1, id)
      .bind(2, content)
      .bind(3, status_name(status))
      .bind(4, now)
      .bind(5, stats.model)
      .bind(6, stats.prompt_tokens)
      .bind(7, stats.completion_tokens)
      .bind(8, stats.ttft_ms)
      .bind(9, stats.decode_tok_s)
      .bind(10, stats.finish_reason)
      .run();
  if (db_->changes() == 0) require_message(id);
  db_->prepare("UPDATE conversations SET updated_at = ?2 WHERE id = (SELECT conversation_id FROM messages WHERE id = ?1)")
      .bind(1, id)
      .bind(2, now)
      .run();
  tx.commit();
}

void ConversationStore::set_message_tokens(std::span<const std::pair<MessageId, MessageTokens>> updates) {
  Transaction tx(*db_);
  for (const auto& [id, tokens] : updates) {
    db_->prepare("UPDATE messages SET token_identity = ?2, token_ids = ?3 WHERE id = ?1")
        .bind(1, id)
        .bind(2, tokens.identity)
        .bind_blob(3, encode_token_ids(tokens.ids))
        .run();
    if (db_->changes() == 0) require_message(id);
  }
  tx.commit();
}

std::optional<Message> ConversationStore::message(MessageId id) {
  static const std::string sql = kMessageSelect + "messages m WHERE m.id = ?1";
  Statement s = db_->prepare(sql);
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_message(s, path());
}

// A path from the leaf up holds each of the conversation's messages at most once, so the walk
// stops after as many steps as there are messages: a damaged file whose parents form a loop
// ends the walk on a message that still has a parent, which no root has.
std::vector<Message> ConversationStore::branch_path(ConversationId id) {
  static const std::string sql =
      "WITH RECURSIVE path(id, depth) AS ("
      "  SELECT active_leaf_id, 0 FROM conversations WHERE id = ?1 AND active_leaf_id IS NOT NULL"
      "  UNION ALL"
      "  SELECT m.parent_id, path.depth + 1 FROM messages m JOIN path ON m.id = path.id"
      "  WHERE m.parent_id IS NOT NULL"
      "    AND path.depth < (SELECT count(*) FROM messages WHERE conversation_id = ?1)) " +
      kMessageSelect + "path JOIN messages m ON m.id = path.id ORDER BY path.depth DESC";
  Statement s = db_->prepare(sql);
  s.bind(1, id);
  std::vector<Message> messages = read_messages(s, path());
  if (!messages.empty() && messages.front().parent_id) throw_parent_loop(messages.front().id);
  return messages;
}

void ConversationStore::throw_parent_loop(MessageId id) {
  throw Error(path() + ": message " + std::to_string(id) +
              " is its own ancestor (the file is damaged); it was left as it is: restore a backup or "
              "export the conversation and delete it");
}

std::vector<Message> ConversationStore::children(MessageId id) {
  static const std::string sql = kMessageSelect + "messages m WHERE m.parent_id = ?1 ORDER BY m.id";
  Statement s = db_->prepare(sql);
  s.bind(1, id);
  return read_messages(s, path());
}

std::vector<Message> ConversationStore::roots(ConversationId id) {
  static const std::string sql =
      kMessageSelect + "messages m WHERE m.conversation_id = ?1 AND m.parent_id IS NULL ORDER BY m.id";
  Statement s = db_->prepare(sql);
  s.bind(1, id);
  return read_messages(s, path());
}

std::vector<Message> ConversationStore::siblings(MessageId id) {
  const Message m = require_message(id);
  return m.parent_id ? children(*m.parent_id) : roots(m.conversation_id);
}

void ConversationStore::set_active_leaf(ConversationId id, MessageId leaf) {
  if (require_message(leaf).conversation_id != id) {
    throw Error(path() + ": message " + std::to_string(leaf) + " is not in conversation " + std::to_string(id));
  }
  set_leaf_unchecked(id, leaf, false);
}

MessageId ConversationStore::newest_leaf_under(MessageId id) {
  const MessageId start = id;
  std::unordered_set<MessageId> seen{id};
  require_message(id);
  for (;;) {
    Statement s = db_->prepare("SELECT id FROM messages WHERE parent_id = ?1 ORDER BY id DESC LIMIT 1");
    s.bind(1, id);
    if (!s.step()) return id;
    id = s.column_int(0);
    if (!seen.insert(id).second) throw_parent_loop(start);
  }
}

int64_t ConversationStore::delete_message(MessageId id) {
  Transaction tx(*db_);
  const Message m = require_message(id);
  // UNION, not UNION ALL: a damaged file's loop of parents ends the walk instead of repeating.
  static const std::string subtree =
      "WITH RECURSIVE sub(id) AS (SELECT ?1 UNION SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id) ";
  Statement count = db_->prepare(subtree + "SELECT count(*), (SELECT active_leaf_id FROM conversations WHERE id = ?2) "
                                           "IN (SELECT id FROM sub) FROM sub");
  count.bind(1, id).bind(2, m.conversation_id);
  count.step();
  const int64_t deleted = count.column_int(0);
  const bool on_active_branch = count.column_int(1) != 0;
  std::optional<MessageId> leaf = m.parent_id;
  const std::vector<Message> siblings_of = siblings(id);
  const auto self = std::find_if(siblings_of.begin(), siblings_of.end(), [&](const Message& s) { return s.id == id; });
  if (self != siblings_of.begin()) {
    leaf = newest_leaf_under(std::prev(self)->id);
  } else if (std::next(self) != siblings_of.end()) {
    leaf = newest_leaf_under(std::next(self)->id);
  }
  db_->prepare("DELETE FROM messages WHERE id = ?1").bind(1, id).run();
  if (on_active_branch) {
    set_leaf_unchecked(m.conversation_id, leaf, true);
  } else {
    db_->prepare("UPDATE conversations SET updated_at = ?2 WHERE id = ?1").bind(1, m.conversation_id).bind(2, unix_time_ms()).run();
  }
  tx.commit();
  return deleted;
}

ConversationTree ConversationStore::load_tree(ConversationId id) {
  std::optional<Conversation> c = conversation(id);
  if (!c) throw Error(path() + ": conversation " + std::to_string(id) + " does not exist (deleted?)");
  static const std::string sql = kMessageSelect + "messages m WHERE m.conversation_id = ?1 ORDER BY m.id";
  Statement s = db_->prepare(sql);
  s.bind(1, id);
  return ConversationTree{.conversation = std::move(*c), .messages = read_messages(s, path()),
                          .settings = conversation_settings(id)};
}

ConversationId ConversationStore::import_conversation(const ConversationTree& tree) {
  Transaction tx(*db_);
  const int64_t now = unix_time_ms();
  const Conversation& c = tree.conversation;
  db_->prepare("INSERT INTO conversations (title, system_prompt, created_at, updated_at) VALUES (?1, ?2, ?3, ?4)")
      .bind(1, c.title)
      .bind(2, c.system_prompt)
      .bind(3, c.created_at_ms ? c.created_at_ms : now)
      .bind(4, c.updated_at_ms ? c.updated_at_ms : now)
      .run();
  const ConversationId id = db_->last_insert_id();
  std::unordered_map<MessageId, MessageId> new_ids;   // the tree's id -> the id in this database
  for (const Message& m : tree.messages) {
    Message copy = m;
    copy.conversation_id = id;
    if (m.parent_id) {
      const auto parent = new_ids.find(*m.parent_id);
      if (parent == new_ids.end()) {
        throw Error("importing '" + c.title + "': message " + std::to_string(m.id) +
                    " comes before its parent or its parent is missing");
      }
      copy.parent_id = parent->second;
    }
    if (!copy.created_at_ms) copy.created_at_ms = now;
    if (!copy.updated_at_ms) copy.updated_at_ms = copy.created_at_ms;
    if (!new_ids.emplace(m.id, insert_message(copy)).second) {
      throw Error("importing '" + c.title + "': message id " + std::to_string(m.id) + " appears twice");
    }
  }
  if (c.active_leaf_id) {
    const auto leaf = new_ids.find(*c.active_leaf_id);
    if (leaf == new_ids.end()) {
      throw Error("importing '" + c.title + "': the active leaf " + std::to_string(*c.active_leaf_id) + " is not a message");
    }
    set_leaf_unchecked(id, leaf->second, false);
  }
  write_settings(id, tree.settings);
  tx.commit();
  return id;
}

int64_t ConversationStore::mark_interrupted_answers() {
  db_->prepare("UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'").run();
  return db_->changes();
}

}  // namespace kvdesk::store
