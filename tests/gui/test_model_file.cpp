// The checks a file passes before the engine is asked to load it as a model, and which of
// several dropped files is opened.
#include <catch2/catch.hpp>

#include <fstream>

#include "app/gui/model_file.h"
#include "tests/test_support.h"

using kvdesk::gui::dropped_model_path;
using kvdesk::gui::model_file_problem;

namespace {

void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

TEST_CASE("a model file must exist, be readable and start with GGUF", "[gui][model_file]") {
  kvdesk::test::TempDir dir;
  CHECK(model_file_problem(kvdesk::test::model_path("stories260K.gguf")).empty());
  CHECK_THAT(model_file_problem(dir.file("missing.gguf")), Catch::Contains("no model file at"));
  CHECK_THAT(model_file_problem(dir.path().string()), Catch::Contains("is a folder"));
  CHECK_THAT(model_file_problem(""), Catch::Contains("no model path"));
  write_file(dir.file("notes.txt"), "hello");
  CHECK_THAT(model_file_problem(dir.file("notes.txt")), Catch::Contains("'notes.txt' is not a model"));
  write_file(dir.file("short.gguf"), "GG");
  CHECK_THAT(model_file_problem(dir.file("short.gguf")), Catch::Contains("'short.gguf' is not a GGUF model"));
  write_file(dir.file("blob"), "GGUF\x03\x00\x00\x00");
  CHECK(model_file_problem(dir.file("blob")).empty());   // the magic decides, not the name
}

TEST_CASE("of several dropped files the first .gguf is opened", "[gui][model_file]") {
  CHECK(dropped_model_path({}).empty());
  CHECK(dropped_model_path({"/a/notes.txt", "/a/b.GGUF", "/a/c.gguf"}) == "/a/b.GGUF");
  CHECK(dropped_model_path({"/a/notes.txt", "/a/x.bin"}) == "/a/notes.txt");
}
