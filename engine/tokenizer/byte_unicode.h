// GPT-2's byte-to-unicode mapping: byte-level BPE vocabularies store every token as text in
// which each byte of the token is one visible code point. Printable bytes (! to ~, ¡ to ¬,
// ® to ÿ) stand for themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are
// shifted to U+0100.. in byte order, so a space is "Ġ" (U+0120) and a newline "Ċ" (U+010A).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvdesk {

// Each byte of `bytes` as its code point, UTF-8 encoded ("a b" -> "aĠb").
std::string bytes_to_byte_level(std::string_view bytes);

// The inverse: the bytes a byte-level token text stands for; nullopt when the text holds a
// code point outside the 256 of the mapping (special tokens like "<|im_start|>" are fine,
// they only use printable ASCII; "€" is not) or is not valid UTF-8.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace kvdesk
