// kvdesk-bench as a user runs it: every mode on stories260K with small settings finishes in
// seconds and writes JSON with the documented keys plus a Markdown report with its SVGs; ab
// refuses to vary two knobs; Ctrl-C writes a partial report.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine/kv_snapshot.h"
#include "tests/app/bench/bench_test_support.h"

namespace kvdesk::test {
namespace {

// Runs one mode with --json and --report in a temp folder; returns the JSON.
nlohmann::json run_mode(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin() + 1, {"-m", model_path("stories260K.gguf"), "--json", dir.file("out.json"), "--report",
                                 dir.file("report.md")});
  const CliRun run = run_bench(args);
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = read_json(dir.file("out.json"));
  for (const char* key : {"tool", "mode", "partial", "command", "date", "machine", "model", "settings", "results"}) {
    INFO("key " << key);
    CHECK(j.contains(key));
  }
  CHECK(j["mode"] == args[0]);
  CHECK(j["partial"] == false);
  CHECK(j["machine"]["nproc"].get<int>() >= 1);
  CHECK(j["machine"]["busy_core"].is_null());
  CHECK(j["model"]["layers"].get<int>() > 0);
  CHECK(j["backend"]["name"] == "cpu");   // auto, and no CUDA device here
  CHECK(std::filesystem::exists(dir.file("report.md")));
  return j;
}

bool has_svg(const TempDir& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().extension() == ".svg") return true;
  }
  return false;
}

}  // namespace

TEST_CASE("bench speed reports prefill and decode medians per thread count", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"speed", "--prompt-lens", "32,64", "--depths", "0,64", "-t", "1,2",
                                          "--repeat", "2", "--decode-tokens", "4", "--bandwidth-mib", "16"});
  REQUIRE(j["results"]["prefill"].size() == 4);
  REQUIRE(j["results"]["decode"].size() == 4);
  for (const auto& row : j["results"]["prefill"]) {
    CHECK(row.contains("threads"));
    CHECK(row.contains("prompt_tokens"));
    CHECK(row["tok_s"]["median"].get<double>() > 0);
    CHECK(row["tok_s"]["runs"].size() == 2);
    CHECK(row["tok_s"]["min"].get<double>() <= row["tok_s"]["max"].get<double>());
  }
  CHECK(j["results"]["decode"][0].contains("depth"));
  CHECK(has_svg(dir));
  // Decode's bytes/s against the machine's bandwidth: deeper contexts read more KV per token.
  const nlohmann::json& traffic = j["results"]["decode_traffic"];
  REQUIRE(traffic.size() == 4);
  for (const auto& row : traffic) {
    CHECK(row["triad_gb_s"]["runs"].size() == 2);
    CHECK(row["fraction_of_triad"].get<double>() > 0);
    CHECK(row["decode_gb_s"].get<double>() ==
          Approx(row["fraction_of_read"].get<double>() * row["read_gb_s"]["median"].get<double>()));
  }
  CHECK(traffic[2]["bytes_per_token"].get<double>() > traffic[0]["bytes_per_token"].get<double>());
}

TEST_CASE("bench kv measures bytes per token against the formula and times attention", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"kv", "--depths", "16,64", "--repeat", "1"});
  const nlohmann::json& sizes = j["results"]["sizes"];
  REQUIRE(sizes.size() == 7);
  for (const auto& row : sizes) {
    const double formula = row["bytes_per_token_formula"];
    const double measured = row["bytes_per_token"];
    if (row["kv_type"] == "f32" || row["kv_type"] == "f16") CHECK(measured == formula);
    if (row["kv_type"] == "int8") CHECK(measured > formula);  // one f32 scale per row
    CHECK(row["bytes_per_block"].get<double>() == measured * row["block_size"].get<double>());
  }
  REQUIRE(j["results"]["attention"].size() == 14);
  CHECK(j["results"]["attention"][0]["us_per_token"]["median"].get<double>() > 0);
}

