// Serializes a SentencePiece ModelProto by hand (protobuf wire format; no .pb.h ships with
// Debian's libsentencepiece) from a GGUF vocabulary, so the sentencepiece library encodes
// exactly as the model's own tokenizer.model would; and reads the pieces back out of one.
// Field numbers as in upstream sentencepiece_model.proto.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk {

struct SpmPiece {
  std::string piece;
  float score = 0;
  int type = 1;   // sentencepiece ModelProto.SentencePiece.Type: 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED, 6 BYTE
};

// model_type: 1 UNIGRAM, 2 BPE. byte_fallback must be true when BYTE pieces exist.
std::string serialize_spm_model_proto(const std::vector<SpmPiece>& pieces, int model_type,
                                      bool byte_fallback, bool add_dummy_prefix);

// The pieces of a serialized ModelProto (a .model file's bytes), in id order, with their
// types as stored (the library's API cannot tell USER_DEFINED from NORMAL). Throws
// kvdesk::Error when the bytes are not well-formed protobuf.
std::vector<SpmPiece> parse_spm_model_pieces(std::string_view serialized);

}  // namespace kvdesk
