// The font size the window builds its fonts at: the Settings size times the monitor's content scale.
#include <catch2/catch.hpp>

#include <cmath>

#include "ui/font_size.h"

using namespace kvdesk::ui;

TEST_CASE("fonts follow the monitor's content scale times the size setting", "[ui][font_size]") {
  CHECK(font_pixels(1.0f, kDefaultFontSize) == 17.0f);
  CHECK(font_pixels(1.5f, kDefaultFontSize) == 26.0f);   // 25.5, to a whole pixel
  CHECK(font_pixels(2.0f, kDefaultFontSize) == 34.0f);
  CHECK(font_pixels(1.0f, 14.0f) == 14.0f);
  CHECK(font_pixels(1.5f, 14.0f) == 21.0f);
  CHECK(font_pixels(2.0f, 14.0f) == 28.0f);
  CHECK(font_pixels(1.25f, 20.0f) == 25.0f);
}

TEST_CASE("font sizes and scales out of bounds are clamped, never used as they are", "[ui][font_size]") {
  CHECK(font_pixels(1.0f, 200.0f) == kMaxFontSize);
  CHECK(font_pixels(1.0f, 1.0f) == kMinFontSize);
  CHECK(font_pixels(2.0f, NAN) == 34.0f);
  CHECK(font_pixels(NAN, 17.0f) == 17.0f);
  CHECK(font_pixels(0.0f, 17.0f) == std::round(17.0f * kMinContentScale));
  CHECK(font_pixels(100.0f, 17.0f) == 17.0f * kMaxContentScale);
  CHECK(usable_content_scale(1.5f) == 1.5f);
  CHECK(usable_content_scale(NAN) == 1.0f);
  CHECK(usable_content_scale(9.0f) == kMaxContentScale);
  CHECK(valid_font_size(17.0f));
  CHECK_FALSE(valid_font_size(9.5f));
  CHECK_FALSE(valid_font_size(NAN));
}

TEST_CASE("fixed widths grow with the font so their labels fit", "[ui][font_size]") {
  CHECK(width_for_font(200, kDefaultFontSize) == Approx(200));
  CHECK(width_for_font(200, font_pixels(2.0f, kDefaultFontSize)) == Approx(400));
  CHECK(width_for_font(120, 34.0f) == Approx(240));
}
