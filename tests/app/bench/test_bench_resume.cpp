// kvdesk-bench resume on stories260K with tiny histories: the report has a row per history with
// the cold, parked, database (at send and opened ahead) and host-tier arms, the parked, database
// and host-tier turns compute only the new turn's tokens, and every KV type asked for has its saved bytes.
#include <catch2/catch.hpp>

#include "tests/app/bench/bench_test_support.h"

namespace kvdesk::test {

TEST_CASE("bench resume reuses the history when parked or restored and measures saved bytes per KV type", "[bench][cli]") {
  TempDir dir;
  const CliRun run = run_bench({"resume", "-m", model_path("stories260K.gguf"), "--json", dir.file("out.json"), "--report",
                                dir.file("report.md"), "--histories", "24,48", "--turn-tokens", "6", "--repeat", "2",
                                "--kv-types", "f16,int8", "-t", "1"});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = read_json(dir.file("out.json"));
  CHECK(j["mode"] == "resume");
  CHECK(run.out.find("host tier") != std::string::npos);
  const nlohmann::json& histories = j["results"]["histories"];
  REQUIRE(histories.size() == 2);
  for (size_t i = 0; i < histories.size(); ++i) {
    const nlohmann::json& h = histories[i];
    const int history = i == 0 ? 24 : 48;
    INFO("history " << history);
    CHECK(h["history_tokens"] == history);
    CHECK(h["host_tier"]["computed_tokens"] == 6);
    for (const char* arm : {"cold", "parked", "database", "database_opened", "host_tier"}) {
      INFO(arm);
      CHECK(h[arm]["prompt_tokens"] == history + 6);
      CHECK(h[arm]["runs"].size() == 2);
      CHECK(h[arm].contains("median"));
    }
    CHECK(h["cold"]["computed_tokens"] == history + 6);
    CHECK(h["parked"]["computed_tokens"] == 6);
    CHECK(h["database"]["computed_tokens"] == 6);
    CHECK(h["database_opened"]["computed_tokens"] == 6);
    CHECK(h["database"]["load_ms"].contains("median"));
    CHECK(h["database"]["import_ms"].contains("median"));
    CHECK(h["database_opened"]["median"].get<double>() < h["database"]["median"].get<double>());
  }
  const nlohmann::json& bytes = j["results"]["bytes"];
  REQUIRE(bytes.size() == 4);
  CHECK(bytes[0]["kv_type"] == "f16");
  CHECK(bytes[2]["kv_type"] == "int8");
  for (const nlohmann::json& b : bytes) {
    CHECK(b["encoded_bytes"].get<int64_t>() > b["history_tokens"].get<int64_t>() * 4);   // ids and blocks
    CHECK(b["stored_bytes"].get<int64_t>() > 0);
  }
  CHECK(bytes[2]["encoded_bytes"].get<int64_t>() < bytes[0]["encoded_bytes"].get<int64_t>());
}

TEST_CASE("bench resume refuses a history that does not fit the context", "[bench][cli]") {
  const CliRun run = run_bench({"resume", "-m", model_path("stories260K.gguf"), "--histories", "100000"});
  CHECK(run.exit_code != 0);
  CHECK(run.err.find("do not fit the model's context") != std::string::npos);
}

}  // namespace kvdesk::test
