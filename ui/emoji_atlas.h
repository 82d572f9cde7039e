// Emoji atlas: the emoji table's points as custom glyphs of the ImGui fonts, drawn by the emoji
// raster into the atlas's RGBA pixels. Rects are reserved for more points than the table holds
// when the atlas is built, so an emoji met later is drawn into its waiting rect and only that
// rect of the texture is sent again; the atlas is built anew only when the reserve runs out.
//
// Invariants: after reserve() and ImFontAtlas::Build(), every point in [table.first(),
// table.first() + reserved()) is a glyph of each font passed, a cell-sized rect; drawn() of them,
// counted from the first, hold their pictures (the rest are transparent until draw_new()).
// A glyph drawn from the colour font is marked Colored, so ImGui draws it untinted.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "ui/emoji_raster.h"
#include "ui/emoji_table.h"

struct ImFont;
struct ImFontAtlas;

namespace kvdesk::ui {

struct AtlasRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// At most this many emoji glyphs a font: the reserve doubles up to it (at twice the content scale,
// two fonts' cells and the CJK glyphs still fit a 4096-wide atlas a few thousand rows high, which
// every GL driver takes); points past it show ImGui's fallback glyph, their text kept.
inline constexpr size_t kMaxReserve = 2048;

class EmojiAtlas {
 public:
  EmojiAtlas(EmojiTable& table, EmojiRaster& raster) : table_(table), raster_(raster) {}

  // Before atlas.Build(): reserves the glyph rects in each of `fonts` (already added to the
  // atlas; repeats and nullptr are skipped). Forgets what was drawn into an earlier build.
  void reserve(ImFontAtlas& atlas, const std::vector<ImFont*>& fonts);
  // After atlas.Build(): draws the points given out since the last call (all of them after a
  // build) that have rects, and returns the rects drawn, for the texture.
  std::vector<AtlasRect> draw_new(ImFontAtlas& atlas);
  // A point was given out beyond the reserve, which may still grow: the atlas must be built again
  // to show it.
  bool needs_rebuild() const { return table_.size() > reserved_ && reserved_ < kMaxReserve; }
  // Points with rects that draw_new() has not drawn yet.
  bool waiting() const { return std::min(table_.size(), reserved_) > drawn_; }

  size_t reserved() const { return reserved_; }
  size_t drawn() const { return drawn_; }

 private:
  struct FontRects {
    ImFont* font = nullptr;
    float size = 0;
    std::vector<int> rect_ids;   // by point - table.first()
  };

  EmojiTable& table_;
  EmojiRaster& raster_;
  std::vector<FontRects> fonts_;
  size_t reserved_ = 0;
  size_t drawn_ = 0;
};

}  // namespace kvdesk::ui
