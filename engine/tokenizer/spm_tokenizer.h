// SpmTokenizer: SentencePiece vocabularies through the sentencepiece library, fed a
// ModelProto built from the GGUF's tokens, scores and types (or a .model file).
#pragma once
#include <memory>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace kvdesk {

// tokenizer.ggml.model = "llama". Throws kvdesk::Error naming the offending key.
std::unique_ptr<Tokenizer> load_spm_tokenizer(const GgufFile& file);
// A SentencePiece .model file. Throws kvdesk::Error naming the path.
std::unique_ptr<Tokenizer> load_spm_tokenizer_file(const std::string& path);
// The SentencePiece processor of a .model file, refused with a kvdesk::Error naming the path
// when it is not a regular file of a plausible size (a device such as /dev/zero never ends).
std::unique_ptr<sentencepiece::SentencePieceProcessor> load_spm_processor(const std::string& path);

}  // namespace kvdesk
