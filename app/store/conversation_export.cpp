// Markdown and JSON export, JSON import (see conversation_export.h).
#include "app/store/conversation_export.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <unordered_map>

#include "app/store/bounded_json.h"
#include "app/store/message_fields.h"
#include "app/store/openai_transcript.h"
#include "engine/error.h"

namespace kvdesk::store {
namespace {

using nlohmann::json;

json stats_to_json(const AnswerStats& s) {
  return {{"model", s.model},
          {"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.completion_tokens},
          {"ttft_ms", s.ttft_ms},
          {"decode_tok_s", s.decode_tok_s},
          {"finish_reason", s.finish_reason}};
}

json message_to_json(const Message& m) {
  json j = {{"id", m.id},
            {"parent_id", m.parent_id ? json(*m.parent_id) : json(nullptr)},
            {"role", role_name(m.role)},
            {"content", m.content},
            {"status", status_name(m.status)},
            {"created_at_ms", m.created_at_ms},
            {"updated_at_ms", m.updated_at_ms}};
  if (m.stats) j["stats"] = stats_to_json(*m.stats);
  if (m.tokens) j["tokens"] = {{"identity", m.tokens->identity}, {"ids", m.tokens->ids}};
  add_fields_to_message_json(m.fields_json, j);
  return j;
}

// Typed reads of an imported object; every failure names the place in the file.
[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error("conversation JSON: " + where + ": " + what);
}

const json& field(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) bad(where, std::string("'") + key + "' is missing");
  return *it;
}

std::string text_field(const json& obj, const char* key, const std::string& where, bool required = true) {
  if (!required && !obj.contains(key)) return {};
  const json& v = field(obj, key, where);
  if (!v.is_string()) bad(where, std::string("'") + key + "' must be a string");
  return v.get<std::string>();
}

int64_t int_field(const json& obj, const char* key, const std::string& where, bool required = true) {
  if (!required && !obj.contains(key)) return 0;
  const json& v = field(obj, key, where);
  if (!v.is_number_integer()) bad(where, std::string("'") + key + "' must be an integer");
  return v.get<int64_t>();
}

double number_field(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_number()) bad(where, std::string("'") + key + "' must be a number");
  return v.get<double>();
}

std::optional<int64_t> optional_id(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  return int_field(obj, key, where);
}

AnswerStats stats_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "'stats' must be an object");
  return AnswerStats{
      .model = text_field(j, "model", where),
      .prompt_tokens = int_field(j, "prompt_tokens", where),
      .completion_tokens = int_field(j, "completion_tokens", where),
      .ttft_ms = number_field(j, "ttft_ms", where),
      .decode_tok_s = number_field(j, "decode_tok_s", where),
      .finish_reason = text_field(j, "finish_reason", where),
  };
}

// Only the settings the conversation has; the others are left to the importing app's defaults.
json settings_to_json(const ConversationSettings& s) {
  json j = json::object();
  const auto put = [&](const char* key, const auto& value) {
    if (value) j[key] = *value;
  };
  put("context_length", s.context_length);
  put("max_tokens", s.max_tokens);
  put("temperature", s.temperature);
  put("top_p", s.top_p);
  put("top_k", s.top_k);
  put("min_p", s.min_p);
  put("seed", s.seed);
  put("kv_retention", s.kv_retention);
  put("kv_keep", s.kv_keep);
  return j;
}

// Types are checked here; ranges where the settings are used (an odd value falls back to the default).
ConversationSettings settings_from_json(const json& j) {
  const std::string where = "settings";
  if (!j.is_object()) bad(where, "must be an object");
  const auto integer = [&](const char* key) -> std::optional<int64_t> {
    return j.contains(key) ? std::optional(int_field(j, key, where)) : std::nullopt;
  };
  const auto number = [&](const char* key) -> std::optional<double> {
    return j.contains(key) ? std::optional(number_field(j, key, where)) : std::nullopt;
  };
  return ConversationSettings{
      .context_length = integer("context_length"),
      .max_tokens = integer("max_tokens"),
      .temperature = number("temperature"),
      .top_p = number("top_p"),
      .top_k = integer("top_k"),
      .min_p = number("min_p"),
      .seed = integer("seed"),
      .kv_retention = j.contains("kv_retention") ? std::optional(text_field(j, "kv_retention", where)) : std::nullopt,
      .kv_keep = number("kv_keep"),
  };
}