TEST_CASE("bench grammar times decode free, held on a kept engine and held on a fresh one", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"grammar", "--json-schema", source_path("assets/bench/person.schema.json"),
                                          "--decode-tokens", "8", "--repeat", "3", "-t", "1"});
  const nlohmann::json& r = j["results"];
  CHECK(r["free_tok_s"]["runs"].size() == 3);
  CHECK(r["constrained_tok_s"]["runs"].size() == 2);   // the first held request found no tables kept
  CHECK(r["fresh_engine_tok_s"]["runs"].size() == 3);
  for (const char* key : {"free_tok_s", "constrained_tok_s", "fresh_engine_tok_s"}) CHECK(r[key]["median"].get<double>() > 0);
  for (const char* key : {"mask_cost_pct", "fresh_engine_mask_cost_pct", "mask_us_per_token", "fresh_engine_mask_us_per_token"}) CHECK(r.contains(key));
  CHECK(j["settings"]["vocab"] == 512);
}

TEST_CASE("bench capacity compares paged block sizes with contiguous preallocation", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"capacity", "--kv-budget-mib", "1", "--kv-types", "f16,int8"});
  REQUIRE(j["results"]["types"].size() == 2);
  for (const auto& t : j["results"]["types"]) {
    REQUIRE(t["paged"].size() == kvdesk::kKvBlockSizes.size());
    const int contiguous = t["contiguous"]["sequences"];
    for (const auto& p : t["paged"]) {
      CHECK(p["sequences"].get<int>() >= contiguous);
      CHECK(p["waste_pct"].get<double>() < t["contiguous"]["waste_pct"].get<double>());
      for (const char* key :
           {"block_size", "used_tokens", "reserved_tokens", "waste_tokens", "used_pct", "pool_used_pct"}) {
        CHECK(p.contains(key));
      }
    }
  }
  CHECK(j["results"]["paper"].contains("ours_paged_waste_pct"));
  CHECK(j["results"]["lengths"].contains("p95"));
}

TEST_CASE("bench prefix shows cached tokens only with the prefix cache on", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"prefix", "--conversations", "2", "--turns", "2", "--system-tokens", "64",
                                          "--user-tokens", "8", "--answer-tokens", "4", "--repeat", "1", "-t", "1"});
  const nlohmann::json& arms = j["results"]["arms"];
  REQUIRE(arms.size() == 2);
  CHECK(arms[0]["prefix_cache"] == true);
  CHECK(arms[0]["cached_tokens"].get<int>() > 0);
  CHECK(arms[1]["cached_tokens"].get<int>() == 0);
  CHECK(arms[0]["prompt_tokens"] == arms[1]["prompt_tokens"]);
  for (const char* key : {"ttft_cold_ms", "ttft_first_turn_ms", "ttft_later_turn_ms"})
    CHECK(arms[0][key].contains("median"));
  CHECK(j["results"]["tokens_saved"] == arms[0]["cached_tokens"]);
}

TEST_CASE("bench quality compares KV types with f32", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"quality", "--kv-types", "f16,int4", "--max-tokens", "200", "-t", "1"});
  const nlohmann::json& types = j["results"]["types"];
  REQUIRE(types.size() == 2);
  for (const auto& t : types) {
    CHECK(t["ppl"].get<double>() > 1);
    CHECK(t["kl_mean"].get<double>() >= 0);
    CHECK(t["kl_max"].get<double>() >= t["kl_mean"].get<double>());
    CHECK(t["top1_agree"].get<double>() <= 100);
  }
  CHECK(types[0]["kl_mean"].get<double>() < types[1]["kl_mean"].get<double>());  // f16 is closer to f32 than int4
}

TEST_CASE("bench quality --retention scores each policy and budget against the full cache", "[bench][cli][retention]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"quality", "--retention", "sinks,snapkv", "--kv-keep", "1.0,0.25", "-t", "1"});
  const nlohmann::json& rows = j["results"]["retention"];
  REQUIRE(rows.size() == 4);
  for (const auto& r : rows) {
    INFO(r.dump());
    CHECK(r["ppl"].get<double>() > 1);
    CHECK(r["kl_max"].get<double>() >= r["kl_mean"].get<double>());
    CHECK(r["reuse_a"]["tokens"].get<int>() > 0);
    CHECK(r["reuse_b"]["tokens"].get<int>() > 0);
  }
  for (size_t i : {size_t(0), size_t(2)}) {   // a 100% budget is the full cache
    CHECK(rows[i]["kl_mean"].get<double>() == 0.0);
    CHECK(rows[i]["top1_agree"].get<double>() == 100.0);
    CHECK(rows[i]["kept_pct"].get<double>() == 100.0);
  }
  CHECK(rows[1]["kl_mean"].get<double>() > 0);
  CHECK(rows[1]["peak_blocks"].get<int>() < rows[1]["peak_blocks_full"].get<int>());
}

