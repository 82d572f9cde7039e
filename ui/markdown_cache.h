// MarkdownCache: each shown message's parsed document, kept between frames so a frame parses
// only what changed. While an answer streams, only its text changes, so only it is parsed again
// (once per frame at most); finished messages are parsed once.
//
// The text is parsed as display text (ui/emoji_text.h): emoji clusters are single characters of
// the Private Use Area by then, which Markdown treats as plain letters.
//
// Invariant: document(id, text) equals parse_markdown(emoji_table().to_display(text)) for the
// text passed.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ui/markdown_document.h"

namespace kvdesk::ui {

class MarkdownCache {
 public:
  const MdDocument& document(int64_t message_id, const std::string& text);
  // Forgets the messages not in `shown` (another conversation was selected, one was deleted).
  void keep_only(const std::vector<int64_t>& shown);

  uint64_t parses() const { return parses_; }   // how many times text was parsed
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string text;
    MdDocument document;
  };
  std::map<int64_t, Entry> entries_;
  uint64_t parses_ = 0;
};

}  // namespace kvdesk::ui
