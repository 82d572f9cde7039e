// Back buffer -> PNG (see screenshot.h). libstb already contains stb_image_write's code, so
// only its declarations are included here.
#include "app/gui/screenshot.h"

#include <GL/gl.h>
#include <stb_image_write.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/error.h"

namespace kvdesk::gui {

void save_screenshot(const std::string& path, int width, int height) {
  if (width <= 0 || height <= 0) throw Error("cannot take a screenshot of an empty window");
  const size_t stride = size_t(width) * 4;
  std::vector<uint8_t> pixels(stride * size_t(height));
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<uint8_t> flipped(pixels.size());
  for (int y = 0; y < height; ++y) {
    std::memcpy(flipped.data() + size_t(y) * stride, pixels.data() + size_t(height - 1 - y) * stride, stride);
  }
  // Opaque: the window has no meaningful alpha.
  for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
  if (!stbi_write_png(path.c_str(), width, height, 4, flipped.data(), int(stride))) {
    throw Error("could not write the screenshot '" + path + "'");
  }
}

}  // namespace kvdesk::gui
