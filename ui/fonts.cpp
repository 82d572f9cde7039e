// Fonts: CJK font search with a fallback to the default font (see fonts.h). OversampleH/V = 1
// halves the Hangul atlas and the first frame (PLATFORM.md). The body font's ranges are Latin,
// Hangul, kana and the ideographs of ImGui's Japanese and common simplified Chinese sets (about
// 4,500); the first CJK font draws what it has of them and a merged fallback font (Droid Sans
// Fallback or Noto CJK) the ideographs it lacks (NanumGothic has Korean Hanja, mostly
// traditional forms), since ImGui fills a merged font's code points only where earlier sources
// left them empty.
#include "ui/fonts.h"

#include <imgui.h>

#include <cmath>
#include <filesystem>

#include "ui/font_size.h"

namespace kvdesk::ui {
namespace {

// Latin, general punctuation, arrows, geometric shapes, CJK punctuation, kana, Hangul jamo and
// syllables, half- and full-width forms.
const ImWchar kBodyRanges[] = {0x0020, 0x00FF, 0x2000, 0x206F, 0x2190, 0x21FF, 0x25A0, 0x25FF, 0x3000, 0x303F,
                               0x3040, 0x30FF, 0x3131, 0x3163, 0xAC00, 0xD7A3, 0xFF00, 0xFFEF, 0};
const ImWchar kLatinRanges[] = {0x0020, 0x00FF, 0x2000, 0x206F, 0};

const char* const kMonoCandidates[] = {
    "/usr/share/fonts/truetype/nanum/NanumGothicCoding.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
};

ImFontConfig font_config() {
  ImFontConfig config;
  config.OversampleH = 1;
  config.OversampleV = 1;
  config.PixelSnapH = true;
  return config;
}

ImFont* add_first_existing(const std::vector<std::string>& paths, float size_px, const ImWchar* ranges,
                           std::string* used) {
  ImGuiIO& io = ImGui::GetIO();
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    ImFontConfig config = font_config();
    if (ImFont* font = io.Fonts->AddFontFromFileTTF(path.c_str(), size_px, &config, ranges)) {
      if (used) *used = std::filesystem::path(path).stem().string();
      return font;
    }
  }
  return nullptr;
}

// kBodyRanges with the Japanese and common simplified Chinese ideographs; built once, kept for
// the atlas (ImGui reads the ranges again whenever it builds).
const ImWchar* cjk_ranges() {
  static const ImVector<ImWchar> ranges = [] {
    ImFontGlyphRangesBuilder builder;
    builder.AddRanges(kBodyRanges);
    builder.AddRanges(ImGui::GetIO().Fonts->GetGlyphRangesJapanese());
    builder.AddRanges(ImGui::GetIO().Fonts->GetGlyphRangesChineseSimplifiedCommon());
    ImVector<ImWchar> built;
    builder.BuildRanges(&built);
    return built;
  }();
  return ranges.Data;
}

// Merges the first fallback font found into the font added last, for the code points it left
// without a glyph; "" when none is installed.
std::string merge_fallback(float size_px, const ImWchar* ranges) {
  for (const std::string& path : cjk_fallback_candidates()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    ImFontConfig config = font_config();
    config.MergeMode = true;
    if (ImGui::GetIO().Fonts->AddFontFromFileTTF(path.c_str(), size_px, &config, ranges)) {
      return std::filesystem::path(path).stem().string();
    }
  }
  return "";
}

}  // namespace

const std::vector<std::string>& cjk_fallback_candidates() {
  static const std::vector<std::string> paths = {
      "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
      "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
      "/usr/share/fonts/truetype/noto/NotoSansCJK-Regular.ttc",
  };
  return paths;
}

const std::vector<std::string>& cjk_font_candidates() {
  static const std::vector<std::string> paths = {
      "/usr/share/fonts/truetype/nanum/NanumGothic.ttf",
      "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
      "/usr/share/fonts/truetype/noto/NotoSansCJK-Regular.ttc",
      "/usr/share/fonts/truetype/nanum/NanumBarunGothic.ttf",
  };
  return paths;
}

Fonts load_fonts(float size_px, bool korean) {
  ImGuiIO& io = ImGui::GetIO();
  Fonts fonts;
  std::string used;
  if (korean) fonts.body = add_first_existing(cjk_font_candidates(), size_px, cjk_ranges(), &used);
  if (fonts.body) {
    fonts.korean = true;
    const std::string fallback = merge_fallback(size_px, cjk_ranges());
    fonts.note = "CJK: " + used + (fallback.empty() ? std::string() : " + " + fallback);
  } else {
    // ImGui's default font is drawn for 13 px: scaled as the body size is scaled from 17 px.
    ImFontConfig config = font_config();
    config.SizePixels = std::round(13.0f * size_px / 17.0f);
    fonts.body = io.Fonts->AddFontDefault(&config);
    fonts.note = korean ? "no CJK font found (install fonts-nanum): Korean shows as '?'" : "default font";
  }
  const std::vector<std::string> mono(std::begin(kMonoCandidates), std::end(kMonoCandidates));
  fonts.mono = add_first_existing(mono, size_px, kLatinRanges, nullptr);
  if (!fonts.mono) fonts.mono = fonts.body;
  return fonts;
}

float scaled_width(float width_at_default) { return width_for_font(width_at_default, ImGui::GetFontSize()); }

}  // namespace kvdesk::ui
