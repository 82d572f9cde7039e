#include "app/gui/gl_texture_cache.h"

#include <GLFW/glfw3.h>

namespace kvdesk::gui {

GlTextureCache::~GlTextureCache() {
  for (Slot& s : slots_) {
    if (s.texture != 0) glDeleteTextures(1, &s.texture);
  }
}

ImTextureID GlTextureCache::texture(ui::TextureSlot slot, uint64_t key, const std::function<ui::RgbaImage()>& make) {
  Slot& s = slots_[size_t(slot)];
  if (s.texture != 0 && s.key == key) return reinterpret_cast<ImTextureID>(uintptr_t(s.texture));
  if (s.texture == 0) {
    glGenTextures(1, &s.texture);
    glBindTexture(GL_TEXTURE_2D, s.texture);
    // One texel per screen pixel: nearest keeps cell edges sharp.
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  }
  const ui::RgbaImage image = make();
  glBindTexture(GL_TEXTURE_2D, s.texture);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, image.width, image.height, 0, GL_RGBA, GL_UNSIGNED_BYTE,
               image.pixels.data());
  s.key = key;
  return reinterpret_cast<ImTextureID>(uintptr_t(s.texture));
}

}  // namespace kvdesk::gui
