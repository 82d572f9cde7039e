// Tests of ui/shortcuts: key chords parsed from text and the shortcut each one is.
#include <catch2/catch.hpp>

#include "ui/shortcuts.h"

using namespace kvdesk::ui;

TEST_CASE("key chords parse with any case and order of modifiers", "[ui][shortcuts]") {
  CHECK(parse_key_chord("ctrl+n") == KeyChord{true, false, false, "n"});
  CHECK(parse_key_chord("Shift+Enter") == KeyChord{false, true, false, "enter"});
  CHECK(parse_key_chord("shift+ctrl+R") == KeyChord{true, true, false, "r"});
  CHECK(parse_key_chord("Escape") == KeyChord{false, false, false, "esc"});
  CHECK_FALSE(parse_key_chord("").has_value());
  CHECK_FALSE(parse_key_chord("ctrl+").has_value());
  CHECK_FALSE(parse_key_chord("hyper+n").has_value());
  CHECK_FALSE(parse_key_chord("ctrl+f13").has_value());
}

TEST_CASE("each shortcut has exactly its chord", "[ui][shortcuts]") {
  CHECK(shortcut_for(*parse_key_chord("ctrl+n")) == Shortcut::NewChat);
  CHECK(shortcut_for(*parse_key_chord("ctrl+f")) == Shortcut::FocusSearch);
  CHECK(shortcut_for(*parse_key_chord("esc")) == Shortcut::Stop);
  CHECK(shortcut_for(*parse_key_chord("ctrl+r")) == Shortcut::Regenerate);
  CHECK(shortcut_for(*parse_key_chord("n")) == Shortcut::None);          // typing, not a shortcut
  CHECK(shortcut_for(*parse_key_chord("ctrl+shift+n")) == Shortcut::None);
  CHECK(shortcut_for(*parse_key_chord("ctrl+esc")) == Shortcut::None);
  CHECK(shortcut_for(*parse_key_chord("enter")) == Shortcut::None);      // the composer's
}
