// TextureCache: images the panels compute as pixels and draw as one textured quad, owned by
// whoever owns the renderer (the app: OpenGL). The block map is the reason: 4,096 blocks as
// 4,096 rectangles cost ImGui and a software rasterizer (Mesa llvmpipe) thousands of
// triangles every frame, while its colours change only with the statistics, a few times a
// second; as an image it is one quad, re-uploaded only when a pixel would change.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <functional>

#include "ui/rgba_image.h"

namespace kvdesk::ui {

enum class TextureSlot : uint8_t { BlockMap };

class TextureCache {
 public:
  virtual ~TextureCache() = default;
  // The slot's texture for `key`. make() runs, and the texture is uploaded, only when the key
  // differs from the one the slot holds: equal keys promise equal pixels.
  virtual ImTextureID texture(TextureSlot slot, uint64_t key, const std::function<RgbaImage()>& make) = 0;
};

}  // namespace kvdesk::ui
