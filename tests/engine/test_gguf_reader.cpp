// GgufFile on the real stories260K files, its typed getters, and a corpus of broken files
// built field by field: each must fail with a kvdesk::Error naming the file and the problem,
// never a crash or a giant allocation (run under ASan to see the latter).
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
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

const std::string kModelsDir = KVDESK_MODELS_DIR;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// TempDir: a fresh folder under the system temp folder, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("kvdesk-gguf-reader-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Bytes: a GGUF file assembled field by field, little-endian, so a test can write any value.
struct Bytes {
  std::vector<uint8_t> data;

  template <typename T>
  Bytes& put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& i64(int64_t v) { return put(v); }
  Bytes& type(GgufType t) { return u32(static_cast<uint32_t>(t)); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    data.insert(data.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) {
    return str(key).type(GgufType::UINT32).u32(v);
  }
  Bytes& kv_str(const std::string& key, const std::string& v) {
    return str(key).type(GgufType::STRING).str(v);
  }
  Bytes& tensor(const std::string& name, const std::vector<int64_t>& dims, uint32_t ggml_type,
                uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) i64(d);
    return u32(ggml_type).u64(offset);
  }
  Bytes& pad(size_t alignment) {
    while (data.size() % alignment != 0) data.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    data.insert(data.end(), n, 0);
    return *this;
  }
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A single-tensor file: header, one tensor info, padding, data_bytes of data.
Bytes one_tensor(const std::vector<int64_t>& dims, uint32_t ggml_type, uint64_t offset,
                 size_t data_bytes) {
  Bytes b;
  b.header(3, 1, 0).tensor("x", dims, ggml_type, offset).pad(32).zeros(data_bytes);
  return b;
}

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

struct BrokenFile {
  std::string what;
  Bytes bytes;
  std::string expected;  // a phrase the error message must contain
};

std::vector<BrokenFile> broken_files() {
  std::vector<BrokenFile> cases;
  const auto add = [&](std::string what, Bytes bytes, std::string expected) {
    cases.push_back({std::move(what), std::move(bytes), std::move(expected)});
  };
  Bytes bad_magic;
  bad_magic.data = {'G', 'G', 'U', 'X'};
  bad_magic.u32(3).u64(0).u64(0);
  add("bad magic", bad_magic, "bad magic");
  add("a file shorter than the magic", Bytes{{'G', 'G'}}, "truncated");
  add("version 1", Bytes().header(1, 0, 0), "version 1 is no longer supported");
  add("version 99", Bytes().header(99, 0, 0), "unsupported GGUF version 99");
  add("a big-endian version 3", Bytes().header(0x03000000, 0, 0), "big-endian");
  Bytes cut_header = Bytes().header(3, 0, 0);
  cut_header.data.resize(16);
  add("a header cut in the counts", cut_header, "truncated file while reading the header");
  add("tensor count near 2^64", Bytes().header(3, kU64Max, 0).zeros(64), "tensor count");
  add("kv count near 2^64", Bytes().header(3, 0, kU64Max - 1).zeros(64), "metadata key count");
  add("kv and tensor counts that fit only alone", Bytes().header(3, 2, 4).zeros(64),
      "metadata key count");
  add("key string length near 2^64", Bytes().header(3, 0, 1).u64(kU64Max).zeros(16),
      "string length");
  add("value string length 2^63",
      Bytes().header(3, 0, 1).str("k").type(GgufType::STRING).u64(uint64_t{1} << 63).zeros(16),
      "string length");
  add("uint32 array count near 2^64",
      Bytes()
          .header(3, 0, 1)
          .str("k")
          .type(GgufType::ARRAY)
          .type(GgufType::UINT32)
          .u64(kU64Max - 7)
          .zeros(16),
      "array of 18446744073709551608 uint32 elements cannot fit");
  add("string array count 2^62",
      Bytes()
          .header(3, 0, 1)
          .str("k")
          .type(GgufType::ARRAY)
          .type(GgufType::STRING)
          .u64(uint64_t{1} << 62)
          .zeros(16),
      "cannot fit");
  add("array of arrays",
      Bytes().header(3, 0, 1).str("k").type(GgufType::ARRAY).type(GgufType::ARRAY).u64(1).zeros(16),
      "arrays of arrays");
  add("array of an unknown type",
      Bytes().header(3, 0, 1).str("k").type(GgufType::ARRAY).u32(77).u64(1).zeros(16),
      "array of unknown value type 77");
  add("unknown value type", Bytes().header(3, 0, 1).str("k").u32(13).zeros(16),
      "unknown value type 13");
  add("bool value 2", Bytes().header(3, 0, 1).str("k").type(GgufType::BOOL).u8(2).zeros(16),
      "bool value 2");
  add("duplicate key", Bytes().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2),
      "duplicate metadata key 'a'");
  add("alignment 0", Bytes().header(3, 0, 1).kv_u32("general.alignment", 0),
      "alignment 0 is not a power of two");
  add("alignment 3", Bytes().header(3, 0, 1).kv_u32("general.alignment", 3),
      "alignment 3 is not a power of two");
  add("alignment 4", Bytes().header(3, 0, 1).kv_u32("general.alignment", 4),
      "alignment 4 is not a multiple of 8");
  add("alignment stored as a string", Bytes().header(3, 0, 1).kv_str("general.alignment", "32"),
      "general.alignment has type string, expected uint32");
  add("metadata cut inside key 1",
      Bytes().header(3, 0, 2).kv_str("general.architecture", "llama").str("llama.block_count"),
      "truncated file while reading metadata key 1 ('llama.block_count')");
  add("tensor info cut after its name",
      Bytes().header(3, 2, 0).tensor("a", {8}, kF32, 0).str("blk.0.attn_q.weight").u32(1),
      "truncated file while reading tensor info 1 ('blk.0.attn_q.weight')");

