// kvdesk-cli replay: a two-conversation trace plays through the engine; later turns reuse
// their history's KV; branch turns (regenerate, edit) fork the parked turn; a bad line is named.
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/test_support.h"

using kvdesk::test::model_path;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

TEST_CASE("replay plays every turn and later turns reuse their history", "[app][replay]") {
  TempDir dir;
  const std::string trace = dir.file("trace.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "system": "Lily had a red ball.", "user": "Once upon a time", "max_tokens": 24, "arrival_ms": 0}
{"conversation": "b", "system": "Lily had a red ball.", "user": "One day", "max_tokens": 16, "arrival_ms": 5}
{"conversation": "a", "user": "Then", "max_tokens": 12, "after_ms": 10}
)";
  const auto run = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace, "--kv-type", "f32", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto j = nlohmann::json::parse(run.out);
  REQUIRE(j["turns"].size() == 3);
  for (const char* key : {"wall_ms", "requests_per_s", "output_tok_s", "ttft_p50_ms", "ttft_p95_ms", "peak_kv_blocks",
                          "prefix_hit_rate", "preemptions", "swapped_bytes"}) {
    INFO(key);
    CHECK(j["summary"].contains(key));
  }
  const auto& second_turn = j["turns"][2];
  CHECK(second_turn["conversation"] == "a");
  CHECK(second_turn["turn"] == 1);
  // The whole first turn (prompt and answer) is reused; only the new user text is computed.
  CHECK(second_turn["cached_tokens"].get<int>() >= j["turns"][0]["prompt_tokens"].get<int>());
  CHECK(second_turn["tokens"].size() == 12);
}

TEST_CASE("generate reports the same per-request metrics as a replay turn", "[app][replay]") {
  TempDir dir;
  const std::string trace = dir.file("one.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "user": "Once upon a time", "max_tokens": 8, "arrival_ms": 0}
)";
  const auto replay = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace, "--json"});
  const auto generate = run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "-n", "8",
                                 "--temp", "0", "--json"});
  REQUIRE(replay.exit_code == 0);
  REQUIRE(generate.exit_code == 0);
  const auto turn = nlohmann::json::parse(replay.out)["turns"][0];
  const auto gen = nlohmann::json::parse(generate.out);
  for (const char* key : {"prompt_tokens", "cached_tokens", "generated_tokens", "preemptions", "peak_blocks", "queue_ms",
                          "ttft_ms", "prefill_tok_s", "decode_tok_s", "itl_p50_ms", "itl_p95_ms"}) {
    INFO(key);
    REQUIRE(turn.contains(key));
    REQUIRE(gen.contains(key));
    CHECK(turn[key].is_number() == gen[key].is_number());
  }
  CHECK(gen["generated_tokens"] == 8);
  CHECK(gen["prompt_tokens"] == gen["prompt_ids"].size());
}

TEST_CASE("replay names the line of a bad trace entry, or a folder given as the trace", "[app][replay]") {
  TempDir dir;
  const std::string trace = dir.file("bad.jsonl");
  std::ofstream(trace) << "{\"conversation\": \"a\", \"user\": \"hi\"}\n{\"conversation\": \"a\"}\n";
  const auto run = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace});
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("bad.jsonl:2") != std::string::npos);
  const auto folder = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", dir.path().string()});
  CHECK(folder.exit_code == 1);
  CHECK(folder.err.find(dir.path().string() + ": is a folder") != std::string::npos);
}

TEST_CASE("replay --chat-template renders with the chosen family, an unknown name is a usage error", "[app][replay]") {
  TempDir dir;
  const std::string trace = dir.file("trace.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "user": "Once upon a time", "max_tokens": 4, "arrival_ms": 0}
)";
  const auto prompt_tokens = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"replay", "-m", model_path("stories260K.gguf"), "--trace", trace, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto run = run_cli(args);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    return nlohmann::json::parse(run.out)["turns"][0]["prompt_tokens"].get<int>();
  };
  // stories260K has no template (Plain: BOS + the text); ChatML wraps it in turn markers,
  // which this vocabulary spells out as text.
  CHECK(prompt_tokens({"--chat-template", "chatml"}) > prompt_tokens({}) + 5);
  const auto bad = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace, "--chat-template", "vicuna"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("vicuna") != std::string::npos);
}

