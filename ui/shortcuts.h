// Keyboard shortcuts: key chords ("ctrl+n", "shift+enter", "esc") and what each does in the
// window. Enter in the composer sends and Shift+Enter breaks the line (the composer handles
// those); Ctrl+N starts a new chat, Ctrl+F goes to the conversation search, Esc stops the
// answer being generated and Ctrl+R regenerates the last answer.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace kvdesk::ui {

struct KeyChord {
  bool ctrl = false;
  bool shift = false;
  bool alt = false;
  std::string key;   // "a".."z", "enter", "esc", "tab"

  bool operator==(const KeyChord&) const = default;
};

// "ctrl+shift+n", "Esc", "shift+Enter": modifiers and one key, case-insensitive; nothing when
// the text names no key or an unknown one.
std::optional<KeyChord> parse_key_chord(std::string_view text);

enum class Shortcut { None, NewChat, FocusSearch, Stop, Regenerate };
Shortcut shortcut_for(const KeyChord& chord);

// The keys shortcut_for knows, for the window to check each frame.
inline constexpr const char* kShortcutKeys[] = {"n", "f", "r", "esc"};

}  // namespace kvdesk::ui
