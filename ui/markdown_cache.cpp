// MarkdownCache: parse on a miss or when a message's text differs from what was parsed.
#include "ui/markdown_cache.h"

#include <algorithm>

#include "ui/emoji_text.h"

namespace kvdesk::ui {

const MdDocument& MarkdownCache::document(int64_t message_id, const std::string& text) {
  auto [it, inserted] = entries_.try_emplace(message_id);
  Entry& e = it->second;
  if (inserted || e.text != text) {
    e.text = text;
    e.document = parse_markdown(emoji_table().to_display(text));
    ++parses_;
  }
  return e.document;
}

void MarkdownCache::keep_only(const std::vector<int64_t>& shown) {
  std::erase_if(entries_, [&](const auto& entry) {
    return std::find(shown.begin(), shown.end(), entry.first) == shown.end();
  });
}

}  // namespace kvdesk::ui
