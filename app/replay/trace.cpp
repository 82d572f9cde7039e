// Parsing chat traces (see trace.h), branch turns checked against the branch they continue.
#include "app/replay/trace.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>

#include "engine/error.h"

namespace kvdesk {

namespace {

// Reads the turn's kind, checking it against the user messages on the conversation's branch so
// far (user_messages; nullptr before its first turn) and updating that count.
void read_kind(const nlohmann::json& j, TraceTurn& t, int32_t* user_messages) {
  const bool regenerate = j.value("regenerate", false);
  const bool edit = j.contains("edit");
  if (regenerate && edit) throw Error("a turn either regenerates or edits, not both");
  if ((regenerate || edit) && !user_messages) throw Error("a conversation's first turn cannot regenerate or edit");
  if (regenerate) {
    t.kind = TurnKind::Regenerate;
    return;
  }
  t.user = j.at("user").get<std::string>();
  if (!edit) {
    t.kind = TurnKind::Send;
    if (user_messages) ++*user_messages;
    return;
  }
  t.kind = TurnKind::Edit;
  t.edit_user = j.at("edit").get<int32_t>();
  if (t.edit_user < 0 || t.edit_user >= *user_messages) {
    throw Error("edit " + std::to_string(t.edit_user) + " names no user message (the branch has " +
                std::to_string(*user_messages) + ")");
  }
  *user_messages = t.edit_user + 1;
}

}  // namespace

const char* turn_kind_name(TurnKind kind) {
  switch (kind) {
    case TurnKind::Send: return "send";
    case TurnKind::Regenerate: return "regenerate";
    case TurnKind::Edit: return "edit";
  }
  return "?";
}

std::vector<TraceConversation> read_trace(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw Error(path + ": is a folder, not a trace file");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the trace file");
  return parse_trace(in, path);
}

std::vector<TraceConversation> parse_trace(std::istream& in, const std::string& name) {
  std::vector<TraceConversation> conversations;
  std::map<std::string, size_t> index;
  std::map<std::string, int32_t> user_messages;   // on each conversation's current branch
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = name + ":" + std::to_string(number) + ": ";
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      TraceTurn t;
      const std::string conversation = j.at("conversation").get<std::string>();
      const bool first = index.find(conversation) == index.end();
      read_kind(j, t, first ? nullptr : &user_messages[conversation]);
      if (first) user_messages[conversation] = 1;
      t.system = j.value("system", "");
      t.max_tokens = j.value("max_tokens", 64);
      t.temperature = j.value("temperature", 0.0f);
      t.start_ms = first ? j.value("arrival_ms", 0.0) : j.value("after_ms", 0.0);
      if (t.max_tokens < 1 || t.temperature < 0 || t.start_ms < 0) {
        throw Error("max_tokens, temperature or a time is out of range");
      }
      if (first) {
        index[conversation] = conversations.size();
        conversations.push_back(TraceConversation{conversation, {}});
      }
      conversations[index[conversation]].turns.push_back(t);
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + "bad trace line: " + e.what());
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
  }
  if (conversations.empty()) throw Error(name + ": the trace has no turns");
  return conversations;
}

}  // namespace kvdesk
