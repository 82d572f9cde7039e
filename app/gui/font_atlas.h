// Font atlas: the app's fonts (ui/fonts.h) and the emoji glyphs (ui/emoji_atlas.h) built into
// ImGui's atlas, and its GL texture kept up to date: between frames, emoji met in the last frame
// are drawn into their waiting rects and only those rects are sent to the texture again; the
// atlas is built anew (at the same size) when the rects reserved run out.
#pragma once
#include <string>

#include "ui/emoji_atlas.h"
#include "ui/emoji_raster.h"
#include "ui/fonts.h"

namespace kvdesk::gui {

class FontAtlas {
 public:
  FontAtlas();

  // Builds the atlas at `size_px` (a GL texture made before is made again). Call between frames.
  void build(float size_px);
  // Between frames, before ImGui::NewFrame: draws new emoji, building again when needed.
  void update();
  // Emoji were met that update() has not drawn yet (they show transparent until it has).
  bool waiting() const { return emoji_.waiting(); }

  const ui::Fonts& fonts() const { return fonts_; }
  float size_px() const { return size_px_; }
  // For the status line: which fonts draw Korean and emoji.
  std::string note() const;
  bool colour_emoji() const { return raster_.has_colour_font(); }
  const std::string& emoji_note() const { return raster_.note(); }
  // Milliseconds the last build took, and of those, drawing the emoji.
  double build_ms() const { return build_ms_; }
  double emoji_ms() const { return emoji_ms_; }

 private:
  void upload(const std::vector<ui::AtlasRect>& rects) const;

  ui::EmojiRaster raster_;
  ui::EmojiAtlas emoji_;
  ui::Fonts fonts_;
  float size_px_ = 0;
  double build_ms_ = 0;
  double emoji_ms_ = 0;
};

}  // namespace kvdesk::gui
