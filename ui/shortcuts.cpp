// Key chords: parsed from "mod+mod+key" and mapped to the window's shortcuts.
#include "ui/shortcuts.h"

#include <cctype>

namespace kvdesk::ui {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_key_name(const std::string& key) {
  if (key.size() == 1) return key[0] >= 'a' && key[0] <= 'z';
  return key == "enter" || key == "esc" || key == "tab";
}

}  // namespace

std::optional<KeyChord> parse_key_chord(std::string_view text) {
  KeyChord chord;
  std::string rest = lower(text);
  for (size_t plus = rest.find('+'); plus != std::string::npos; plus = rest.find('+')) {
    const std::string modifier = rest.substr(0, plus);
    if (modifier == "ctrl") {
      chord.ctrl = true;
    } else if (modifier == "shift") {
      chord.shift = true;
    } else if (modifier == "alt") {
      chord.alt = true;
    } else {
      return std::nullopt;
    }
    rest.erase(0, plus + 1);
  }
  if (rest == "escape") rest = "esc";
  if (rest == "return") rest = "enter";
  if (!is_key_name(rest)) return std::nullopt;
  chord.key = rest;
  return chord;
}

Shortcut shortcut_for(const KeyChord& c) {
  if (c.alt || c.shift) return Shortcut::None;
  if (c.key == "esc" && !c.ctrl) return Shortcut::Stop;
  if (!c.ctrl) return Shortcut::None;
  if (c.key == "n") return Shortcut::NewChat;
  if (c.key == "f") return Shortcut::FocusSearch;
  if (c.key == "r") return Shortcut::Regenerate;
  return Shortcut::None;
}

}  // namespace kvdesk::ui
