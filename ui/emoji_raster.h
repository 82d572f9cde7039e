// Emoji raster: draws one emoji cluster as an RGBA picture of a given cell size. In colour from
// a colour bitmap font (Noto Color Emoji: HarfBuzz finds the glyph, so ZWJ sequences and flag
// pairs become the font's single glyph; FreeType gives its BGRA bitmap, scaled down with an area
// filter); else in one colour (white, for ImGui to tint as text) from the first monochrome font
// that has the cluster's first character; else a box outline. Never fails: a missing or broken
// font file only moves a cluster down that list.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::ui {

// Straight (not premultiplied) RGBA, row after row, no padding.
struct EmojiBitmap {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgba;
  bool colour = false;   // drawn from the colour font: ImGui must not tint it
};

// Where kvdesk looks for the colour emoji font (fonts-noto-color-emoji).
const char* default_emoji_font();
// Monochrome fonts tried, in order, for what the colour font cannot draw.
const std::vector<std::string>& default_fallback_fonts();

class EmojiRaster {
 public:
  EmojiRaster(const std::string& colour_font, const std::vector<std::string>& fallback_fonts);
  ~EmojiRaster();
  EmojiRaster(const EmojiRaster&) = delete;
  EmojiRaster& operator=(const EmojiRaster&) = delete;

  bool has_colour_font() const;
  // For the status line: which font draws emoji, or why they are drawn in one colour.
  const std::string& note() const;

  // The cluster (UTF-8) in a width x height cell; `baseline` is the monochrome glyphs' baseline,
  // in pixels from the cell's top.
  EmojiBitmap draw(std::string_view cluster, int width, int height, int baseline);

 private:
  struct Fonts;
  std::unique_ptr<Fonts> fonts_;
};

}  // namespace kvdesk::ui
