// GgufWriter: byte-exact output against the GGUF v3 layout assembled by hand from the spec,
// round trips through GgufFile with every metadata type and several tensor types and
// alignments, and clean failure (an Error, no .tmp left) when writing cannot complete.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/lab/gguf_writer.h"

namespace {

using kvdesk::GgmlType;
using kvdesk::GgufFile;
using kvdesk::GgufType;
using kvdesk::GgufWriter;

// TempDir: a fresh folder under the system temp folder, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("kvdesk-gguf-writer-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void pad(std::vector<uint8_t>& out, size_t alignment) {
  while (out.size() % alignment != 0) out.push_back(0);
}

// A producer of n bytes counting up from seed, so each tensor's data is distinct.
GgufWriter::TensorProducer pattern(size_t n, uint8_t seed) {
  return [n, seed](std::vector<uint8_t>& out) {
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(seed + i));
  };
}

std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> out;
  pattern(n, seed)(out);
  return out;
}

struct TensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> dims;
  size_t bytes;
};

}  // namespace

TEST_CASE(
    "The writer lays out header and metadata and tensor infos and padded data exactly as GGUF v3",
    "[engine][gguf]") {
  TempDir dir;
  const std::string path = dir.file("exact.gguf");
  GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_uint32("llama.block_count", 5);
  writer.add_bool("flag", true);
  writer.add_int32_array("ids", {-1, 2});
  writer.add_tensor("t", GgmlType::F32, {3}, pattern(12, 1));
  writer.add_tensor("u", GgmlType::F16, {2, 2}, pattern(8, 50));
  writer.write(path);

  std::vector<uint8_t> expected = {'G', 'G', 'U', 'F'};
  put<uint32_t>(expected, 3);
  put<uint64_t>(expected, 2);  // tensors
  put<uint64_t>(expected, 4);  // metadata entries
  put_string(expected, "general.architecture");
  put<uint32_t>(expected, 8);
  put_string(expected, "llama");
  put_string(expected, "llama.block_count");
  put<uint32_t>(expected, 4);
  put<uint32_t>(expected, 5);
  put_string(expected, "flag");
  put<uint32_t>(expected, 7);
  put<uint8_t>(expected, 1);
  put_string(expected, "ids");
  put<uint32_t>(expected, 9);
  put<uint32_t>(expected, 5);
  put<uint64_t>(expected, 2);
  put<int32_t>(expected, -1);
  put<int32_t>(expected, 2);
  put_string(expected, "t");
  put<uint32_t>(expected, 1);
  put<int64_t>(expected, 3);
  put<uint32_t>(expected, 0);
  put<uint64_t>(expected, 0);
  put_string(expected, "u");
  put<uint32_t>(expected, 2);
  put<int64_t>(expected, 2);
  put<int64_t>(expected, 2);
  put<uint32_t>(expected, 1);
  put<uint64_t>(expected, 32);  // 12 bytes of "t" padded to 32
  pad(expected, 32);
  const std::vector<uint8_t> t = pattern_bytes(12, 1);
  expected.insert(expected.end(), t.begin(), t.end());
  pad(expected, 32);
  const std::vector<uint8_t> u = pattern_bytes(8, 50);
  expected.insert(expected.end(), u.begin(), u.end());
  pad(expected, 32);

  CHECK(read_bytes(path) == expected);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("Every metadata type and F32 F16 Q8_0 Q4_0 tensors read back equal at any alignment",
          "[engine][gguf]") {
  const uint32_t alignment = GENERATE(32u, 64u, 8u, 4096u);
  TempDir dir;
  const std::string path = dir.file("round-trip.gguf");
  GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_string("general.name", "");
  writer.add_string("unicode", "caf\xc3\xa9 \xe2\x96\x81the");
  writer.add_uint32("llama.block_count", 4294967295u);
  writer.add_int32("signed", -2147483647 - 1);
  writer.add_float32("llama.rope.freq_base", 10000.5f);
  writer.add_bool("off", false);
  writer.add_bool("on", true);
  writer.add_string_array("tokenizer.ggml.tokens", {"<unk>", "",
                                                    "\xe2\x96\x81"
                                                    "a",
                                                    std::string(300, 'z')});
  writer.add_string_array("empty.strings", {});
  writer.add_float32_array("tokenizer.ggml.scores", {-1.5f, 0.0f, 3.25e-7f});
  writer.add_int32_array("tokenizer.ggml.token_type", {1, -2, 2147483647});
  const std::vector<TensorSpec> specs = {
      {"token_embd.weight", GgmlType::F32, {5, 3}, 5 * 3 * 4},
      {"blk.0.attn_norm.weight", GgmlType::F16, {7}, 7 * 2},
      {"blk.0.attn_q.weight", GgmlType::Q8_0, {64, 2}, 2 * 34 * 2},
      {"blk.0.ffn_up.weight", GgmlType::Q4_0, {32, 1, 2, 3}, 18 * 6},
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    writer.add_tensor(specs[i].name, specs[i].type, specs[i].dims,
                      pattern(specs[i].bytes, static_cast<uint8_t>(i * 40)));
  }
  writer.write(path, alignment);

  const auto file = GgufFile::open(path);
  CHECK(file->version() == 3);
  CHECK(file->alignment() == alignment);
  const std::vector<std::string> keys = {"general.architecture",
                                         "general.name",
                                         "unicode",
                                         "llama.block_count",
                                         "signed",
                                         "llama.rope.freq_base",
                                         "off",
                                         "on",
                                         "tokenizer.ggml.tokens",
                                         "empty.strings",
                                         "tokenizer.ggml.scores",
                                         "tokenizer.ggml.token_type"};
  std::vector<std::string> read_keys;
  for (const auto& entry : file->metadata()) read_keys.push_back(entry.first);
  if (alignment != 32) {
    REQUIRE(read_keys.back() == "general.alignment");
    CHECK(file->find("general.alignment")->type == GgufType::UINT32);
    read_keys.pop_back();
  }
  CHECK(read_keys == keys);

  CHECK(file->get_string("general.architecture") == "llama");
  CHECK(file->get_string("general.name").empty());
  CHECK(file->get_string("unicode") == "caf\xc3\xa9 \xe2\x96\x81the");
  CHECK(file->get_uint("llama.block_count") == 4294967295u);
  CHECK(file->find("signed")->type == GgufType::INT32);
  CHECK(file->find("signed")->i == -2147483647 - 1);
  CHECK(file->find("llama.rope.freq_base")->type == GgufType::FLOAT32);
  CHECK(file->get_float("llama.rope.freq_base") == 10000.5);
  CHECK_FALSE(file->get_bool("off"));
  CHECK(file->get_bool("on"));
  CHECK(file->get_string_array("tokenizer.ggml.tokens") ==
        std::vector<std::string>{"<unk>", "",
                                 "\xe2\x96\x81"
                                 "a",
                                 std::string(300, 'z')});
  CHECK(file->get_string_array("empty.strings").empty());
  CHECK(file->find("tokenizer.ggml.scores")->element_type == GgufType::FLOAT32);
  CHECK(file->get_number_array("tokenizer.ggml.scores") ==
        std::vector<double>{-1.5f, 0.0f, 3.25e-7f});
  CHECK(file->find("tokenizer.ggml.token_type")->element_type == GgufType::INT32);
  CHECK(file->get_number_array("tokenizer.ggml.token_type") ==
        std::vector<double>{1, -2, 2147483647});

  REQUIRE(file->tensors().size() == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const kvdesk::GgufTensorInfo& info = file->tensors()[i];
    INFO(info.name);
    CHECK(info.name == specs[i].name);
    CHECK(info.type == specs[i].type);
    CHECK(info.dims == specs[i].dims);
    CHECK(info.num_bytes == specs[i].bytes);
    CHECK(info.offset % alignment == 0);
    const uint8_t* data = file->tensor_data(info);
    CHECK(reinterpret_cast<uintptr_t>(data) % alignment == 0);
    const std::vector<uint8_t> expected =
        pattern_bytes(specs[i].bytes, static_cast<uint8_t>(i * 40));
    CHECK(std::vector<uint8_t>(data, data + info.num_bytes) == expected);
  }
  CHECK(file->file_size() % alignment == 0);
}

TEST_CASE("A file with no metadata and no tensors is a valid empty GGUF", "[engine][gguf]") {
  TempDir dir;
  const std::string path = dir.file("empty.gguf");
  GgufWriter().write(path);
  const auto file = GgufFile::open(path);
  CHECK(file->metadata().empty());
  CHECK(file->tensors().empty());
  CHECK(file->file_size() == 32);  // the 24-byte header padded to the alignment
}

TEST_CASE("Writing replaces an existing file and leaves no .tmp behind", "[engine][gguf]") {
  TempDir dir;
  const std::string path = dir.file("model.gguf");
  GgufWriter first;
  first.add_string("general.name", "first");
  first.write(path);
  GgufWriter second;
  second.add_string("general.name", "second");
  second.write(path);
  CHECK(GgufFile::open(path)->get_string("general.name") == "second");
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("A write that cannot complete throws and leaves neither the file nor a .tmp",
          "[engine][gguf]") {
  TempDir dir;
  SECTION("the folder does not exist") {
    const std::string path = dir.file("no-such-folder/model.gguf");
    GgufWriter writer;
    writer.add_uint32("n", 1);
    CHECK_THROWS_WITH(writer.write(path), Catch::Contains(path + ": cannot create") &&
                                              Catch::Contains("No such file or directory"));
  }
  SECTION("a tensor producer fails half way") {
    const std::string path = dir.file("model.gguf");
    GgufWriter writer;
    writer.add_tensor("a", GgmlType::F32, {8}, pattern(32, 0));
    writer.add_tensor("b", GgmlType::F32, {8}, [](std::vector<uint8_t>&) {
      throw kvdesk::Error("source model: truncated");
    });
    CHECK_THROWS_WITH(writer.write(path), "source model: truncated");
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  }
}
