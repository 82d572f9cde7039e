// Font size: setting x content scale, both kept within sane bounds, in whole pixels (glyphs
// rasterized at a fractional size blur).
#include "ui/font_size.h"

#include <algorithm>
#include <cmath>

namespace kvdesk::ui {

float usable_content_scale(float content_scale) {
  return std::isnan(content_scale) ? 1.0f : std::clamp(content_scale, kMinContentScale, kMaxContentScale);
}

float font_pixels(float content_scale, float setting) {
  const float size = std::isnan(setting) ? kDefaultFontSize : std::clamp(setting, kMinFontSize, kMaxFontSize);
  return std::round(size * usable_content_scale(content_scale));
}

bool valid_font_size(float setting) { return setting >= kMinFontSize && setting <= kMaxFontSize; }

}  // namespace kvdesk::ui
