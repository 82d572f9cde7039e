// Emoji text: a cache of converted strings keyed by the original. ASCII text is its own display
// text and is returned without a copy or a lookup.
#include "ui/emoji_text.h"

#include <algorithm>
#include <unordered_map>

namespace kvdesk::ui {
namespace {

// Past either bound the cache is emptied between frames (a streaming answer's reasoning is a new
// string every frame).
constexpr size_t kMaxCachedStrings = 4096;
constexpr size_t kMaxCachedBytes = size_t(8) << 20;

std::unordered_map<std::string, std::string>& cache() {
  static std::unordered_map<std::string, std::string> converted;
  return converted;
}

size_t& cached_bytes() {
  static size_t bytes = 0;
  return bytes;
}

}  // namespace

EmojiTable& emoji_table() {
  static EmojiTable table;
  return table;
}

const std::string& display_text(const std::string& real) {
  if (std::all_of(real.begin(), real.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return real;
  auto [it, inserted] = cache().try_emplace(real);
  if (inserted) {
    it->second = emoji_table().to_display(real);
    cached_bytes() += real.size() + it->second.size();
  }
  return it->second;
}

std::string real_text(std::string_view display) { return emoji_table().to_real(display); }

void end_display_frame() {
  if (cache().size() <= kMaxCachedStrings && cached_bytes() <= kMaxCachedBytes) return;
  cache().clear();
  cached_bytes() = 0;
}

}  // namespace kvdesk::ui
