// kvdesk-cli perplexity end to end on stories260K and the bundled quality text: the JSON shape,
// a comparison with the reference KV type, the text report, and one-line errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/test_support.h"

using kvdesk::test::model_path;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

namespace {

std::string sample_path() {
  const auto path = kvdesk::test::source_path("assets/quality/tinystories_sample.txt");
  REQUIRE(std::filesystem::exists(path));
  return path;
}

nlohmann::json run_json(const std::vector<std::string>& args) {
  const kvdesk::test::CliRun run = run_cli(args);
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

}  // namespace

TEST_CASE("perplexity --json scores the quality text and compares with f32", "[app][cli][perplexity]") {
  const auto j = run_json({"perplexity", "-m", model_path("stories260K.gguf"), "-f", sample_path(), "--kv-type", "int8",
                           "--compare", "f32", "-t", "2", "--json"});
  for (const char* key : {"ppl", "ppl_ref", "kl_mean", "kl_max", "top1_agree", "tokens"}) {
    INFO(key);
    REQUIRE(j.contains(key));
    CHECK(j[key].is_number());
  }
  CHECK(j["tokens"].get<int>() > 500);
  CHECK(j["ppl"].get<double>() > 1);
  CHECK(j["ppl"].get<double>() < 20);
  CHECK(j["ppl"].get<double>() == Approx(j["ppl_ref"].get<double>()).epsilon(0.01));
  CHECK(j["kl_mean"].get<double>() >= 0);
  CHECK(j["kl_mean"].get<double>() <= j["kl_max"].get<double>());
  CHECK(j["top1_agree"].get<double>() > 95);
}

TEST_CASE("perplexity without --compare leaves the comparison empty", "[app][cli][perplexity]") {
  const auto j = run_json({"perplexity", "-m", model_path("stories260K.gguf"), "-f", sample_path(), "--kv-type", "f32",
                           "--ctx", "64", "--json"});
  CHECK(j["ctx"] == 64);
  CHECK(j["ppl_ref"].is_null());
  CHECK(j["kl_mean"].is_null());
  CHECK(j["top1_agree"].is_null());
}

TEST_CASE("perplexity prints a readable report", "[app][cli][perplexity]") {
  const auto run = run_cli({"perplexity", "-m", model_path("stories260K.gguf"), "-f", sample_path(), "--kv-type", "int4",
                            "--compare", "f16"});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("perplexity") && Catch::Contains("int4"));
  CHECK_THAT(run.out, Catch::Contains("top-1 agreement"));
}

TEST_CASE("perplexity rejects unknown kv types and missing or empty texts", "[app][cli][perplexity]") {
  const std::string model = model_path("stories260K.gguf");
  CHECK(run_cli({"perplexity", "-m", model, "-f", sample_path(), "--kv-type", "q4_0"}).exit_code == 2);
  CHECK(run_cli({"perplexity", "-m", model, "-f", sample_path(), "--compare", "f64"}).exit_code == 2);
  CHECK(run_cli({"perplexity", "-m", model}).exit_code == 2);

  TempDir dir;
  const auto missing = run_cli({"perplexity", "-m", model, "-f", dir.file("missing.txt")});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains("missing.txt"));
  std::ofstream(dir.file("empty.txt")).flush();
  const auto empty = run_cli({"perplexity", "-m", model, "-f", dir.file("empty.txt")});
  CHECK(empty.exit_code == 1);
  CHECK_THAT(empty.err, Catch::Contains("no token to score"));
  const auto too_long = run_cli({"perplexity", "-m", model, "-f", sample_path(), "--ctx", "4096"});
  CHECK(too_long.exit_code == 1);
  CHECK_THAT(too_long.err, Catch::Contains("--ctx"));
}