// A message's token ids: non-negative 32-bit integers (whether they fit the model's vocabulary is
// checked when a turn uses them), at most a context's worth.
constexpr size_t kMaxMessageTokenIds = size_t(1) << 24;
MessageTokens tokens_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "'tokens' must be an object");
  MessageTokens t;
  t.identity = text_field(j, "identity", where);
  const json& ids = field(j, "ids", where);
  if (!ids.is_array() || ids.size() > kMaxMessageTokenIds) bad(where, "'tokens.ids' must be an array of token ids");
  t.ids.reserve(ids.size());
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      bad(where, "'tokens.ids' holds something that is not a token id");
    }
    t.ids.push_back(int32_t(id.get<int64_t>()));
  }
  return t;
}

Message message_from_json(const json& j, size_t index) {
  const std::string where = "message #" + std::to_string(index);
  if (!j.is_object()) bad(where, "must be an object");
  Message m;
  m.id = int_field(j, "id", where);
  m.parent_id = optional_id(j, "parent_id", where);
  const std::optional<Role> role = parse_role(text_field(j, "role", where));
  if (!role) bad(where, "'role' must be system, user, assistant or tool");
  m.role = *role;
  m.content = text_field(j, "content", where);
  const std::optional<MessageStatus> status = parse_status(text_field(j, "status", where));
  if (!status) bad(where, "unknown 'status'");
  m.status = *status;
  m.created_at_ms = int_field(j, "created_at_ms", where, false);
  m.updated_at_ms = int_field(j, "updated_at_ms", where, false);
  if (j.contains("stats") && !j["stats"].is_null()) m.stats = stats_from_json(j["stats"], where);
  if (j.contains("tokens") && !j["tokens"].is_null()) m.tokens = tokens_from_json(j["tokens"], where);
  m.fields_json = fields_from_message_json(j, where);
  return m;
}

// `messages` reordered so that every parent comes before its children, keeping file order where it
// already does. Throws for duplicate ids, parents not in the file and cycles.
std::vector<Message> parents_first(std::vector<Message> messages) {
  std::unordered_map<MessageId, size_t> index;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!index.emplace(messages[i].id, i).second) bad("message id " + std::to_string(messages[i].id), "appears twice");
  }
  enum class Mark { None, Pending, Done };
  std::vector<Mark> mark(messages.size(), Mark::None);
  std::vector<size_t> order;
  for (size_t i = 0; i < messages.size(); ++i) {
    std::vector<size_t> chain;   // i and its ancestors not yet emitted, child first
    for (size_t k = i; mark[k] != Mark::Done;) {
      if (mark[k] == Mark::Pending) bad("message " + std::to_string(messages[k].id), "is its own ancestor");
      mark[k] = Mark::Pending;
      chain.push_back(k);
      const std::optional<MessageId> parent = messages[k].parent_id;
      if (!parent) break;
      const auto p = index.find(*parent);
      if (p == index.end()) {
        bad("message " + std::to_string(messages[k].id), "its parent " + std::to_string(*parent) + " is not in the file");
      }
      k = p->second;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      mark[*it] = Mark::Done;
      order.push_back(*it);
    }
  }
  std::vector<Message> out;
  out.reserve(messages.size());
  for (size_t i : order) out.push_back(std::move(messages[i]));
  return out;
}

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string quoted_block(const std::string& text) {
  std::string out = "> ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += "> ";
  }
  return out;
}

// "_model, 42 tokens, 31.2 tok/s, first token after 120 ms (stopped)_", or "" for a plain message.
std::string message_footer(const Message& m) {
  std::string parts;
  if (m.stats) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, ", %lld tokens, %.1f tok/s, first token after %.0f ms",
                  static_cast<long long>(m.stats->completion_tokens), m.stats->decode_tok_s, m.stats->ttft_ms);
    parts = one_line(m.stats->model) + numbers;
  }
  if (m.status != MessageStatus::Complete) {
    parts += std::string(parts.empty() ? "" : " ") + "(" + std::string(status_name(m.status)) + ")";
  }
  return parts.empty() ? "" : "_" + parts + "_\n\n";
}

