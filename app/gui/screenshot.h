// Screenshots of the window: the back buffer read before it is swapped, rows flipped (GL
// counts rows from the bottom), written as PNG with stb_image_write (from libstb).
#pragma once
#include <string>

namespace kvdesk::gui {

// Reads width x height pixels of the current context's back buffer and writes a PNG.
// Throws kvdesk::Error naming the file when it cannot be written.
void save_screenshot(const std::string& path, int width, int height);

}  // namespace kvdesk::gui
