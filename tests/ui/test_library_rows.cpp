// Library rows: the filters keep what they say, each column sorts both ways, ties keep order.
#include <catch2/catch.hpp>

#include "ui/library_rows.h"

using namespace kvdesk::ui;

namespace {

LibraryEntryView entry(std::string name, std::string arch, uint64_t gib, int64_t f16_context) {
  LibraryEntryView e;
  e.name = std::move(name);
  e.arch = std::move(arch);
  e.path = "/models/" + e.name + ".gguf";
  e.size_bytes = gib << 30;
  e.fits = {{"f32", f16_context / 2, 0}, {"f16", f16_context, 1}};
  return e;
}

const std::vector<LibraryEntryView> kEntries = {
    entry("Qwen3-8B", "qwen3", 5, 32768),
    entry("llama-3.2-1b", "llama", 1, 131072),
    entry("gemma-3-27b", "gemma3", 17, 0),
    entry("Qwen3-0.6B", "qwen3", 1, 40960),
};

}  // namespace

TEST_CASE("Library rows: text filters name or path case-insensitively, arch and size narrow", "[ui][library]") {
  LibraryQuery q;
  q.text = "qwen";
  CHECK(library_rows(kEntries, q) == std::vector<int32_t>{3, 0});   // by name: "qwen3-0.6b" < "qwen3-8b"
  q.text = "/models/LLAMA";
  CHECK(library_rows(kEntries, q) == std::vector<int32_t>{1});
  q = {};
  q.arch = "qwen3";
  q.max_size_bytes = uint64_t(2) << 30;
  CHECK(library_rows(kEntries, q) == std::vector<int32_t>{3});
  CHECK(library_architectures(kEntries) == std::vector<std::string>{"gemma3", "llama", "qwen3"});
}

TEST_CASE("Library rows: columns sort both ways, the Fits column by f16 context", "[ui][library]") {
  LibraryQuery q;
  q.sort = LibraryColumn::Size;
  CHECK(library_rows(kEntries, q) == std::vector<int32_t>{1, 3, 0, 2});   // equal sizes keep scan order
  q.ascending = false;
  CHECK(library_rows(kEntries, q) == std::vector<int32_t>{2, 0, 1, 3});
  q.sort = LibraryColumn::Fits;
  CHECK(library_rows(kEntries, q) == std::vector<int32_t>{1, 3, 0, 2});
  CHECK(f16_context(kEntries[2]) == 0);
}
