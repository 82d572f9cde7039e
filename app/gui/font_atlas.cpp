// Font atlas: ImGui's atlas built by hand (fonts, emoji rects, Build, emoji pictures) so that the
// pictures are in its RGBA pixels before the backend makes the texture from them.
#include "app/gui/font_atlas.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "ui/emoji_text.h"

namespace kvdesk::gui {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

}  // namespace

// KVDESK_EMOJI_FONT, when set, names another colour emoji font (or a missing one, to see the
// one-colour fallback).
FontAtlas::FontAtlas()
    : raster_(std::getenv("KVDESK_EMOJI_FONT") ? std::getenv("KVDESK_EMOJI_FONT") : ui::default_emoji_font(),
              ui::default_fallback_fonts()),
      emoji_(ui::emoji_table(), raster_) {}

void FontAtlas::build(float size_px) {
  const auto start = Clock::now();
  ImFontAtlas& atlas = *ImGui::GetIO().Fonts;
  const bool had_texture = atlas.TexID != nullptr;   // Build() forgets it
  atlas.Clear();
  fonts_ = ui::load_fonts(size_px);
  emoji_.reserve(atlas, {fonts_.body, fonts_.mono});
  atlas.Build();
  const auto emoji_start = Clock::now();
  emoji_.draw_new(atlas);
  emoji_ms_ = ms_since(emoji_start);
  if (had_texture) {
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
  size_px_ = size_px;
  build_ms_ = ms_since(start);
}

void FontAtlas::update() {
  if (emoji_.needs_rebuild()) {
    build(size_px_);
    return;
  }
  upload(emoji_.draw_new(*ImGui::GetIO().Fonts));
}

std::string FontAtlas::note() const { return fonts_.note + "; " + raster_.note(); }

void FontAtlas::upload(const std::vector<ui::AtlasRect>& rects) const {
  ImFontAtlas& atlas = *ImGui::GetIO().Fonts;
  if (rects.empty() || !atlas.TexID) return;   // no texture yet: it will be made from the pixels
  unsigned char* pixels = nullptr;
  int width = 0, height = 0;
  atlas.GetTexDataAsRGBA32(&pixels, &width, &height);
  GLint bound = 0;
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &bound);
  glBindTexture(GL_TEXTURE_2D, GLuint(reinterpret_cast<uintptr_t>(atlas.TexID)));
  glPixelStorei(GL_UNPACK_ROW_LENGTH, width);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  for (const ui::AtlasRect& r : rects) {
    glTexSubImage2D(GL_TEXTURE_2D, 0, r.x, r.y, r.width, r.height, GL_RGBA, GL_UNSIGNED_BYTE,
                    pixels + (size_t(r.y) * size_t(width) + size_t(r.x)) * 4);
  }
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glBindTexture(GL_TEXTURE_2D, GLuint(bound));
}

}  // namespace kvdesk::gui
