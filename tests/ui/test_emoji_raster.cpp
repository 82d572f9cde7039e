// Tests of ui/emoji_raster and ui/emoji_atlas: emoji come out of Noto Color Emoji in colour (a
// ZWJ family and a flag as one picture each), fall back to a one-colour glyph or a box when the
// colour font is missing or lacks them, and land in ImGui's atlas as untinted glyphs.
#include <catch2/catch.hpp>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "engine/tokenizer/utf8_decode.h"
#include "ui/emoji_atlas.h"
#include "ui/emoji_raster.h"
#include "ui/emoji_table.h"

using namespace kvdesk;
using namespace kvdesk::ui;

namespace {

const std::string kSmile = "\xF0\x9F\x98\x80";
const std::string kFamily = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
const std::string kKorea = "\xF0\x9F\x87\xB0\xF0\x9F\x87\xB7";
const std::string kThumbsMedium = "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD";
const std::string kMan = "\xF0\x9F\x91\xA8";

// Pixels that are clearly coloured: opaque enough, and far from grey.
int saturated(const uint8_t* rgba, size_t pixels, size_t stride_pixels = 1) {
  int count = 0;
  for (size_t i = 0; i < pixels; i += stride_pixels) {
    const uint8_t* p = rgba + i * 4;
    const int hi = std::max({p[0], p[1], p[2]}), lo = std::min({p[0], p[1], p[2]});
    if (p[3] > 128 && hi - lo > 60) ++count;
  }
  return count;
}

int opaque(const EmojiBitmap& b) {
  int count = 0;
  for (size_t i = 3; i < b.rgba.size(); i += 4) count += b.rgba[i] > 0;
  return count;
}

bool have_colour_font() { return std::filesystem::exists(default_emoji_font()); }

}  // namespace

TEST_CASE("emoji, ZWJ families and flags are drawn in colour at the cell's size", "[ui][emoji]") {
  REQUIRE(have_colour_font());   // fonts-noto-color-emoji is a build and runtime dependency
  EmojiRaster raster(default_emoji_font(), default_fallback_fonts());
  REQUIRE(raster.has_colour_font());
  for (const std::string& cluster : {kSmile, kThumbsMedium, kKorea}) {
    const EmojiBitmap b = raster.draw(cluster, 20, 20, 16);
    CHECK(b.colour);
    CHECK(b.width == 20);
    CHECK(b.height == 20);
    CHECK(saturated(b.rgba.data(), b.rgba.size() / 4) > 20);
  }
  // The family is one glyph of the font (drawn in greys by Noto), not the man, woman and girl
  // side by side.
  const EmojiBitmap family = raster.draw(kFamily, 20, 20, 16);
  const EmojiBitmap man = raster.draw(kMan, 20, 20, 16);
  CHECK(family.colour);
  CHECK(opaque(family) > 200);
  CHECK(family.rgba != man.rgba);
  CHECK(saturated(family.rgba.data(), family.rgba.size() / 4) < saturated(man.rgba.data(), man.rgba.size() / 4));
}

TEST_CASE("without the colour font emoji are drawn in one colour, and unknown ones as a box", "[ui][emoji]") {
  EmojiRaster raster("/nonexistent/NotoColorEmoji.ttf", default_fallback_fonts());
  CHECK_FALSE(raster.has_colour_font());
  CHECK(raster.note().find("fonts-noto-color-emoji") != std::string::npos);
  const EmojiBitmap star = raster.draw("\xE2\x98\x85", 20, 20, 16);   // U+2605, in DejaVu Sans
  CHECK_FALSE(star.colour);
  CHECK(opaque(star) > 20);
  CHECK(saturated(star.rgba.data(), star.rgba.size() / 4) == 0);
  EmojiRaster bare("/nonexistent/NotoColorEmoji.ttf", {});
  const EmojiBitmap box = bare.draw(kSmile, 20, 20, 16);
  CHECK_FALSE(box.colour);
  CHECK(opaque(box) > 20);
  const EmojiBitmap nothing = bare.draw("", 20, 20, 16);   // never fails, even on no text
  CHECK(opaque(nothing) > 20);
}

TEST_CASE("a text-style selector asks for the one-colour glyph", "[ui][emoji]") {
  EmojiRaster raster(default_emoji_font(), default_fallback_fonts());
  CHECK_FALSE(raster.draw("\xE2\x98\x80\xEF\xB8\x8E", 20, 20, 16).colour);   // U+2600 U+FE0E
}

TEST_CASE("emoji land in ImGui's atlas as untinted glyphs, reserved ahead and drawn when met", "[ui][emoji]") {
  ImGui::CreateContext();
  ImFontAtlas& atlas = *ImGui::GetIO().Fonts;
  ImFontConfig config;
  config.SizePixels = 18;
  ImFont* font = atlas.AddFontDefault(&config);
  EmojiTable table;
  EmojiRaster raster(default_emoji_font(), default_fallback_fonts());
  EmojiAtlas emoji(table, raster);
  const std::string display = table.to_display("hi " + kSmile);
  emoji.reserve(atlas, {font, font, nullptr});
  CHECK(emoji.reserved() >= 256);
  REQUIRE(atlas.Build());
  CHECK(emoji.draw_new(atlas).size() == 1);
  CHECK_FALSE(emoji.needs_rebuild());
  const ImFontGlyph* glyph = font->FindGlyphNoFallback(ImWchar(0xE000));
  REQUIRE(glyph != nullptr);
  CHECK(glyph->Colored);
  CHECK(font->FindGlyphNoFallback(ImWchar(0xE000 + 255)) != nullptr);   // reserved, waiting
  unsigned char* pixels = nullptr;
  int width = 0, height = 0;
  atlas.GetTexDataAsRGBA32(&pixels, &width, &height);
  const int x0 = int(glyph->U0 * float(width)), y0 = int(glyph->V0 * float(height));
  const int w = int(std::lround((glyph->U1 - glyph->U0) * float(width)));
  const int h = int(std::lround((glyph->V1 - glyph->V0) * float(height)));
  int coloured = 0;
  for (int y = y0; y < y0 + h; ++y) coloured += saturated(pixels + (size_t(y) * size_t(width) + size_t(x0)) * 4, size_t(w));
  CHECK(coloured > 40);
  // Drawn in black text, the emoji keeps its colours (white vertices) and the letter is black.
  ImDrawList list(ImGui::GetDrawListSharedData());
  list._ResetForNewFrame();
  list.PushClipRect(ImVec2(0, 0), ImVec2(1000, 1000));
  list.PushTextureID(atlas.TexID);
  const std::string text = "h" + display.substr(3);   // "h" and the smile's point
  font->RenderText(&list, 18, ImVec2(0, 0), IM_COL32(0, 0, 0, 255), ImVec4(0, 0, 1000, 1000), text.data(),
                   text.data() + text.size());
  REQUIRE(list.VtxBuffer.Size == 8);
  CHECK(list.VtxBuffer[0].col == IM_COL32(0, 0, 0, 255));
  CHECK(list.VtxBuffer[4].col == IM_COL32(255, 255, 255, 255));
  // A second emoji met later is drawn into its waiting rect without building again.
  table.to_display(kFamily);
  CHECK(emoji.draw_new(atlas).size() == 1);
  // Past the reserve the atlas must be built again.
  std::string many;
  for (char32_t c = 0x1F400; c < 0x1F400 + 300; ++c) many += encode_utf8(c);
  table.to_display(many);
  CHECK(emoji.needs_rebuild());
  ImGui::DestroyContext();
}
