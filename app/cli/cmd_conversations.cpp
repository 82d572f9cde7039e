// kvdesk-cli conversations: what the conversation database holds, read-only. Lists conversations
// with the messages of their active branch, or exports one as Markdown or JSON.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "app/cli/cli_common.h"
#include "app/store/conversation_export.h"
#include "app/store/conversation_store.h"

namespace kvdesk::cli {
namespace {

using namespace kvdesk::store;

struct ConversationsArgs {
  std::string db_path = default_database_path().string();
  bool json = false;
  std::string search;
  int64_t export_id = 0;
  bool exporting = false;
  std::string format = "md";
  bool active_branch = false;
};

std::string dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The first line of `text`, cut to about `max_bytes` without splitting a UTF-8 character.
std::string preview(const std::string& text, size_t max_bytes) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() <= max_bytes) return line;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return line.substr(0, cut) + "...";
}

// The conversation's active branch, or the error that explains why it cannot be read (a
// damaged conversation does not hide the others).
std::variant<std::vector<Message>, std::string> readable_branch(ConversationStore& store, ConversationId id) {
  try {
    return store.branch_path(id);
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

nlohmann::json listing_json(ConversationStore& store, const std::vector<Conversation>& conversations) {
  nlohmann::json list = nlohmann::json::array();
  for (const Conversation& c : conversations) {
    nlohmann::json entry{{"id", c.id}, {"title", c.title}, {"system_prompt", c.system_prompt}};
    const auto branch = readable_branch(store, c.id);
    if (const auto* error = std::get_if<std::string>(&branch)) {
      entry["error"] = *error;
      list.push_back(entry);
      continue;
    }
    nlohmann::json messages = nlohmann::json::array();
    for (const Message& m : std::get<std::vector<Message>>(branch)) {
      messages.push_back({{"id", m.id},
                          {"parent_id", m.parent_id ? nlohmann::json(*m.parent_id) : nlohmann::json(nullptr)},
                          {"role", role_name(m.role)},
                          {"content", m.content},
                          {"status", status_name(m.status)}});
    }
    entry["messages"] = messages;
    list.push_back(entry);
  }
  return {{"conversations", list}};
}

void print_listing(ConversationStore& store, const std::vector<Conversation>& conversations) {
  for (const Conversation& c : conversations) {
    std::printf("#%lld  %s\n", static_cast<long long>(c.id), preview(c.title, 100).c_str());
    if (!c.system_prompt.empty()) std::printf("    %-9s  %s\n", "system", preview(c.system_prompt, 100).c_str());
    const auto branch = readable_branch(store, c.id);
    if (const auto* error = std::get_if<std::string>(&branch)) {
      std::printf("    (unreadable: %s)\n", error->c_str());
      continue;
    }
    for (const Message& m : std::get<std::vector<Message>>(branch)) {
      std::printf("    %-9s  %s\n", std::string(role_name(m.role)).c_str(), preview(m.content, 100).c_str());
    }
  }
  if (conversations.empty()) std::printf("(no conversations)\n");
}

int run_export(ConversationStore& store, const ConversationsArgs& a) {
  ConversationTree tree = store.load_tree(a.export_id);
  if (a.format == "md") {
    std::printf("%s", conversation_to_markdown(tree.conversation, store.branch_path(a.export_id)).c_str());
    return 0;
  }
  if (a.active_branch) tree.messages = store.branch_path(a.export_id);
  std::printf("%s\n", dump(conversation_to_json(tree), 2).c_str());
  return 0;
}

int run_conversations(const ConversationsArgs& a) {
  ConversationStore store = ConversationStore::open_read_only(a.db_path);
  if (a.exporting) return run_export(store, a);
  const std::vector<Conversation> conversations = store.list_conversations(a.search);
  if (a.json) {
    std::printf("%s\n", dump(listing_json(store, conversations), -1).c_str());
  } else {
    print_listing(store, conversations);
  }
  return 0;
}

}  // namespace

Command add_conversations_command(CLI::App& app) {
  auto args = std::make_shared<ConversationsArgs>();
  CLI::App* cmd = app.add_subcommand("conversations", "List or export the saved conversations (read-only)");
  cmd->add_option("--db", args->db_path, "Conversation database")->capture_default_str();
  CLI::Option* json = cmd->add_flag("--json", args->json, "Print the list as JSON");
  cmd->add_option("--search", args->search, "Only conversations whose title or messages contain this text");
  CLI::Option* exp = cmd->add_option("--export", args->export_id, "Print this conversation instead of the list");
  CLI::Option* format = cmd->add_option("--format", args->format, "Export format: md (active branch) or json (whole tree)")
                            ->check(CLI::IsMember({"md", "json"}))
                            ->capture_default_str();
  CLI::Option* branch = cmd->add_flag("--active-branch", args->active_branch, "JSON export of the active branch only");
  format->needs(exp);
  branch->needs(exp);
  exp->excludes(json);
  cmd->callback([args, exp] { args->exporting = exp->count() > 0; });
  return Command{cmd, [args] { return run_conversations(*args); }};
}

}  // namespace kvdesk::cli
