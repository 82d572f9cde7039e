// Emoji clusters: a strict UTF-8 decoder and a scanner over code points that follows the shape
// of an emoji sequence (element, then ZWJ and element again), bounded in length.
#include "ui/emoji_clusters.h"

#include <algorithm>
#include <iterator>

namespace kvdesk::ui {
namespace {

constexpr char32_t kZwj = 0x200D;
constexpr char32_t kTextStyle = 0xFE0E;
constexpr char32_t kEmojiStyle = 0xFE0F;
constexpr char32_t kKeycap = 0x20E3;
constexpr char32_t kTagEnd = 0xE007F;

// Code points below U+10000 drawn as emoji without a variation selector (Emoji_Presentation).
constexpr char32_t kPresentationBmp[][2] = {
    {0x231A, 0x231B}, {0x23E9, 0x23EC}, {0x23F0, 0x23F0}, {0x23F3, 0x23F3}, {0x25FD, 0x25FE},
    {0x2614, 0x2615}, {0x2648, 0x2653}, {0x267F, 0x267F}, {0x2693, 0x2693}, {0x26A1, 0x26A1},
    {0x26AA, 0x26AB}, {0x26BD, 0x26BE}, {0x26C4, 0x26C5}, {0x26CE, 0x26CE}, {0x26D4, 0x26D4},
    {0x26EA, 0x26EA}, {0x26F2, 0x26F3}, {0x26F5, 0x26F5}, {0x26FA, 0x26FA}, {0x26FD, 0x26FD},
    {0x2705, 0x2705}, {0x270A, 0x270B}, {0x2728, 0x2728}, {0x274C, 0x274C}, {0x274E, 0x274E},
    {0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797}, {0x27B0, 0x27B0}, {0x27BF, 0x27BF},
    {0x2B1B, 0x2B1C}, {0x2B50, 0x2B50}, {0x2B55, 0x2B55},
};

bool presentation_bmp(char32_t c) {
  return std::any_of(std::begin(kPresentationBmp), std::end(kPresentationBmp),
                     [c](const char32_t* range) { return c >= range[0] && c <= range[1]; });
}

// BMP symbols that are emoji when a variation selector or a ZWJ sequence asks for it.
bool symbol_bmp(char32_t c) { return c == 0xA9 || c == 0xAE || (c >= 0x203C && c <= 0x3299); }
bool regional_indicator(char32_t c) { return c >= 0x1F1E6 && c <= 0x1F1FF; }
bool skin_tone(char32_t c) { return c >= 0x1F3FB && c <= 0x1F3FF; }
bool tag(char32_t c) { return c >= 0xE0020 && c <= 0xE007E; }
bool keycap_base(char32_t c) { return (c >= '0' && c <= '9') || c == '#' || c == '*'; }

// A cursor over the code points of a text, counting how many it has taken.
class Scanner {
 public:
  Scanner(std::string_view text, size_t at) : text_(text), at_(at) {}

  char32_t peek(size_t ahead = 0) const {
    size_t i = at_;
    for (size_t k = 0; i < text_.size(); ++k) {
      const DecodedChar c = decode_utf8(text_, i);
      if (!c.valid) return 0;
      if (k == ahead) return c.code_point;
      i += c.length;
    }
    return 0;
  }
  void take() {
    at_ += decode_utf8(text_, at_).length;
    ++taken_;
  }
  bool take_if(char32_t c) {
    if (peek() != c) return false;
    take();
    return true;
  }
  size_t at() const { return at_; }
  size_t taken() const { return taken_; }

 private:
  std::string_view text_;
  size_t at_;
  size_t taken_ = 0;
};

// One element of a sequence at the scanner: a keycap, a flag, or an emoji with its modifiers.
// `joined`: the element follows a ZWJ, where a bare BMP symbol counts. False when none is there.
bool take_element(Scanner& s, bool joined) {
  const char32_t c = s.peek();
  if (keycap_base(c)) {
    const char32_t next = s.peek(1);
    if (next == kKeycap || (next == kEmojiStyle && s.peek(2) == kKeycap)) {
      s.take();
      s.take_if(kEmojiStyle);
      s.take();
      return true;
    }
    return false;
  }
  if (regional_indicator(c)) {
    s.take();
    if (regional_indicator(s.peek())) s.take();
    return true;
  }
  const bool emoji = c > 0xFFFF || presentation_bmp(c) ||
                     (symbol_bmp(c) && (joined || s.peek(1) == kEmojiStyle));
  if (!emoji) return false;
  s.take();
  if (!s.take_if(kEmojiStyle)) s.take_if(kTextStyle);
  if (skin_tone(s.peek())) s.take();
  s.take_if(kEmojiStyle);
  if (tag(s.peek())) {
    while (tag(s.peek()) && s.taken() < kMaxClusterCodePoints - 1) s.take();
    s.take_if(kTagEnd);
  }
  return true;
}

}  // namespace

size_t emoji_cluster_length(std::string_view text, size_t at) {
  if (at >= text.size()) return 0;
  Scanner s(text, at);
  const DecodedChar first = decode_utf8(text, at);
  if (!first.valid) return 0;
  if (!take_element(s, false)) {
    if (first.code_point <= 0xFFFF) return 0;
    s.take();   // a code point above U+FFFF that is not an emoji: a cluster of its own
    return s.at() - at;
  }
  // Further elements after ZWJ while the whole stays within the bound; a ZWJ with no element
  // after it is left out of the cluster.
  while (s.peek() == kZwj && s.taken() + 2 <= kMaxClusterCodePoints) {
    Scanner joined = s;
    joined.take();
    if (!take_element(joined, true) || joined.taken() > kMaxClusterCodePoints) break;
    s = joined;
  }
  return s.at() - at;
}

}  // namespace kvdesk::ui