TEST_CASE("bench trace replays a synthetic trace and prices it", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j =
      run_mode(dir, {"trace", "--conversations", "2", "--turns", "2", "--answer-median", "4", "--arrival-rate", "50",
                     "--think-ms", "5", "--cost-per-hour", "1.5", "-t", "1", "--save-trace", dir.file("trace.jsonl")});
  const nlohmann::json& m = j["results"]["metrics"];
  for (const char* key :
       {"requests_per_s", "output_tok_s", "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "peak_kv_mib",
        "prefix_hit_rate", "preemptions", "cost_per_request", "cost_per_1k_output_tokens"}) {
    INFO("metric " << key);
    REQUIRE(m.contains(key));
  }
  CHECK(m["requests"]["median"].get<double>() == 4);
  CHECK(m["cost_per_request"]["median"].get<double>() > 0);
  CHECK(std::filesystem::exists(dir.file("trace.jsonl")));
}

TEST_CASE("bench ab alternates two values of one knob and reports B over A", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(
      dir, {"ab", "--knob", "kv-type", "--a", "f16", "--b", "int8", "--mode", "kv", "--depths", "64", "--repeat", "2"});
  CHECK(j["settings"]["knob"] == "kv-type");
  CHECK_FALSE(j["settings"]["fixed"].contains("kv-type"));
  const nlohmann::json& metrics = j["results"]["metrics"];
  REQUIRE(metrics.size() == 1);
  CHECK(metrics[0]["name"] == "attention_us@64");
  CHECK(metrics[0]["pair_ratios"].size() == 2);
  CHECK(metrics[0]["ratio"].get<double>() > 0);
  CHECK(metrics[0]["ratio_min"].get<double>() <= metrics[0]["ratio_max"].get<double>());
}

TEST_CASE("bench ab over speed varies threads", "[bench][cli]") {
  TempDir dir;
  const nlohmann::json j = run_mode(dir, {"ab", "--knob", "threads", "--a", "1", "--b", "2", "--prompt-lens", "32",
                                          "--depths", "16", "--decode-tokens", "4", "--repeat", "1"});
  REQUIRE(j["results"]["metrics"].size() == 2);
  CHECK(j["results"]["metrics"][0]["name"] == "prefill_tok_s@32");
}

TEST_CASE("bench ab refuses to vary two knobs at once", "[bench][cli]") {
  const std::string model = model_path("stories260K.gguf");
  const std::vector<std::vector<std::string>> cases = {
      {"ab", "-m", model, "--knob", "kv-type", "--knob", "threads", "--a", "f16", "--b", "int8"},
      {"ab", "-m", model, "--knob", "kv-type,threads", "--a", "f16", "--b", "int8"},
      {"ab", "-m", model, "--knob", "kv-type", "-t", "1,2", "--a", "f16", "--b", "int8"},
  };
  for (const auto& args : cases) {
    const CliRun run = run_bench(args);
    INFO("stderr: " << run.err);
    CHECK(run.exit_code == 2);
    CHECK((run.err.find("exactly one knob") != std::string::npos));
  }
}

