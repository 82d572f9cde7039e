// Emoji table: points handed out in order from the start of the range, looked up both ways.
#include "ui/emoji_table.h"

#include "ui/emoji_clusters.h"

namespace kvdesk::ui {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD

}  // namespace

EmojiTable::EmojiTable(char32_t first, size_t capacity) : first_(first), capacity_(capacity) {}

std::optional<char32_t> EmojiTable::point_for(std::string_view cluster) {
  if (cluster.empty()) return std::nullopt;
  const std::string key(cluster);
  if (auto it = points_.find(key); it != points_.end()) return it->second;
  if (clusters_.size() >= capacity_) return std::nullopt;
  const char32_t point = first_ + char32_t(clusters_.size());
  clusters_.push_back(key);
  points_.emplace(key, point);
  return point;
}

const std::string* EmojiTable::cluster_at(char32_t point) const {
  if (point < first_ || point - first_ >= clusters_.size()) return nullptr;
  return &clusters_[point - first_];
}

std::string EmojiTable::to_display(std::string_view real) {
  std::string out;
  out.reserve(real.size());
  size_t i = 0;
  while (i < real.size()) {
    const DecodedChar c = decode_utf8(real, i);
    size_t length = emoji_cluster_length(real, i);
    const bool genuine_private = length == 0 && c.valid && in_range(c.code_point);
    if (genuine_private || !c.valid) length = c.length;
    if (length == 0) {
      out.append(real.substr(i, c.length));
      i += c.length;
      continue;
    }
    const std::string_view cluster = real.substr(i, length);
    if (const std::optional<char32_t> point = point_for(cluster)) {
      out += encode_utf8(*point);
    } else {
      out += genuine_private ? kReplacement : cluster;
    }
    i += length;
  }
  return out;
}

std::string EmojiTable::to_real(std::string_view display) const {
  std::string out;
  out.reserve(display.size());
  size_t i = 0;
  while (i < display.size()) {
    const DecodedChar c = decode_utf8(display, i);
    const std::string* cluster = c.valid ? cluster_at(c.code_point) : nullptr;
    if (cluster) {
      out += *cluster;
    } else {
      out.append(display.substr(i, c.length));
    }
    i += c.length;
  }
  return out;
}

bool EmojiTable::round_trips(std::string_view real) { return to_real(to_display(real)) == real; }

}  // namespace kvdesk::ui
