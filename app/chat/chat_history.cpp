// The rendering of a stored conversation as chat messages, shared by the GUI and the CLI.
#include "app/chat/chat_history.h"

namespace kvdesk::chat {
namespace {

constexpr size_t kTitleBytes = 40;

}  // namespace

std::vector<ChatMessage> chat_messages(const store::Conversation& conversation, const std::vector<store::Message>& branch) {
  std::vector<ChatMessage> out;
  if (!conversation.system_prompt.empty()) out.push_back({"system", conversation.system_prompt});
  for (const store::Message& m : branch) {
    if (m.role == store::Role::Assistant && m.content.empty()) continue;
    out.push_back({std::string(store::role_name(m.role)), m.content});
  }
  return out;
}

std::string title_from(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > kTitleBytes) {
    size_t cut = kTitleBytes;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line = line.substr(0, cut) + "...";
  }
  return line.empty() ? kNewChatTitle : line;
}

}  // namespace kvdesk::chat
