// Controller, part 3: conversations as files, through app/store/conversation_export. Export
// writes the selected conversation (Markdown: the branch shown; JSON: the whole tree with its
// branches); import reads a JSON export into a new conversation and selects it. A bad path or
// file is a message in the status line; nothing in the store changes then.
#include <fstream>
#include <sstream>

#include "app/gui/controller.h"
#include "app/store/conversation_export.h"
#include "engine/error.h"

namespace kvdesk::gui {
namespace {

constexpr size_t kMaxImportBytes = size_t(64) << 20;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write '" + path + "'");
  out << text;
  if (!out.flush()) throw Error("writing '" + path + "' failed");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxImportBytes) throw Error("'" + path + "' is larger than 64 MiB: not a conversation");
  return text.str();
}

}  // namespace

void Controller::export_conversation(const std::string& format, const std::string& path) {
  const store::ConversationId id = vm_.chat.conversation_id;
  if (id == 0) throw Error("select a conversation to export");
  if (path.empty()) throw Error("give a file to export to");
  if (format == "md") {
    const std::optional<store::Conversation> c = store().conversation(id);
    if (!c) throw Error("the conversation no longer exists");
    write_file(path, store::conversation_to_markdown(*c, store().branch_path(id)));
  } else if (format == "json") {
    write_file(path, store::conversation_to_json(store().load_tree(id)).dump(2) + "\n");
  } else {
    throw Error("export formats are md and json, not '" + format + "'");
  }
  set_status("exported to " + path, false);
}

void Controller::import_conversation(const std::string& path) {
  if (path.empty()) throw Error("give a JSON file to import");
  store::ConversationTree tree;
  try {
    tree = store::conversation_from_json_text(read_file(path));
  } catch (const Error& e) {
    throw Error("cannot import '" + path + "': " + e.what());
  }
  const store::ConversationId id = store().import_conversation(tree);
  reload_conversations();
  select(id);
  set_status("imported " + path, false);
}

}  // namespace kvdesk::gui
