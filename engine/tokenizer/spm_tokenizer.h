// SpmTokenizer: SentencePiece vocabularies through the sentencepiece library, fed a
// ModelProto built from the GGUF's tokens, scores and types (or a .model file).
#pragma once
#include <memory>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

// tokenizer.ggml.model = "llama". Throws kvdesk::Error naming the offending key.
std::unique_ptr<Tokenizer> load_spm_tokenizer(const GgufFile& file);
// A SentencePiece .model file. Throws kvdesk::Error naming the path.
std::unique_ptr<Tokenizer> load_spm_tokenizer_file(const std::string& path);

}  // namespace kvdesk