// "User", "Assistant", "System", or "Tool result (get_weather, call_1)".
std::string markdown_heading(Role role, const MessageFields& fields) {
  switch (role) {
    case Role::User: return "User";
    case Role::Assistant: return "Assistant";
    case Role::System: return "System";
    case Role::Tool: break;
  }
  std::string about = one_line(fields.name);
  if (!fields.tool_call_id.empty()) about += (about.empty() ? "" : ", ") + one_line(fields.tool_call_id);
  return about.empty() ? "Tool result" : "Tool result (" + about + ")";
}

// `text` in a code fence longer than any run of backticks inside it.
std::string fenced(const std::string& text, const char* language) {
  size_t longest = 0;
  for (size_t run = 0, i = 0; i < text.size(); ++i) {
    run = text[i] == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + language + "\n" + text + "\n" + fence + "\n\n";
}

}  // namespace

json conversation_to_json(const ConversationTree& tree) {
  const Conversation& c = tree.conversation;
  json messages = json::array();
  for (const Message& m : tree.messages) messages.push_back(message_to_json(m));
  json out = {{"format", kConversationFormat},
          {"version", kConversationFormatVersion},
          {"id", c.id},
          {"title", c.title},
          {"system_prompt", c.system_prompt},
          {"created_at_ms", c.created_at_ms},
          {"updated_at_ms", c.updated_at_ms},
          {"active_leaf_id", c.active_leaf_id ? json(*c.active_leaf_id) : json(nullptr)},
          {"messages", std::move(messages)}};
  if (!tree.settings.empty()) out["settings"] = settings_to_json(tree.settings);
  return out;
}

ConversationTree conversation_from_json(const json& j) {
  if (!j.is_object()) bad("top level", "must be an object");
  if (text_field(j, "format", "top level") != kConversationFormat) {
    bad("top level", "'format' is not " + std::string(kConversationFormat));
  }
  const int64_t version = int_field(j, "version", "top level");
  if (version > kConversationFormatVersion) {
    bad("top level", "written by a newer kvdesk (format version " + std::to_string(version) + "); update kvdesk");
  }
  ConversationTree tree;
  Conversation& c = tree.conversation;
  c.id = int_field(j, "id", "top level", false);
  c.title = text_field(j, "title", "top level");
  c.system_prompt = text_field(j, "system_prompt", "top level", false);
  c.created_at_ms = int_field(j, "created_at_ms", "top level", false);
  c.updated_at_ms = int_field(j, "updated_at_ms", "top level", false);
  c.active_leaf_id = optional_id(j, "active_leaf_id", "top level");
  const json& messages = field(j, "messages", "top level");
  if (!messages.is_array()) bad("top level", "'messages' must be an array");
  std::vector<Message> parsed;
  for (size_t i = 0; i < messages.size(); ++i) parsed.push_back(message_from_json(messages[i], i));
  tree.messages = parents_first(std::move(parsed));
  if (j.contains("settings") && !j["settings"].is_null()) tree.settings = settings_from_json(j["settings"]);
  if (c.active_leaf_id) {
    bool found = false;
    for (const Message& m : tree.messages) found = found || m.id == *c.active_leaf_id;
    if (!found) bad("top level", "'active_leaf_id' " + std::to_string(*c.active_leaf_id) + " is not a message in the file");
  }
  return tree;
}

ConversationTree conversation_from_json_text(std::string_view text) {
  bool too_deep = false;
  const json j = parse_bounded_json(text, too_deep);
  if (too_deep) {
    throw Error("conversation JSON: the text nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  if (j.is_discarded()) throw Error("conversation JSON: the text is not valid JSON");
  return is_openai_transcript(j) ? conversation_from_openai_transcript(j) : conversation_from_json(j);
}

std::string conversation_to_markdown(const Conversation& conversation, const std::vector<Message>& path) {
  const std::string title = one_line(conversation.title);
  std::string md = "# " + (title.empty() ? std::string("Untitled conversation") : title) + "\n\n";
  if (!conversation.system_prompt.empty()) md += "**System prompt**\n\n" + quoted_block(conversation.system_prompt) + "\n\n";
  for (const Message& m : path) {
    const MessageFields fields = parse_message_fields(m.fields_json);
    md += "## " + markdown_heading(m.role, fields) + "\n\n";
    if (!m.content.empty()) md += m.content + "\n\n";
    for (const ToolCallField& call : fields.tool_calls) {
      md += "**Tool call** `" + one_line(call.name) + "`\n\n" + fenced(call.arguments, "json");
    }
    md += message_footer(m);
  }
  return md;
}

}  // namespace kvdesk::store
