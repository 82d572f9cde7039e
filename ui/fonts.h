// Fonts: a body font that renders Korean, Japanese and Chinese (the first CJK font found on the
// system, with a fallback font merged in for the ideographs it lacks) and a monospaced font for
// code blocks, with a clear fallback to ImGui's default font and a note
// saying which was used. Load before the first frame (the atlas is built then).
#pragma once
#include <string>
#include <vector>

struct ImFont;

namespace kvdesk::ui {

struct Fonts {
  ImFont* body = nullptr;    // nullptr: ImGui's default font
  ImFont* mono = nullptr;
  bool korean = false;       // the body font has Hangul (and kana and ideographs)
  std::string note;          // for the status line: "CJK: NanumGothic + DroidSansFallbackFull" or why not
};

// Where kvdesk looks for a CJK font, in order (fonts-nanum, fonts-noto-cjk), and for the font
// merged into it for the Chinese and Japanese ideographs it lacks (fonts-droid-fallback,
// fonts-noto-cjk).
const std::vector<std::string>& cjk_font_candidates();
const std::vector<std::string>& cjk_fallback_candidates();

// width_for_font at the current ImGui font's size (call inside a frame).
float scaled_width(float width_at_default);

// Adds the fonts to the current ImGui context's atlas. korean = false skips the CJK search
// (the Hangul ranges make a 4096-wide atlas: tests that need no Hangul stay fast).
Fonts load_fonts(float size_px, bool korean = true);

}  // namespace kvdesk::ui