  add("n_dims 0", one_tensor({}, kF32, 0, 64), "0 dimensions, expected 1 to 4");
  Bytes nine_dims;
  nine_dims.header(3, 1, 0).str("x").u32(9);
  for (int d = 0; d < 9; ++d) nine_dims.i64(1);
  add("n_dims 9", nine_dims.u32(kF32).u64(0).pad(32).zeros(64), "9 dimensions");
  add("a dim of 0", one_tensor({4, 0}, kF32, 0, 64), "dimension 1 is 0");
  add("a negative dim", one_tensor({-5}, kF32, 0, 64), "dimension 0 is -5");
  add("dims whose product overflows int64",
      one_tensor({int64_t{1} << 32, int64_t{1} << 32}, kF32, 0, 64), "too many elements");
  add("dims past the element limit", one_tensor({int64_t{1} << 30, int64_t{1} << 30}, kF32, 0, 64),
      "too many elements");
  add("unknown tensor type id", one_tensor({8}, 99, 0, 64), "unknown tensor type id 99");
  add("a retired tensor type id", one_tensor({8}, 4, 0, 64), "unknown tensor type id 4");
  add("a Q8_0 row of 33 values", one_tensor({33}, kQ8_0, 0, 64),
      "not a multiple of the q8_0 block size 32");
  add("data offset past end of file", one_tensor({8}, kF32, uint64_t{1} << 40, 64),
      "past end of file");
  add("data offset near 2^64", one_tensor({8}, kF32, kU64Max - 31, 64), "past end of file");
  add("data running past end of file", one_tensor({8}, kF32, 0, 16),
      "tensor 'x' data [64, 96) extends past end of file (size 80)");
  add("misaligned data offset", one_tensor({8}, kF32, 4, 64),
      "data offset 4 is not a multiple of the alignment 32");
  add("overlapping tensors",
      Bytes()
          .header(3, 2, 0)
          .tensor("a", {16}, kF32, 0)
          .tensor("b", {16}, kF32, 32)
          .pad(32)
          .zeros(128),
      "tensors 'a' data [96, 160) and 'b' data [128, 192) overlap");
  add("duplicate tensor name",
      Bytes()
          .header(3, 2, 0)
          .tensor("x", {8}, kF32, 0)
          .tensor("x", {8}, kF32, 32)
          .pad(32)
          .zeros(64),
      "duplicate tensor name 'x'");
  add("a string array with a string length near 2^64 inside",
      Bytes()
          .header(3, 0, 1)
          .str("k")
          .type(GgufType::ARRAY)
          .type(GgufType::STRING)
          .u64(2)
          .str("fine")
          .u64(kU64Max - 3)
          .zeros(16),
      "string length 18446744073709551612 exceeds");
  add("a float64 array count just past the bytes left",
      Bytes().header(3, 0, 1).str("k").type(GgufType::ARRAY).type(GgufType::FLOAT64).u64(3).zeros(16),
      "array of 3 float64 elements cannot fit in the 16 bytes left");
  add("a tensor count of 2^63 with no room for one",
      Bytes().header(3, uint64_t{1} << 63, 0), "tensor count 9223372036854775808 cannot fit");
  add("dims of 2^62 x 4 that overflow int64 exactly",
      one_tensor({int64_t{1} << 62, 4}, kF32, 0, 64), "too many elements");
  add("four dims whose product passes the element limit only at the last",
      one_tensor({1 << 12, 1 << 12, 1 << 12, 1 << 13}, kF32, 0, 64), "too many elements");
  add("a 4 TiB tensor in a small file", one_tensor({int64_t{1} << 40}, kF32, 0, 64),
      "tensor 'x' data [64, 4398046511168) extends past end of file (size 128)");
  add("alignment 2^31 puts the data section past the end",
      Bytes().header(3, 1, 1).kv_u32("general.alignment", 1u << 31).tensor("x", {8}, kF32, 0).zeros(64),
      "past end of file");
  add("a tensor name of 64 bytes",
      Bytes().header(3, 1, 0).tensor(std::string(64, 'n'), {8}, kF32, 0).zeros(64), "too long");
  return cases;
}

