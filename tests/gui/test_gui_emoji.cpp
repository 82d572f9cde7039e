// Colour emoji in the real window under Xvfb: a message with emoji (a skin tone, a ZWJ family,
// a flag) and Korean is typed into the composer character by character, as the keyboard sends
// it, then sent; screenshots of the composer and of the sent message (also the conversation's
// title) are compared with a control run that types plain text. Emoji drawn in colour add
// hundreds of warm saturated pixels (yellow, orange, brown, red: colours the dark theme's blue
// and grey widgets and white text do not have); a one-colour fallback glyph or "?" adds none.
// Also: the same with the colour font missing, more emoji than the atlas reserved, and copy and
// paste through the X clipboard.
#include <catch2/catch.hpp>
#include <stb_image.h>

#include <stdlib.h>

#include <fstream>

#include "app/store/conversation_store.h"
#include "engine/tokenizer/utf8_decode.h"
#include "ui/emoji_table.h"
#include "tests/gui/app_run.h"
#include "tests/test_support.h"

namespace {

using kvdesk::test::TempDir;
namespace store = kvdesk::store;

const std::string kEmojiText =
    "\xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D"
    "\xF0\x9F\x91\xA7 \xF0\x9F\x87\xB0\xF0\x9F\x87\xB7 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4";
const std::string kPlainText = "ab cd efgh ij \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4";

struct Saturated {
  int composer = 0;   // in the bottom band where the composer is
  int rest = 0;       // everywhere else: the messages, the title, the conversation list
};

// Warm saturated pixels: red well above blue, green not above red.
Saturated count_saturated(const std::string& path) {
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load(path.c_str(), &w, &h, &channels, 3);
  REQUIRE(pixels != nullptr);
  Saturated s;
  const int composer_top = h - h / 6;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const unsigned char* p = pixels + (size_t(y) * size_t(w) + size_t(x)) * 3;
      if (p[0] < p[1] || int(p[0]) - int(p[2]) <= 60) continue;
      (y >= composer_top ? s.composer : s.rest) += 1;
    }
  }
  stbi_image_free(pixels);
  return s;
}

struct Run {
  Saturated typed;   // the composer holding the text
  Saturated sent;    // the text sent, shown as a message and as the title
  std::string stored;
};

Run run_typing(const std::string& text, const std::string& expect_on_stderr = "") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  {
    store::ConversationStore s = store::ConversationStore::open(db);
    s.set_setting("sampling.temperature", "0");
    s.set_setting("sampling.max_tokens", "4");
  }
  std::ofstream(dir.file("emoji.txt"), std::ios::binary)
      << "wait_model\nnew_chat\ntype " << text << "\nscreenshot typed.png\nkey enter\nwait_answer\n"
      << "screenshot sent.png\nquit\n";
  const kvdesk::test::CliRun run =
      kvdesk::test::run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                dir.file("emoji.txt"), "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.err.find(expect_on_stderr) != std::string::npos);
  Run r{count_saturated(dir.file("typed.png")), count_saturated(dir.file("sent.png")), {}};
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Message> path = s.branch_path(s.list_conversations().at(0).id);
  REQUIRE(!path.empty());
  r.stored = path[0].content;
  return r;
}

}  // namespace

TEST_CASE("typed emoji are drawn in colour in the composer, the message and the title", "[gui][emoji]") {
  const Run plain = run_typing(kPlainText);
  const Run emoji = run_typing(kEmojiText);
  // The text sent is exactly what was typed, ZWJ sequence and flag included.
  CHECK(plain.stored == kPlainText);
  CHECK(emoji.stored == kEmojiText);
  INFO("saturated pixels, composer: plain " << plain.typed.composer << ", emoji " << emoji.typed.composer);
  INFO("saturated pixels, after sending: plain " << plain.sent.rest << ", emoji " << emoji.sent.rest);
  // The smiley, the thumb and the flag's red, one line high (the family is grey in Noto).
  CHECK(emoji.typed.composer - plain.typed.composer > 150);
  // The message, the title above the chat and in the conversation list: more than twice as many.
  CHECK(emoji.sent.rest - plain.sent.rest > 300);
}

// The same measure sees nothing when the colour font is missing: the emoji are then drawn as
// one-colour glyphs (or boxes), and the app says why on stderr and runs as usual.
TEST_CASE("without the colour emoji font the app runs and draws emoji in one colour", "[gui][emoji]") {
  ::setenv("KVDESK_EMOJI_FONT", "/nonexistent/NotoColorEmoji.ttf", 1);
  const Run fallback = run_typing(kEmojiText, "fonts-noto-color-emoji");
  ::unsetenv("KVDESK_EMOJI_FONT");
  CHECK(fallback.stored == kEmojiText);
  CHECK(fallback.typed.composer == 0);
  CHECK(fallback.sent.rest == 0);
}

// Past the glyph rects reserved when the atlas was built (256), the atlas is built again in the
// running window and its texture made anew: the last emoji typed still show in colour.
TEST_CASE("more distinct emoji than the atlas reserved are drawn after it is rebuilt", "[gui][emoji]") {
  std::string many;
  for (char32_t c = 0x1F400; c < 0x1F400 + 300; ++c) many += kvdesk::encode_utf8(c);
  TempDir dir;
  std::ofstream(dir.file("many.txt"), std::ios::binary)
      << "wait_model\nnew_chat\ntype " << many << "\nscreenshot many.png\nquit\n";
  const kvdesk::test::CliRun run =
      kvdesk::test::run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", dir.file("kvdesk.db"),
                                "--script", dir.file("many.txt"), "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  const Saturated s = count_saturated(dir.file("many.png"));
  INFO("warm saturated pixels in the composer: " << s.composer);
  CHECK(s.composer > 150);
}

// Copy and paste go through the X clipboard as the original text: selected, copied and pasted
// twice, the composer sends the typed text twice over, a genuine Private Use character included.
TEST_CASE("emoji copied from the composer and pasted back are the original text", "[gui][emoji]") {
  const std::string typed = "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x87\xB0\xF0\x9F\x87\xB7 \xEE\x80\x80x";
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  std::ofstream(dir.file("clip.txt"), std::ios::binary)
      << "wait_model\nnew_chat\ntype " << typed << "\nkey ctrl+a\nkey ctrl+c\nkey ctrl+v\nkey ctrl+v\n"
      << "key enter\nwait_answer\nquit\n";
  const kvdesk::test::CliRun run = kvdesk::test::run_kvdesk(
      {"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script", dir.file("clip.txt")});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Message> path = s.branch_path(s.list_conversations().at(0).id);
  REQUIRE(!path.empty());
  CHECK(path[0].content == typed + typed);
}
