// The tokenizer test sets of real model families (vocab-tests: a vocabulary-only GGUF, 46
// test strings, and the ids the family's own Hugging Face tokenizer gives for each, with no
// BOS/EOS and no special-token parsing). Every string must give exactly those ids.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/test_support.h"

using Ids = std::vector<int32_t>;

namespace {

constexpr size_t kStringsPerSet = 46;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The .inp file: test strings, each followed by a separator line.
std::vector<std::string> read_test_strings(const std::string& path) {
  const std::string text = read_file(path);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> strings;
  size_t at = 0;
  for (size_t hit; (hit = text.find(separator, at)) != std::string::npos; at = hit + separator.size()) {
    strings.push_back(text.substr(at, hit - at));
  }
  return strings;
}

// The .out file: one line of space-separated ids per test string.
std::vector<Ids> read_expected_ids(const std::string& path) {
  std::istringstream lines(read_file(path));
  std::vector<Ids> expected;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream numbers(line);
    Ids ids;
    for (int32_t id; numbers >> id;) ids.push_back(id);
    REQUIRE(numbers.eof());
    expected.push_back(ids);
  }
  return expected;
}

std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s) out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : std::string(1, c);
  return out;
}

}  // namespace

TEST_CASE("Real vocabularies tokenize the llama.cpp test strings exactly like their families' tokenizers",
          "[engine][tokenizer][vocab]") {
  const std::string family = GENERATE(as<std::string>{}, "llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm");
  const std::string gguf = kvdesk::test::vocab_test_path("ggml-vocab-" + family + ".gguf");
  const std::vector<std::string> strings = read_test_strings(gguf + ".inp");
  const std::vector<Ids> expected = read_expected_ids(gguf + ".out");
  REQUIRE(strings.size() == kStringsPerSet);
  REQUIRE(expected.size() == kStringsPerSet);

  const auto tokenizer = kvdesk::Tokenizer::from_gguf(*kvdesk::GgufFile::open(gguf));
  size_t passed = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    INFO(family << " string " << i << ": '" << printable(strings[i]) << "'");
    const Ids ids = tokenizer->encode(strings[i], false);
    CHECK(ids == expected[i]);
    passed += ids == expected[i] ? 1 : 0;
  }
  INFO(family << ": " << passed << "/" << strings.size() << " strings give the reference ids");
  CHECK(passed == kStringsPerSet);
}