// A small valid file with metadata of several types and two tensors; the last tensor's data
// ends the file (32 bytes), so cutting the file anywhere breaks something.
void write_small_model(const std::string& path) {
  GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_uint32("llama.block_count", 5);
  writer.add_float32("llama.rope.freq_base", 10000.0f);
  writer.add_bool("tokenizer.ggml.add_bos_token", true);
  writer.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  writer.add_int32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  writer.add_float32_array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.0f, 3.25f});
  writer.add_tensor("a", GgmlType::F16, {6},
                    [](std::vector<uint8_t>& out) { out.assign(12, 0x3c); });
  writer.add_tensor("b", GgmlType::F32, {8}, [](std::vector<uint8_t>& out) { out.assign(32, 0); });
  writer.write(path);
}

}  // namespace

TEST_CASE("stories260K.gguf reads as GGUF v3 with llama metadata and F32 tensors",
          "[engine][gguf]") {
  const auto file = GgufFile::open(kModelsDir + "/stories260K.gguf");
  CHECK(file->version() == 3);
  CHECK(file->alignment() == 32);
  CHECK(file->get_string("general.architecture") == "llama");
  CHECK(file->get_uint("llama.block_count") == 5);
  CHECK(file->get_string_array("tokenizer.ggml.tokens").size() == 512);
  CHECK(file->get_string("tokenizer.ggml.model") == "llama");
  CHECK(file->get_float("llama.attention.layer_norm_rms_epsilon") == Approx(1e-5));

  const kvdesk::GgufTensorInfo* embd = file->find_tensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->dims == std::vector<int64_t>{64, 512});
  CHECK(embd->type == GgmlType::F32);
  CHECK(embd->num_elements == 64 * 512);
  CHECK(embd->num_bytes == 64 * 512 * 4);
  CHECK(file->find_tensor("no.such.tensor") == nullptr);

  const kvdesk::GgufTensorInfo* output = file->find_tensor("output.weight");
  REQUIRE(output != nullptr);
  REQUIRE(output->num_bytes == embd->num_bytes);
  CHECK(std::memcmp(file->tensor_data(*output), file->tensor_data(*embd), embd->num_bytes) == 0);
  for (const kvdesk::GgufTensorInfo& t : file->tensors()) {
    CHECK(t.type == GgmlType::F32);
    CHECK(t.offset % file->alignment() == 0);
  }
}

