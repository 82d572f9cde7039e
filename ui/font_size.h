// Font size on any monitor: the size chosen in Settings is in pixels at a content scale of 1
// (a 96-dpi monitor), and the fonts are built at that times the monitor's content scale, so
// text keeps its physical size on a HiDPI monitor and when the window moves between monitors.
#pragma once

namespace kvdesk::ui {

inline constexpr float kDefaultFontSize = 17.0f;
inline constexpr float kMinFontSize = 10.0f;
inline constexpr float kMaxFontSize = 32.0f;
// Content scales a monitor may report; outside them (or NaN) a window system is confused.
inline constexpr float kMinContentScale = 0.5f;
inline constexpr float kMaxContentScale = 4.0f;

// The content scale used: clamped to the range above, NaN: 1.
float usable_content_scale(float content_scale);

// Whole pixels: `setting` (clamped to [kMinFontSize, kMaxFontSize], NaN: the default) times
// `content_scale` (clamped to the range above, NaN: 1), rounded to the nearest pixel.
float font_pixels(float content_scale, float setting);

// A width laid out for the default font at a content scale of 1, for a font of `font_pixels`:
// fixed widths (fields, buttons) grow with the text they hold, so nothing clips on HiDPI.
inline float width_for_font(float width_at_default, float font_pixels) {
  return width_at_default * font_pixels / kDefaultFontSize;
}

// True when `setting` is a font size Settings accepts.
bool valid_font_size(float setting);

}  // namespace kvdesk::ui
