// Fuzz target: arbitrary bytes as a conversation JSON file (kvdesk's export format or an OpenAI
// messages transcript), imported into a store as the app imports it. Anything malformed must be
// a kvdesk::Error; what is accepted exports again to the same messages (tool fields included),
// imports into the store whole, and reads back with the same contents and a branch that exports
// as Markdown.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "app/store/conversation_export.h"
#include "app/store/conversation_store.h"
#include "engine/error.h"

namespace {

using namespace kvdesk::store;

// One store for the whole run, in a temporary file removed at exit.
struct ScratchStore {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kvdesk-fuzz-import-" + std::to_string(::getpid()) + ".db");
  ConversationStore store = ConversationStore::open(path);
  ~ScratchStore() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  }
};

ConversationStore& store() {
  static ScratchStore scratch;
  return scratch.store;
}

std::vector<std::string> sorted_contents(const std::vector<Message>& messages) {
  std::vector<std::string> contents;
  for (const Message& m : messages) contents.push_back(m.content);
  std::sort(contents.begin(), contents.end());
  return contents;
}

void round_trip(const ConversationTree& tree) {
  const ConversationTree again = conversation_from_json(conversation_to_json(tree));
  if (again.messages.size() != tree.messages.size()) std::abort();
  for (size_t i = 0; i < tree.messages.size(); ++i) {
    if (again.messages[i].content != tree.messages[i].content ||
        again.messages[i].role != tree.messages[i].role ||
        again.messages[i].parent_id != tree.messages[i].parent_id ||
        again.messages[i].fields_json != tree.messages[i].fields_json) {
      std::abort();
    }
  }
}

void import_and_read_back(const ConversationTree& tree) {
  ConversationStore& s = store();
  const ConversationId id = s.import_conversation(tree);
  const ConversationTree stored = s.load_tree(id);
  if (sorted_contents(stored.messages) != sorted_contents(tree.messages)) std::abort();
  const std::optional<Conversation> conversation = s.conversation(id);
  if (!conversation) std::abort();
  conversation_to_markdown(*conversation, s.branch_path(id));
  s.delete_conversation(id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ConversationTree tree;
  try {
    tree = conversation_from_json_text(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const kvdesk::Error&) {
    return 0;
  }
  round_trip(tree);
  import_and_read_back(tree);
  return 0;
}