TEST_CASE("bench ab rejects a knob set twice or one the mode does not use", "[bench][cli]") {
  const std::string model = model_path("stories260K.gguf");
  const CliRun twice = run_bench({"ab", "-m", model, "--knob", "threads", "-t", "2", "--a", "1", "--b", "2"});
  CHECK(twice.exit_code == 2);
  CHECK(twice.err.find("knob under test") != std::string::npos);
  const CliRun unused =
      run_bench({"ab", "-m", model, "--knob", "prefix-cache", "--a", "on", "--b", "off", "--mode", "speed"});
  CHECK(unused.exit_code == 2);
  CHECK(unused.err.find("does not depend on prefix-cache") != std::string::npos);
  const CliRun bad = run_bench({"ab", "-m", model, "--knob", "kv-type", "--a", "f16", "--b", "fp4"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("unknown KV type") != std::string::npos);
}

TEST_CASE("every mode with missing or invalid arguments exits 2 with its usage line", "[bench][cli]") {
  const std::string m = model_path("stories260K.gguf");
  struct Row {
    std::vector<std::string> args;
    std::string usage;   // the start of the usage line
  };
  const std::vector<Row> rows = {
      {{}, "Usage: kvdesk-bench SUBCOMMAND"},
      {{"warp"}, "Usage: kvdesk-bench"},
      {{"speed"}, "Usage: kvdesk-bench speed -m,--model"},
      {{"speed", "-m", m, "--decode-tokens", "0"}, "Usage: kvdesk-bench speed"},
      {{"speed", "-m", m, "--prompt-lens", "many"}, "Usage: kvdesk-bench speed"},
      {{"kv"}, "Usage: kvdesk-bench kv"},
      {{"kv", "-m", m, "--kv-types", "fp4"}, "Usage: kvdesk-bench kv"},
      {{"kv", "-m", m, "--backend", "gpu"}, "Usage: kvdesk-bench kv"},
      {{"capacity"}, "Usage: kvdesk-bench capacity"},
      {{"capacity", "-m", m, "--kv-budget-mib", "-1"}, "Usage: kvdesk-bench capacity"},
      {{"prefix"}, "Usage: kvdesk-bench prefix"},
      {{"prefix", "-m", m, "--block-size", "7"}, "Usage: kvdesk-bench prefix"},
      {{"quality"}, "Usage: kvdesk-bench quality"},
      {{"quality", "-m", m, "--kv-types", "f32,nope"}, "Usage: kvdesk-bench quality"},
      {{"trace"}, "Usage: kvdesk-bench trace"},
      {{"trace", "-m", m, "--no-such-flag"}, "Usage: kvdesk-bench trace"},
      {{"ab"}, "Usage: kvdesk-bench ab"},
      {{"ab", "-m", m, "--knob", "kv-type"}, "Usage: kvdesk-bench ab"},
      {{"ab", "-m", m, "--knob", "kv-type", "--a", "f16", "--b", "fp4"}, "Usage: kvdesk-bench ab"},
  };
  for (const Row& row : rows) {
    const CliRun run = run_bench(row.args);
    INFO("args: " << nlohmann::json(row.args).dump() << " stderr: " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("\n" + row.usage) != std::string::npos);
  }
}

TEST_CASE("bench reports a missing model as a runtime error", "[bench][cli]") {
  const CliRun run = run_bench({"kv", "-m", "/nonexistent/model.gguf"});
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("/nonexistent/model.gguf") != std::string::npos);
}

TEST_CASE("bench modes that time the CPU kernels refuse backend cuda instead of mislabelling", "[bench][cli][backend]") {
  const CliRun run = run_bench({"kv", "-m", model_path("stories260K.gguf"), "--backend", "cuda"});
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("kv times the CPU kernels") != std::string::npos);
}

TEST_CASE("bench prefix with backend cuda and no CUDA device is a runtime error", "[bench][cli][backend]") {
  const CliRun run = run_bench({"prefix", "-m", model_path("stories260K.gguf"), "--backend", "cuda"});
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("the CUDA backend was asked for") != std::string::npos);
}

TEST_CASE("Ctrl-C writes what was measured so far as a partial report", "[bench][cli]") {
  TempDir dir;
  const CliRun run =
      run_bench_interrupted({"speed", "-m", model_path("stories260K.gguf"), "--prompt-lens", "16", "--depths", "0",
                             "-t", "1", "--decode-tokens", "2", "--repeat", "100000", "--json", dir.file("out.json")},
                            "speed run 3/");
  INFO("stderr tail: " << run.err.substr(run.err.size() > 400 ? run.err.size() - 400 : 0));
  CHECK(run.exit_code == 130);
  const nlohmann::json j = read_json(dir.file("out.json"));
  CHECK(j["partial"] == true);
  REQUIRE(j["results"]["prefill"].size() == 1);
  CHECK(j["results"]["prefill"][0]["tok_s"]["runs"].size() >= 2);
}

}  // namespace kvdesk::test
