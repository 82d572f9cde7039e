// Unicode Normalization Form C for tokenizers whose Hugging Face tokenizer.json normalizes
// with NFC before splitting (Qwen2 and Qwen3, GPT-NeoX/MPT): a decomposed "e" + U+0301 becomes
// "é", the one character their vocabularies learned. Bytes that are not valid UTF-8 are kept
// as they are, so byte-level BPE still encodes every byte.
#pragma once
#include <string>
#include <string_view>

namespace kvdesk {

std::string to_nfc(std::string_view text);

}  // namespace kvdesk
