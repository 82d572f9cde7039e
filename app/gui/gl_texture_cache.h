// GlTextureCache: the panels' images (ui/texture_cache.h) as OpenGL textures, one per slot,
// re-uploaded only when a slot's key changes. Lives while the GL context does.
#pragma once
#include <array>
#include <cstdint>

#include "ui/texture_cache.h"

namespace kvdesk::gui {

class GlTextureCache : public ui::TextureCache {
 public:
  GlTextureCache() = default;
  ~GlTextureCache() override;
  GlTextureCache(const GlTextureCache&) = delete;
  GlTextureCache& operator=(const GlTextureCache&) = delete;

  ImTextureID texture(ui::TextureSlot slot, uint64_t key, const std::function<ui::RgbaImage()>& make) override;

 private:
  // Invariant: a slot with texture 0 has never been uploaded; otherwise key is what its
  // pixels were made for.
  struct Slot {
    uint32_t texture = 0;   // GLuint
    uint64_t key = 0;
  };
  std::array<Slot, 1> slots_;
};

}  // namespace kvdesk::gui