TEST_CASE("replay with h2o retention plays every turn and reports what it kept", "[app][replay][retention]") {
  TempDir dir;
  const std::string trace = dir.file("trace.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "system": "Lily had a red ball.", "user": "Once upon a time", "max_tokens": 40, "arrival_ms": 0}
{"conversation": "a", "user": "Then", "max_tokens": 12, "after_ms": 10}
)";
  const auto run = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace, "--kv-type", "f32",
                            "--retention", "h2o", "--kv-keep", "0.5", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto j = nlohmann::json::parse(run.out);
  REQUIRE(j["turns"].size() == 2);
  CHECK(j["turns"][1]["tokens"].size() == 12);
  const auto& s = j["summary"];
  CHECK(s["retention_tokens_seen"].get<int>() > 0);   // the parked conversation
  CHECK(s["retention_tokens_kept"].get<int>() <= (s["retention_tokens_seen"].get<int>() + 1) / 2);
  CHECK(s["retention_blocks_freed"].get<int>() > 0);
}

TEST_CASE("replay plays regenerate and edit turns as forks of the parked turn and counts CoW copies", "[app][replay]") {
  TempDir dir;
  const std::string trace = dir.file("branches.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "user": "Once upon a time", "max_tokens": 12, "arrival_ms": 0}
{"conversation": "a", "user": "Then", "max_tokens": 12, "after_ms": 0}
{"conversation": "a", "regenerate": true, "max_tokens": 12, "temperature": 1.5}
{"conversation": "a", "edit": 1, "user": "Lily ran to the park", "max_tokens": 12}
)";
  const auto run = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace, "--json", "-t", "2"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto j = nlohmann::json::parse(run.out);
  REQUIRE(j["turns"].size() == 4);
  const auto& first = j["turns"][0];
  const auto& second = j["turns"][1];
  const auto& regenerate = j["turns"][2];
  const auto& edit = j["turns"][3];
  CHECK(second["kind"] == "send");
  CHECK(regenerate["kind"] == "regenerate");
  CHECK(edit["kind"] == "edit");
  // Regenerate submits the second turn's prompt again and forks its parked turn, computing only
  // the last prompt token (whose logits it needs).
  CHECK(regenerate["prompt_tokens"] == second["prompt_tokens"]);
  CHECK(regenerate["cached_tokens"].get<int>() == regenerate["prompt_tokens"].get<int>() - 1);
  CHECK(regenerate["forks"].get<uint64_t>() >= 1);
  CHECK(regenerate.contains("cow_copies"));
  // The edit replaces the second user message: everything before it (the first turn's prompt
  // and answer) is shared.
  CHECK(edit["cached_tokens"].get<int>() >= first["prompt_tokens"].get<int>() + first["generated_tokens"].get<int>());
  CHECK(edit["cached_tokens"].get<int>() < edit["prompt_tokens"].get<int>());
  CHECK(edit["forks"].get<uint64_t>() >= 1);
  CHECK(j["summary"]["forks"].get<uint64_t>() >= 2);
  CHECK(j["summary"]["cow_copies"].get<uint64_t>() >=
        regenerate["cow_copies"].get<uint64_t>() + edit["cow_copies"].get<uint64_t>());
}

TEST_CASE("replay refuses branch turns that have nothing to branch from", "[app][replay]") {
  const std::string bad = GENERATE(std::string(R"({"conversation": "a", "regenerate": true})"),
                                   std::string("{\"conversation\": \"a\", \"user\": \"hi\"}\n"
                                               R"({"conversation": "a", "edit": 1, "user": "ho"})"));
  TempDir dir;
  const std::string trace = dir.file("bad.jsonl");
  std::ofstream(trace) << bad << "\n";
  const auto run = run_cli({"replay", "-m", model_path("stories260K.gguf"), "--trace", trace});
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.err, Catch::Contains("bad.jsonl:") &&
                          (Catch::Contains("first turn cannot regenerate") || Catch::Contains("names no user message")));
}
