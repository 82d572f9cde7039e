// Hand-written protobuf wire format for sentencepiece's ModelProto: writes just the fields
// that decide how text is segmented (pieces, model type, byte fallback, special ids,
// normalizer), set the way the Llama tokenizer.model sets them; reads back the pieces.
#include "engine/tokenizer/spm_model_proto.h"

#include <bit>
#include <cstdint>

#include "engine/error.h"

namespace kvdesk {
namespace {

// Field numbers from upstream sentencepiece_model.proto.
namespace model_proto {
constexpr int pieces = 1, trainer_spec = 2, normalizer_spec = 3;
}
namespace piece_field {
constexpr int piece = 1, score = 2, type = 3;
}
namespace trainer {
constexpr int model_type = 3, vocab_size = 4, byte_fallback = 35;
constexpr int unk_id = 40, bos_id = 41, eos_id = 42, pad_id = 43;
constexpr int unk_piece = 45;
}
namespace normalizer {
constexpr int name = 1, add_dummy_prefix = 3, remove_extra_whitespaces = 4, escape_whitespaces = 5;
}

constexpr int kUnknownType = 2;
constexpr int kControlType = 3;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Appends protobuf fields to a byte string.
class ProtoWriter {
 public:
  void varint_field(int field, uint64_t value) {
    tag(field, kVarint);
    varint(value);
  }
  // int32 fields encode negatives as the 64-bit two's complement (ten bytes).
  void int32_field(int field, int32_t value) { varint_field(field, static_cast<uint64_t>(int64_t{value})); }
  void bool_field(int field, bool value) { varint_field(field, value ? 1 : 0); }
  void float_field(int field, float value) {
    tag(field, kFixed32);
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    for (int shift = 0; shift < 32; shift += 8) out_.push_back(static_cast<char>(bits >> shift));
  }
  void bytes_field(int field, const std::string& bytes) {
    tag(field, kLengthDelimited);
    varint(bytes.size());
    out_ += bytes;
  }
  std::string take() { return std::move(out_); }

 private:
  void tag(int field, WireType type) { varint((static_cast<uint64_t>(field) << 3) | type); }
  void varint(uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }
  std::string out_;
};

// Reads protobuf fields from bytes that may be malformed: every read is bounds-checked and
// a violation throws kvdesk::Error.
class ProtoReader {
 public:
  struct Field {
    uint64_t number = 0;
    uint32_t type = kVarint;
    uint64_t value = 0;        // kVarint, kFixed32 and kFixed64 fields
    std::string_view bytes;    // kLengthDelimited fields
  };

  explicit ProtoReader(std::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  Field next() {
    Field f;
    const uint64_t key = varint();
    f.number = key >> 3;
    f.type = static_cast<uint32_t>(key & 7);
    switch (f.type) {
      case kVarint: f.value = varint(); break;
      case kFixed32: f.value = little_endian(take(4)); break;
      case kFixed64: f.value = little_endian(take(8)); break;
      case kLengthDelimited: f.bytes = take(varint()); break;
      default: throw Error("malformed SentencePiece model: unsupported protobuf wire type " + std::to_string(f.type));
    }
    return f;
  }

 private:
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto byte = static_cast<uint8_t>(take(1)[0]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    throw Error("malformed SentencePiece model: protobuf varint longer than 10 bytes");
  }
  std::string_view take(uint64_t n) {
    if (n > rest_.size()) throw Error("malformed SentencePiece model: a protobuf field runs past the end");
    const std::string_view head = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return head;
  }
  static uint64_t little_endian(std::string_view bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes.size(); ++i) value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    return value;
  }
  std::string_view rest_;
};

// The id of the first piece of type `type` (and named `name` unless it is empty), or -1.
int32_t find_piece(const std::vector<SpmPiece>& pieces, int type, std::string_view name = {}) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].type == type && (name.empty() || pieces[i].piece == name)) {
      return static_cast<int32_t>(i);
    }
  }
  return -1;
}

std::string serialize_piece(const SpmPiece& piece) {
  ProtoWriter w;
  w.bytes_field(piece_field::piece, piece.piece);
  w.float_field(piece_field::score, piece.score);
  w.varint_field(piece_field::type, static_cast<uint64_t>(piece.type));
  return w.take();
}

// Special ids follow the vocabulary: sentencepiece finds <s>, </s> and <pad> by those default
// names among the CONTROL pieces and <unk> by type; -1 says the vocabulary has none.
std::string serialize_trainer_spec(const std::vector<SpmPiece>& pieces, int model_type,
                                   bool byte_fallback) {
  ProtoWriter w;
  w.varint_field(trainer::model_type, static_cast<uint64_t>(model_type));
  w.int32_field(trainer::vocab_size, static_cast<int32_t>(pieces.size()));
  w.bool_field(trainer::byte_fallback, byte_fallback);
  const int32_t unk = find_piece(pieces, kUnknownType);
  w.int32_field(trainer::unk_id, unk);
  w.int32_field(trainer::bos_id, find_piece(pieces, kControlType, "<s>"));
  w.int32_field(trainer::eos_id, find_piece(pieces, kControlType, "</s>"));
  w.int32_field(trainer::pad_id, find_piece(pieces, kControlType, "<pad>"));
  if (unk >= 0) w.bytes_field(trainer::unk_piece, pieces[static_cast<size_t>(unk)].piece);
  return w.take();
}

// Llama's normalizer: "identity" (no Unicode normalization), spaces become U+2581, runs of
// spaces are kept, and a dummy space is prefixed when add_dummy_prefix is set.
std::string serialize_normalizer_spec(bool add_dummy_prefix) {
  ProtoWriter w;
  w.bytes_field(normalizer::name, "identity");
  w.bool_field(normalizer::add_dummy_prefix, add_dummy_prefix);
  w.bool_field(normalizer::remove_extra_whitespaces, false);
  w.bool_field(normalizer::escape_whitespaces, true);
  return w.take();
}

SpmPiece parse_piece(std::string_view bytes) {
  SpmPiece piece;
  ProtoReader r(bytes);
  while (!r.done()) {
    const ProtoReader::Field f = r.next();
    if (f.number == piece_field::piece && f.type == kLengthDelimited) piece.piece = f.bytes;
    if (f.number == piece_field::score && f.type == kFixed32) {
      piece.score = std::bit_cast<float>(static_cast<uint32_t>(f.value));
    }
    if (f.number == piece_field::type && f.type == kVarint) piece.type = static_cast<int>(f.value);
  }
  return piece;
}

}  // namespace

std::string serialize_spm_model_proto(const std::vector<SpmPiece>& pieces, int model_type,
                                      bool byte_fallback, bool add_dummy_prefix) {
  ProtoWriter w;
  for (const SpmPiece& piece : pieces) w.bytes_field(model_proto::pieces, serialize_piece(piece));
  w.bytes_field(model_proto::trainer_spec, serialize_trainer_spec(pieces, model_type, byte_fallback));
  w.bytes_field(model_proto::normalizer_spec, serialize_normalizer_spec(add_dummy_prefix));
  return w.take();
}

std::vector<SpmPiece> parse_spm_model_pieces(std::string_view serialized) {
  std::vector<SpmPiece> pieces;
  ProtoReader r(serialized);
  while (!r.done()) {
    const ProtoReader::Field f = r.next();
    if (f.number == model_proto::pieces && f.type == kLengthDelimited) pieces.push_back(parse_piece(f.bytes));
  }
  return pieces;
}

}  // namespace kvdesk
