// Emoji atlas: a square cell one line high per point and font, the reserve doubling past what
// the table holds up to kMaxReserve; pictures copied into the atlas's RGBA32 pixels at their rects.
#include "ui/emoji_atlas.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvdesk::ui {
namespace {

constexpr size_t kMinReserve = 256;

int cell_size(float font_size) { return std::max(1, int(std::lround(font_size))); }

float config_size(const ImFontAtlas& atlas, const ImFont* font) {
  for (const ImFontConfig& config : atlas.ConfigData) {
    if (config.DstFont == font) return config.SizePixels;
  }
  return 0;
}

}  // namespace

void EmojiAtlas::reserve(ImFontAtlas& atlas, const std::vector<ImFont*>& fonts) {
  fonts_.clear();
  drawn_ = 0;
  reserved_ = kMinReserve;
  while (reserved_ < table_.size() * 2) reserved_ *= 2;
  reserved_ = std::min({reserved_, table_.capacity(), kMaxReserve});
  for (ImFont* font : fonts) {
    const bool seen = std::any_of(fonts_.begin(), fonts_.end(), [font](const FontRects& f) { return f.font == font; });
    const float size = config_size(atlas, font);
    if (!font || seen || size <= 0) continue;
    FontRects rects{font, size, {}};
    const int cell = cell_size(size);
    for (size_t i = 0; i < reserved_; ++i) {
      const ImWchar point = ImWchar(table_.first() + char32_t(i));
      rects.rect_ids.push_back(atlas.AddCustomRectFontGlyph(font, point, cell, cell, float(cell + 1)));
    }
    fonts_.push_back(std::move(rects));
  }
}

std::vector<AtlasRect> EmojiAtlas::draw_new(ImFontAtlas& atlas) {
  std::vector<AtlasRect> drawn;
  const size_t end = std::min(table_.size(), reserved_);
  if (drawn_ >= end || fonts_.empty()) return drawn;
  unsigned char* pixels = nullptr;
  int atlas_width = 0, atlas_height = 0;
  atlas.GetTexDataAsRGBA32(&pixels, &atlas_width, &atlas_height);
  if (!pixels) return drawn;
  for (; drawn_ < end; ++drawn_) {
    const char32_t point = table_.first() + char32_t(drawn_);
    const std::string* cluster = table_.cluster_at(point);
    EmojiBitmap picture;   // fonts of one size share it
    int picture_baseline = -1;
    for (const FontRects& f : fonts_) {
      const ImFontAtlasCustomRect* rect = atlas.GetCustomRectByIndex(f.rect_ids[drawn_]);
      if (!rect || !rect->IsPacked()) continue;
      const int baseline = int(std::lround(f.font->Ascent));
      if (picture.width != rect->Width || picture.height != rect->Height || picture_baseline != baseline) {
        picture = raster_.draw(cluster ? *cluster : std::string(), rect->Width, rect->Height, baseline);
        picture_baseline = baseline;
      }
      for (int y = 0; y < picture.height && y < rect->Height; ++y) {
        std::memcpy(pixels + (size_t(rect->Y + y) * size_t(atlas_width) + rect->X) * 4,
                    &picture.rgba[size_t(y) * size_t(picture.width) * 4],
                    size_t(std::min<int>(picture.width, rect->Width)) * 4);
      }
      if (const ImFontGlyph* glyph = f.font->FindGlyphNoFallback(ImWchar(point))) {
        const_cast<ImFontGlyph*>(glyph)->Colored = picture.colour ? 1 : 0;
      }
      drawn.push_back({rect->X, rect->Y, rect->Width, rect->Height});
    }
  }
  return drawn;
}

}  // namespace kvdesk::ui
