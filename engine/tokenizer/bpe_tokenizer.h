// BpeTokenizer: GPT-2-style byte-level BPE (GGUF tokenizer.ggml.model = "gpt2"), the
// tokenizer of Llama 3, Qwen2 and SmolLM. User-defined tokens (the model's added tokens that
// are not special) are taken out of the text first, leftmost and longest first, as
// llama.cpp and Hugging Face take them; families whose tokenizer.json normalizes to NFC
// (Qwen2, MPT) normalize the text between them. That text is split into words by the
// PreTokenizer that tokenizer.ggml.pre names; each word's bytes are written as GPT-2
// byte-level text (byte_unicode.h), one symbol per byte, and adjacent symbols are merged,
// always the pair whose merge comes first in tokenizer.ggml.merges, until no pair has a
// merge. Each final symbol is a vocabulary token. For the families whose tokenizer ignores
// merges (Llama 3, Tekken), a word that is a vocabulary token as a whole is taken as it is.
// Decoding maps the token text back to bytes, exactly: the text as encoded, after NFC where
// the family has it.
#pragma once
#include <memory>

#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

// Reads tokenizer.ggml.tokens, .merges ("left right" strings), .token_type (optional),
// .pre (absent: "default", as llama.cpp), .bos/.eos/.eot_token_id and .add_bos_token
// (absent: the family's default, as llama.cpp: true for Llama 3 and Tekken, else false). Throws kvdesk::Error naming the offending key, or an unknown .pre value.
std::unique_ptr<Tokenizer> load_bpe_tokenizer(const GgufFile& file);

}  // namespace kvdesk
