// kvdesk-cli --backend auto|cpu|cuda end to end. Until the CUDA forward pass exists every build
// runs on the CPU: cpu silently, auto with a note on stderr saying why (no device, no CUDA in
// this build, or no CUDA forward pass yet), cuda as a one-line runtime error (exit 1) before
// the model loads; a backend name that is none of these is a usage error (exit 2).
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/test_support.h"

using kvdesk::test::model_path;
using kvdesk::test::reference;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("generate with backend cpu or auto gives the reference text on the CPU and only auto explains", "[app][cli][backend]") {
  struct Row {
    std::string backend;
    bool note;   // stderr carries "kvdesk-cli: ...; using the CPU"
  };
  for (const Row& row : {Row{"cpu", false}, Row{"auto", true}}) {
    const auto run = run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "-n", "64",
                              "--temp", "0", "--backend", row.backend, "--json"});
    INFO("backend " << row.backend << ", stderr: " << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(nlohmann::json::parse(run.out)["tokens"] == reference()["generated_ids"]);
    CHECK(contains(run.err, "using the CPU") == row.note);
    if (row.note) CHECK((contains(run.err, "no CUDA device: ") || contains(run.err, "not available in this build yet")));
  }
}

TEST_CASE("info reports the backend it chose and why", "[app][cli][backend]") {
  const auto cpu = run_cli({"info", "-m", model_path("stories260K.gguf"), "--backend", "cpu", "--json"});
  REQUIRE(cpu.exit_code == 0);
  const auto cj = nlohmann::json::parse(cpu.out);
  CHECK(cj["backend"] == "cpu");
  CHECK(cj["backend_note"] == "");
  const auto automatic = run_cli({"info", "-m", model_path("stories260K.gguf"), "--json"});
  REQUIRE(automatic.exit_code == 0);
  const auto aj = nlohmann::json::parse(automatic.out);
  CHECK(aj["backend"] == "cpu");
  CHECK(contains(aj["backend_note"].get<std::string>(), "using the CPU"));
  const auto text = run_cli({"info", "-m", model_path("stories260K.gguf"), "--backend", "cpu"});
  CHECK(contains(text.out, "backend                \"cpu\""));
}

TEST_CASE("generate with backend cuda but no usable CUDA device is one clear runtime error", "[app][cli][backend]") {
  TempDir dir;
  const std::string trace = dir.file("trace.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "user": "Once upon a time", "max_tokens": 4, "arrival_ms": 0})" << "\n";
  const std::string m = model_path("stories260K.gguf");
  const std::vector<std::vector<std::string>> rows = {
      {"generate", "-m", m, "-p", "hi", "--backend", "cuda"},
      {"info", "-m", m, "--backend", "cuda"},
      {"logits", "-m", m, "-p", "hi", "--backend", "cuda"},
      {"replay", "-m", m, "--trace", trace, "--backend", "cuda"},
  };
  for (const auto& args : rows) {
    const auto run = run_cli(args);
    INFO("args: " << nlohmann::json(args).dump() << " stderr: " << run.err);
    CHECK(run.exit_code == 1);
    CHECK(count_lines(run.err) == 1);
    CHECK(contains(run.err, "kvdesk-cli: error: the CUDA backend was asked for"));
    CHECK(run.out.empty());
  }
}

TEST_CASE("an unknown --backend is a usage error naming the choices", "[app][cli][backend]") {
  const std::string m = model_path("stories260K.gguf");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"generate", "-m", m, "-p", "hi", "--backend", "gpu"},
                                               std::vector<std::string>{"info", "-m", m, "--backend", "metal"}}) {
    const auto run = run_cli(args);
    INFO(run.err);
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, "--backend"));
    CHECK(contains(run.err, "\nUsage: kvdesk-cli " + args[0]));
  }
}
