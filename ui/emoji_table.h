// Emoji table: gives each emoji cluster met in text (ui/emoji_clusters.h) a code point of its own
// in the Private Use Area, so that ImGui, whose characters are 16 bits, can hold and draw it as
// one glyph; and turns such "display text" back into the original text.
//
// Invariants: a point in [first, first + capacity) is either free or stands for exactly one
// cluster, for the life of the table (points are never reused, so text held anywhere keeps its
// meaning); points are given out in order from `first`, so the used ones are [first, first +
// size()). to_real(to_display(s)) == s for every byte string s, whatever the table holds: a
// genuine character inside the table's range is a cluster of its own (given a point like an
// emoji, drawn as itself) so it cannot be mistaken for an emoji, and so is each byte that is not
// valid UTF-8 (drawn as a box), so display text is valid UTF-8 while the table has room (ImGui
// cuts or shifts text at an invalid byte when it edits it). When the range is full, clusters not yet in the table stay as they are (ImGui shows
// its fallback for them) and a genuine in-range character without an entry is displayed as
// U+FFFD: such text does not round-trip, which round_trips() tells an editor before it edits.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvdesk::ui {

class EmojiTable {
 public:
  static constexpr char32_t kFirstPrivateUse = 0xE000;
  static constexpr size_t kPrivateUseSize = 0xF8FF - 0xE000 + 1;

  explicit EmojiTable(char32_t first = kFirstPrivateUse, size_t capacity = kPrivateUseSize);

  // The point standing for `cluster`, given on first sight; nullopt when the range is full.
  std::optional<char32_t> point_for(std::string_view cluster);
  // The cluster a point stands for; nullptr when the point is not in the table.
  const std::string* cluster_at(char32_t point) const;
  bool in_range(char32_t c) const { return c >= first_ && c < first_ + capacity_; }

  std::string to_display(std::string_view real);
  std::string to_real(std::string_view display) const;
  // Whether to_real(to_display(real)) gives `real` back (it does unless the range is full).
  bool round_trips(std::string_view real);

  char32_t first() const { return first_; }
  size_t capacity() const { return capacity_; }
  size_t size() const { return clusters_.size(); }

 private:
  char32_t first_;
  size_t capacity_;
  std::vector<std::string> clusters_;                   // by point - first_
  std::unordered_map<std::string, char32_t> points_;    // cluster -> point
};

}  // namespace kvdesk::ui
