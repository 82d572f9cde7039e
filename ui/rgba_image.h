// RgbaImage: pixels a panel computes and the renderer shows as a texture (ui/texture_cache.h).
#pragma once
#include <cstdint>
#include <vector>

namespace kvdesk::ui {

// Pixels [height][width], each an IM_COL32 (bytes R, G, B, A in memory).
struct RgbaImage {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint32_t> pixels;
};

}  // namespace kvdesk::ui