TEST_CASE("stories260K-Q8_0.gguf stores Q8_0 weights and keeps ffn_down (rows of 172) in F16",
          "[engine][gguf]") {
  const auto file = GgufFile::open(kModelsDir + "/stories260K-Q8_0.gguf");
  const kvdesk::GgufTensorInfo* q = file->find_tensor("blk.0.attn_q.weight");
  REQUIRE(q != nullptr);
  CHECK(q->type == GgmlType::Q8_0);
  CHECK(q->dims == std::vector<int64_t>{64, 64});
  CHECK(q->num_bytes == 64 / 32 * 34 * 64);
  const kvdesk::GgufTensorInfo* down = file->find_tensor("blk.0.ffn_down.weight");
  REQUIRE(down != nullptr);
  CHECK(down->type == GgmlType::F16);
  CHECK(down->dims == std::vector<int64_t>{172, 64});
}

TEST_CASE("Typed getters convert compatible types and name the key and the types otherwise",
          "[engine][gguf]") {
  TempDir dir;
  const std::string path = dir.file("getters.gguf");
  GgufWriter writer;
  writer.add_string("name", "tiny");
  writer.add_uint32("count", 7);
  writer.add_int32("negative", -3);
  writer.add_int32("positive", 12);
  writer.add_float32("eps", 0.5f);
  writer.add_float32("nan", std::nanf(""));
  writer.add_float32("inf", std::numeric_limits<float>::infinity());
  writer.add_bool("flag", true);
  writer.add_string_array("words", {"x", "y"});
  writer.add_int32_array("ids", {4, -5});
  writer.write(path);
  const auto file = GgufFile::open(path);

  CHECK(file->get_uint("count") == 7);
  CHECK(file->get_uint("positive") == 12);
  CHECK(file->get_float("count") == 7.0);
  CHECK(file->get_float("negative") == -3.0);
  CHECK(file->get_float("eps") == 0.5);
  CHECK(file->get_bool("flag"));
  CHECK(file->get_string_array("words") == std::vector<std::string>{"x", "y"});
  CHECK(file->get_number_array("ids") == std::vector<double>{4, -5});
  CHECK(file->find_string("missing") == std::nullopt);
  CHECK(file->find_uint("missing") == std::nullopt);
  CHECK(file->find_float("eps") == 0.5);
  CHECK(file->find_bool("flag") == true);

  using Catch::Contains;
  CHECK_THROWS_AS(file->get_string("missing"), kvdesk::Error);
  CHECK_THROWS_WITH(file->get_string("missing"),
                    Contains(path) && Contains("missing metadata key 'missing'"));
  CHECK_THROWS_WITH(file->get_uint("name"),
                    Contains("'name' has type string, expected an integer"));
  CHECK_THROWS_WITH(file->get_uint("flag"), Contains("'flag' has type bool, expected an integer"));
  CHECK_THROWS_WITH(file->get_uint("eps"), Contains("'eps' has type float32"));
  CHECK_THROWS_WITH(file->get_uint("negative"),
                    Contains("'negative' is -3, expected a non-negative integer"));
  CHECK_THROWS_WITH(file->get_float("nan"),
                    Contains("'nan'") && Contains("expected a finite number"));
  CHECK_THROWS_WITH(file->get_float("inf"),
                    Contains("'inf'") && Contains("expected a finite number"));
  CHECK_THROWS_WITH(file->get_float("flag"), Contains("expected a number"));
  CHECK_THROWS_WITH(file->get_bool("count"), Contains("'count' has type uint32, expected bool"));
  CHECK_THROWS_WITH(file->get_string("count"), Contains("expected string"));
  CHECK_THROWS_WITH(file->get_string_array("ids"),
                    Contains("has type array of int32, expected array of string"));
  CHECK_THROWS_WITH(file->get_number_array("words"),
                    Contains("array of string, expected array of numbers"));
  CHECK_THROWS_WITH(file->get_number_array("count"), Contains("has type uint32"));
  CHECK_THROWS_WITH(file->find_uint("name"), Contains("expected an integer"));
}

