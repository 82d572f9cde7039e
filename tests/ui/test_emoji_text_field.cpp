// Tests of ui/emoji_text_field in a headless ImGui frame: a field shows real text with emoji and
// a genuine Private Use character and leaves it unchanged; emoji typed while it is active are
// inserted as the original sequence; typed text no field takes is dropped, not left for later.
#include <catch2/catch.hpp>
#include <imgui.h>

#include <string>

#include "ui/emoji_text.h"
#include "ui/emoji_text_field.h"

using namespace kvdesk::ui;

namespace {

const std::string kSmile = "\xF0\x9F\x98\x80";
const std::string kFamily = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
const std::string kGenuinePrivate = "\xEE\x80\x80";   // U+E000 in the user's own text

class Frames {
 public:
  Frames() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(800, 600);
    io.DeltaTime = 1.0f / 60.0f;
    io.Fonts->AddFontDefault();
    unsigned char* pixels = nullptr;
    int width = 0, height = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &width, &height);
  }
  ~Frames() { ImGui::DestroyContext(); }

  void draw(std::string& real, bool focus = false) {
    ImGui::NewFrame();
    ImGui::Begin("fields");
    if (focus) ImGui::SetKeyboardFocusHere();
    emoji_input_text_multiline("##field", real, ImVec2(400, 100));
    ImGui::End();
    ImGui::Render();
    end_field_frame();
  }
};

}  // namespace

TEST_CASE("a field shows emoji and private use text and leaves them unchanged", "[ui][emoji]") {
  Frames frames;
  const std::string original = "a " + kSmile + " " + kGenuinePrivate + " " + kFamily + " \xFF b";
  std::string real = original;
  for (int i = 0; i < 3; ++i) frames.draw(real, i == 0);
  CHECK(real == original);
}

TEST_CASE("emoji typed into the active field arrive as the original sequence", "[ui][emoji]") {
  Frames frames;
  const std::string original = "hello " + kGenuinePrivate;
  std::string real = original;
  frames.draw(real, true);
  frames.draw(real);
  type_into_active_field(emoji_table().to_display(kFamily + kSmile));
  frames.draw(real);
  frames.draw(real);
  const size_t at = real.find(kFamily + kSmile);
  REQUIRE(at != std::string::npos);
  CHECK(real.substr(0, at) + real.substr(at + kFamily.size() + kSmile.size()) == original);
}

TEST_CASE("typed emoji that no field takes are dropped at the end of the frame", "[ui][emoji]") {
  Frames frames;
  std::string real = "text";
  frames.draw(real);
  type_into_active_field(emoji_table().to_display(kSmile));
  frames.draw(real);
  frames.draw(real, true);
  frames.draw(real);
  CHECK(real == "text");
}
