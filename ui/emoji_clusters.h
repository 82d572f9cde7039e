// Emoji clusters: where an emoji sequence starts and ends in UTF-8 text, so that it can be drawn
// as one picture. A cluster is one emoji code point with what attaches to it: a variation
// selector (U+FE0E / U+FE0F), a skin-tone modifier, a keycap mark, tag characters (subdivision
// flags), and further emoji joined with ZWJ (U+200D); two regional indicators make a flag.
// Every code point above U+FFFF is a cluster too (ImGui's 16-bit characters cannot hold it).
// The segmentation only looks at code points, never at a font: whether a font draws the
// sequence as one glyph is the renderer's business.
#pragma once
#include <cstddef>
#include <string_view>

#include "engine/tokenizer/utf8_decode.h"

namespace kvdesk::ui {

// The longest cluster allowed: a longer ZWJ chain ends at this many code points, so that hostile
// input cannot make one glyph of unbounded length.
constexpr size_t kMaxClusterCodePoints = 16;

// Bytes of the emoji cluster that starts at text[at], or 0 when none starts there.
size_t emoji_cluster_length(std::string_view text, size_t at);

}  // namespace kvdesk::ui