TEST_CASE("A GGUF v2 file is read like v3", "[engine][gguf]") {
  TempDir dir;
  const std::string path = dir.file("v2.gguf");
  Bytes bytes;
  bytes.header(2, 1, 1)
      .kv_str("general.architecture", "llama")
      .tensor("x", {8}, kF32, 0)
      .pad(32)
      .zeros(32);
  write_file(path, bytes.data);
  const auto file = GgufFile::open(path);
  CHECK(file->version() == 2);
  CHECK(file->get_string("general.architecture") == "llama");
  CHECK(file->tensors().size() == 1);
}

TEST_CASE("Missing or empty files and folders or pipes give an error naming the path",
          "[engine][gguf]") {
  using Catch::Contains;
  TempDir dir;
  const std::string missing = dir.file("missing.gguf");
  CHECK_THROWS_WITH(GgufFile::open(missing),
                    Contains(missing + ": cannot open: No such file or directory"));
  const std::string empty = dir.file("empty.gguf");
  write_file(empty, {});
  CHECK_THROWS_WITH(GgufFile::open(empty), Contains(empty + ": empty file"));
  const std::string folder = dir.file("folder.gguf");
  std::filesystem::create_directory(folder);
  CHECK_THROWS_WITH(GgufFile::open(folder), Contains(folder + ": is a directory"));
  const std::string fifo = dir.file("fifo.gguf");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(GgufFile::open(fifo), Contains(fifo + ": not a regular file"));
}

TEST_CASE("Every broken file in the corpus gives an error naming the path and the problem",
          "[engine][gguf]") {
  TempDir dir;
  int index = 0;
  for (const BrokenFile& broken : broken_files()) {
    const std::string path = dir.file("broken-" + std::to_string(index++) + ".gguf");
    write_file(path, broken.bytes.data);
    INFO(broken.what);
    CHECK_THROWS_AS(GgufFile::open(path), kvdesk::Error);
    CHECK_THROWS_WITH(GgufFile::open(path),
                      Catch::Contains(path + ": ") && Catch::Contains(broken.expected));
  }
}

TEST_CASE("A valid file cut at any byte gives a truncation error and never a crash",
          "[engine][gguf]") {
  TempDir dir;
  const std::string whole = dir.file("whole.gguf");
  write_small_model(whole);
  const std::vector<uint8_t> bytes = read_bytes(whole);
  REQUIRE(bytes.size() > 300);
  REQUIRE_NOTHROW(GgufFile::open(whole));

  const std::string cut = dir.file("cut.gguf");
  for (size_t size = 0; size < bytes.size(); ++size) {
    write_file(cut, std::vector<uint8_t>(bytes.begin(),
                                         bytes.begin() + static_cast<std::ptrdiff_t>(size)));
    INFO("cut at byte " << size << " of " << bytes.size());
    CHECK_THROWS_WITH(GgufFile::open(cut),
                      Catch::Contains(cut + ": ") &&
                          (Catch::Contains("truncated") || Catch::Contains("past end of file") ||
                           Catch::Contains("empty file")));
  }
}

// Under ASan and TSan the address space is mostly shadow memory, so only a plain build can
// cap it; the sanitizer builds report an oversized allocation themselves.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCanCapAddressSpace = false;
#else
constexpr bool kCanCapAddressSpace = true;
#endif

TEST_CASE("Rejecting every broken file stays within 64 MiB more address space", "[engine][gguf]") {
  TempDir dir;
  std::vector<std::string> paths;
  for (const BrokenFile& broken : broken_files()) {
    paths.push_back(dir.file("bounded-" + std::to_string(paths.size()) + ".gguf"));
    write_file(paths.back(), broken.bytes.data);
  }
  // The child caps its address space at what it uses now plus 64 MiB, then opens each file:
  // exit 0 when every one gave a kvdesk::Error, 1 when one opened, 2 when memory ran out.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (kCanCapAddressSpace) {
      std::ifstream statm("/proc/self/statm");
      uint64_t pages = 0;
      statm >> pages;
      const rlim_t cap = pages * uint64_t(::sysconf(_SC_PAGESIZE)) + (uint64_t{64} << 20);
      const rlimit limit{cap, cap};
      if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    }
    for (const std::string& path : paths) {
      try {
        GgufFile::open(path);
        ::_exit(1);
      } catch (const kvdesk::Error&) {
      } catch (const std::bad_alloc&) {
        ::_exit(2);
      }
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
