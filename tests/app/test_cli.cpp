// kvdesk-cli end to end: JSON shapes of every subcommand, exit codes and one-line errors.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "engine/kv_snapshot.h"
#include "tests/test_support.h"

using kvdesk::test::model_path;
using kvdesk::test::reference;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

namespace {

nlohmann::json parse_json(const kvdesk::test::CliRun& run) {
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("generate --json prints the reference continuation with timings", "[app][cli]") {
  const std::string threads = GENERATE(std::string("1"), std::string("2"));
  const auto j = parse_json(run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time",
                                     "-n", "64", "--temp", "0", "-t", threads, "--json"}));
  CHECK(j["prompt_ids"] == reference()["prompt_ids"]);
  CHECK(j["tokens"] == reference()["generated_ids"]);
  CHECK(j["text"] == reference()["text"]);
  for (const char* key : {"ttft_ms", "prefill_tok_s", "decode_tok_s"}) {
    INFO(key);
    CHECK(j[key].get<double>() > 0);
  }
}

TEST_CASE("generate --json reports the KV cache as the run ended", "[app][cli][kv]") {
  const auto j = parse_json(run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time",
                                     "-n", "64", "--temp", "0", "--json"}));
  CHECK(j["cached_tokens"] == 0);
  const auto& kv = j["kv"];
  // 5 prompt + 63 appended tokens (the last one is sampled, never computed) in blocks of 16;
  // the default pool holds the run's 69 tokens.
  CHECK(kv["blocks_total"] == 5);
  CHECK(kv["blocks_used"] == 5);
  CHECK(kv["peak_blocks"] == 5);
  CHECK(kv["blocks_cached"] == 0);
  CHECK(kv["blocks_free"] == 0);
  CHECK(kv["blocks_shared"] == 0);
  CHECK(kv["bytes_per_token"] == 5 * 2 * 4 * 8 * 2);
  CHECK(kv["bytes_per_block"] == 16 * 5 * 2 * 4 * 8 * 2);
  CHECK(kv["internal_waste_tokens"] == 80 - 68);
  CHECK(kv["contiguous_waste_tokens"] == 512 - 68);
  CHECK(kv["prefix_misses"] == 0);
  CHECK(kv["prefix_hit_rate"] == 0.0);
  CHECK(kv["evictions"] == 0);
  CHECK(kv["cow_copies"] == 0);
  CHECK(kv["what_if"].size() == kvdesk::kKvBlockSizes.size());
  CHECK(j["tokens"] == reference()["generated_ids"]);
}

TEST_CASE("a KV budget in MiB sizes the pool in whole blocks", "[app][cli][kv]") {
  const auto j = parse_json(run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time",
                                     "-n", "8", "--temp", "0", "--kv-budget-mib", "1", "--json"}));
  CHECK(j["kv"]["blocks_total"] == 1048576 / (16 * 640));   // f16: 640 bytes per token
  CHECK(j["kv"]["blocks_used"] == 1);
  const auto tiny = run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "hi", "--kv-budget-mib", "0.001"});
  CHECK(tiny.exit_code == 1);
  CHECK(tiny.err.find("--kv-budget-mib") != std::string::npos);
}

TEST_CASE("info shows what fits in a KV budget for each KV type beside an MHA model", "[app][cli][kv]") {
  const auto j = parse_json(run_cli({"info", "-m", model_path("stories260K.gguf"), "--ctx", "256",
                                     "--kv-budget-mib", "1", "--json"}));
  const auto& cap = j["kv_capacity"];
  CHECK(cap["context"] == 256);
  CHECK(cap["block_size"] == 16);
  const auto& gqa = cap["types"]["f16"]["gqa"];
  const auto& mha = cap["types"]["f16"]["mha"];
  CHECK(gqa["head_count_kv"] == 4);
  CHECK(gqa["bytes_per_token"] == 640);
  CHECK(gqa["bytes_per_block"] == 10240);
  CHECK(gqa["blocks"] == 102);
  CHECK(gqa["sequences"] == 6);   // 256 tokens = 16 blocks
  CHECK(mha["head_count_kv"] == 8);
  CHECK(mha["bytes_per_token"] == 1280);
  CHECK(mha["blocks"] == 51);
  CHECK(mha["sequences"] == 3);
  CHECK(cap["types"].contains("f32"));
  CHECK(cap["types"].contains("bf16"));
  const auto text = run_cli({"info", "-m", model_path("stories260K.gguf")});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("KV capacity") != std::string::npos);
}

TEST_CASE("generate streams the text without --json", "[app][cli]") {
  const auto run = run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "-n", "64", "--temp", "0"});
  REQUIRE(run.exit_code == 0);
  CHECK(run.out == reference()["text"].get<std::string>() + "\n");
}

TEST_CASE("the same seed samples the same text", "[app][cli]") {
  const std::vector<std::string> args = {"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time",
                                         "-n", "32", "--temp", "1.0", "--seed", "7", "--json"};
  CHECK(parse_json(run_cli(args))["tokens"] == parse_json(run_cli(args))["tokens"]);
}

TEST_CASE("tokenize --json gives ids and pieces, and typed <s> stays text", "[app][cli]") {
  const auto j = parse_json(run_cli({"tokenize", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "--json"}));
  CHECK(j["ids"] == reference()["prompt_ids"]);
  CHECK(j["pieces"].size() == j["ids"].size());
  const auto s = parse_json(run_cli({"tokenize", "-m", model_path("stories260K.gguf"), "-p", "<s>", "--no-bos", "--json"}));
  for (const auto& id : s["ids"]) CHECK(id.get<int>() != 1);
}

TEST_CASE("info --json describes the model and its KV cost per token", "[app][cli]") {
  const auto j = parse_json(run_cli({"info", "-m", model_path("stories260K.gguf"), "--json"}));
  CHECK(j["architecture"] == "llama");
  CHECK(j["block_count"] == 5);
  CHECK(j["head_count"] == 8);
  CHECK(j["head_count_kv"] == 4);
  CHECK(j["vocab_size"] == 512);
  // 5 layers x 2 x 4 kv heads x 8 head_dim x 2 bytes
  CHECK(j["kv_per_token"]["f16"]["bytes_per_token"] == 5 * 2 * 4 * 8 * 2);
  CHECK(j["kv_per_token"]["f32"]["bytes_per_token"] == 5 * 2 * 4 * 8 * 4);
  CHECK(j["tensor_types"]["f32"].get<int>() > 0);
  CHECK(j["chat_template"] == "plain");   // stories260K has no tokenizer.chat_template
  CHECK(j["chat_template_warning"] == "");
}

TEST_CASE("info measures what each kv type costs a small model and says how to get it otherwise", "[app][cli][kv_quality]") {
  const auto j = parse_json(run_cli({"info", "-m", model_path("stories260K.gguf"), "--json"}));
  REQUIRE(j["kv_quality"]["measured"] == true);
  CHECK(j["kv_quality"]["reference"] == "f32");
  CHECK(j["kv_quality"]["tokens"] == 127);
  CHECK(j["kv_per_token"]["f32"]["kl"] == 0.0);
  CHECK(j["kv_per_token"]["f32"]["top1"] == 100.0);
  CHECK(j["kv_per_token"]["f16"]["kl"].get<double>() < 1e-5);
  CHECK(j["kv_per_token"]["int4"]["kl"].get<double>() > j["kv_per_token"]["int8"]["kl"].get<double>());
  const auto off = parse_json(run_cli({"info", "-m", model_path("stories260K.gguf"), "--kv-quality", "off", "--json"}));
  CHECK(off["kv_quality"]["measured"] == false);
  CHECK_FALSE(off["kv_per_token"]["int8"].contains("kl"));
  const auto text = run_cli({"info", "-m", model_path("stories260K.gguf")});
  CHECK(text.out.find("vs f32 KV over 127 tokens") != std::string::npos);
  CHECK(text.out.find("KL (nats)") != std::string::npos);
}

TEST_CASE("logits --json gives the top-K at every prompt position", "[app][cli]") {
  const auto j = parse_json(run_cli({"logits", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "--top", "10",
                                     "--kv-type", "f16", "--attn-numerics", "llamacpp", "--json"}));
  const auto& positions = j["positions"];
  REQUIRE(positions.size() == 5);
  for (size_t p = 0; p < positions.size(); ++p) {
    const auto& expected = reference()["per_position_top10"][p]["top10"];
    REQUIRE(positions[p]["top"].size() == 10);
    CHECK(positions[p]["top"][0][0] == expected[0][0]);
    CHECK(std::abs(positions[p]["top"][0][1].get<double>() - expected[0][1].get<double>()) < 1e-3);
  }
}

TEST_CASE("make-model writes a GGUF that info and generate open", "[app][cli]") {
  TempDir dir;
  const std::string out = dir.file("tiny.gguf");
  const std::string type = GENERATE(std::string("f16"), std::string("q8_0"), std::string("q4_0"));
  const auto made = run_cli({"make-model", "--layers", "2", "--embd", "128", "--heads", "4", "--kv-heads", "2",
                             "--ff", "352", "--vocab-from", model_path("tokenizer.model"), "--type", type,
                             "--seed", "3", "-o", out});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto info = parse_json(run_cli({"info", "-m", out, "--json"}));
  CHECK(info["block_count"] == 2);
  CHECK(info["head_count_kv"] == 2);
  CHECK(info["vocab_size"] == 32000);
  CHECK(info["tensor_types"][type].get<int>() > 0);
  const auto gen = parse_json(run_cli({"generate", "-m", out, "-p", "Hello", "-n", "8", "--temp", "0", "--json"}));
  CHECK(gen["tokens"].size() == 8);
}

TEST_CASE("make-model writes qwen2 and Llama 3 models that info describes and generate runs", "[app][cli]") {
  TempDir dir;
  const std::string out = dir.file("arch.gguf");
  const std::string arch = GENERATE(std::string("qwen2"), std::string("llama"));
  const auto made = run_cli({"make-model", "--layers", "1", "--embd", "128", "--heads", "2", "--kv-heads", "1",
                             "--ff", "96", "--vocab-from", model_path("tokenizer.model"), "--arch", arch,
                             "--rope-scaling", "llama3", "--tied-embeddings", "-o", out});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto info = parse_json(run_cli({"info", "-m", out, "--json"}));
  CHECK(info["architecture"] == arch);
  CHECK(info["rope_mode"] == (arch == "qwen2" ? "neox" : "normal"));
  CHECK(info["qkv_bias"] == (arch == "qwen2"));
  CHECK(info["rope_freqs"] == true);
  CHECK(info["tied_output"] == true);
  const auto gen = parse_json(run_cli({"generate", "-m", out, "-p", "Hello", "-n", "4", "--temp", "0", "--json"}));
  CHECK(gen["tokens"].size() == 4);
  const auto bad = run_cli({"make-model", "--vocab-from", model_path("tokenizer.model"), "--arch", "falcon", "-o", out});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("falcon") != std::string::npos);
}

TEST_CASE("info --json gives a mixture's experts, a Qwen2 MoE's shared expert too", "[app][cli]") {
  TempDir dir;
  const std::string out = dir.file("moe.gguf");
  const auto made = run_cli({"make-model", "--layers", "1", "--embd", "64", "--heads", "2", "--kv-heads", "1",
                             "--ff", "96", "--vocab-from", model_path("tokenizer.model"), "--arch", "qwen2moe",
                             "--experts", "6", "--experts-used", "2", "--expert-ff", "32", "-o", out});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto info = parse_json(run_cli({"info", "-m", out, "--json"}));
  CHECK(info["architecture"] == "qwen2moe");
  CHECK(info["experts"] == nlohmann::json{{"count", 6}, {"used", 2}, {"feed_forward_length", 32},
                                          {"shared_feed_forward_length", 96}});
  const auto gen = parse_json(run_cli({"generate", "-m", out, "-p", "Hello", "-n", "4", "--temp", "0", "--json"}));
  CHECK(gen["tokens"].size() == 4);
}

TEST_CASE("make-model writes llama.cpp's Q4_K_M mix that generate runs", "[app][cli]") {
  // 256-wide rows fill K-quant super-blocks. Of 2 layers only layer 1 is a use_more_bits layer
  // (layer >= 7 * 2 / 8), so its attn_v and ffn_down are Q6_K, as is output; the rest Q4_K.
  TempDir dir;
  const std::string out = dir.file("tiny-q4km.gguf");
  const auto made = run_cli({"make-model", "--layers", "2", "--embd", "256", "--heads", "4", "--kv-heads", "2",
                             "--ff", "512", "--vocab-from", model_path("tokenizer.model"), "--type", "q4_k_m",
                             "--seed", "3", "-o", out});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto info = parse_json(run_cli({"info", "-m", out, "--json"}));
  CHECK(info["tensor_types"]["q4_K"].get<int>() == 1 + 2 * 5 + 2);  // token_embd; q, k, o, gate, up; layer 0 v, down
  CHECK(info["tensor_types"]["q6_K"].get<int>() == 1 + 2);          // output; layer 1 v, down
  const auto gen = parse_json(run_cli({"generate", "-m", out, "-p", "Hello", "-n", "8", "--temp", "0", "--json"}));
  CHECK(gen["tokens"].size() == 8);
}

TEST_CASE("make-model names the weight types it knows when given another", "[app][cli]") {
  TempDir dir;
  const auto made = run_cli({"make-model", "--vocab-from", model_path("tokenizer.model"), "--type", "iq2_xs", "-o",
                             dir.file("x.gguf")});
  CHECK(made.exit_code != 0);
  CHECK(made.err.find("q4_k_m") != std::string::npos);
}

// One row per way a command line can be wrong, for every subcommand: the usage line names the
// subcommand the user meant (or the program, when there is none).
TEST_CASE("every subcommand with missing or invalid arguments exits 2 with its usage line", "[app][cli]") {
  const std::string m = model_path("stories260K.gguf");
  const std::string vocab = model_path("tokenizer.model");
  struct Row {
    std::vector<std::string> args;
    std::string usage;   // the start of the usage line
  };
  const std::vector<Row> rows = {
      {{}, "Usage: kvdesk-cli SUBCOMMAND"},
      {{"frobnicate"}, "Usage: kvdesk-cli"},
      {{"--bogus"}, "Usage: kvdesk-cli"},
      {{"generate"}, "Usage: kvdesk-cli generate -m,--model"},
      {{"generate", "-m"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "-n", "zero"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--block-size", "7"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--top-p", "0"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--temp", "-1"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--kv-type", "fp4"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--no-such-flag"}, "Usage: kvdesk-cli generate"},
      {{"tokenize", "-p", "hi"}, "Usage: kvdesk-cli tokenize"},
      {{"tokenize", "-m", m}, "Usage: kvdesk-cli tokenize"},
      {{"info"}, "Usage: kvdesk-cli info -m,--model"},
      {{"info", "-m", m, "--kv-budget-mib", "lots"}, "Usage: kvdesk-cli info"},
      {{"generate", "-m", m, "-p", "hi", "--kv-budget-mib", "nan"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--kv-budget-mib", "0"}, "Usage: kvdesk-cli generate"},
      {{"generate", "-m", m, "-p", "hi", "--host-tier-mib", "inf"}, "Usage: kvdesk-cli generate"},
      {{"info", "-m", m, "--block-size", "0"}, "Usage: kvdesk-cli info"},
      {{"logits", "-m", m}, "Usage: kvdesk-cli logits"},
      {{"logits", "-m", m, "-p", "hi", "--top", "0"}, "Usage: kvdesk-cli logits"},
      {{"make-model", "-o", "x.gguf"}, "Usage: kvdesk-cli make-model"},
      {{"make-model", "--vocab-from", vocab}, "Usage: kvdesk-cli make-model"},
      {{"make-model", "--vocab-from", vocab, "-o", "x.gguf", "--ctx", "8"}, "Usage: kvdesk-cli make-model"},
      {{"make-model", "--vocab-from", vocab, "-o", "x.gguf", "--type", "iq2_xs"}, "Usage: kvdesk-cli make-model"},
      {{"replay", "-m", m}, "Usage: kvdesk-cli replay"},
      {{"replay", "-m", m, "--trace", "t.jsonl", "--max-running", "0"}, "Usage: kvdesk-cli replay"},
      {{"conversations", "--format", "json"}, "Usage: kvdesk-cli conversations"},
      {{"conversations", "--export", "1", "--format", "pdf"}, "Usage: kvdesk-cli conversations"},
      {{"conversations", "--export", "one"}, "Usage: kvdesk-cli conversations"},
      {{"perplexity", "-m", m}, "Usage: kvdesk-cli perplexity"},
      {{"perplexity", "-m", m, "-f", "t.txt", "--kv-type", "q4_0"}, "Usage: kvdesk-cli perplexity"},
  };
  for (const Row& row : rows) {
    const auto run = run_cli(row.args);
    INFO("args: " << nlohmann::json(row.args).dump() << " stderr: " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("\n" + row.usage) != std::string::npos);
  }
}

TEST_CASE("a missing or non-GGUF model file exits 1 with one clear line", "[app][cli]") {
  TempDir dir;
  const std::string not_gguf = dir.file("notes.gguf");
  std::ofstream(not_gguf) << "this is not a model\n";
  for (const std::string& path : {dir.file("missing.gguf"), not_gguf}) {
    const auto run = run_cli({"generate", "-m", path, "-p", "hi"});
    INFO(run.err);
    CHECK(run.exit_code == 1);
    CHECK(count_lines(run.err) == 1);
    CHECK(run.err.find(path) != std::string::npos);
  }
}

TEST_CASE("a numeric option out of range says so in one short line", "[app][cli]") {
  const std::string m = model_path("stories260K.gguf");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0", "--kv-budget-mib: 0 is not above 0"}, {"-5", "--kv-budget-mib: -5 is not above 0"},
      {"nan", "--kv-budget-mib: 'nan' is not a number"}};
  for (const auto& [value, message] : cases) {
    const auto run = run_cli({"generate", "-m", m, "-p", "hi", "--kv-budget-mib", value});
    INFO(run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.err.rfind("kvdesk-cli: " + message + "\n", 0) == 0);
  }
}

TEST_CASE("invalid sampling values are refused as usage errors", "[app][cli]") {
  const auto run = run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "hi", "--top-p", "0"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("top-p") != std::string::npos);
}

TEST_CASE("keys and values can use different KV types", "[app][cli]") {
  const auto j = parse_json(run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "-n", "64",
                                     "--temp", "0", "--kv-type-k", "f32", "--kv-type-v", "int8", "--json"}));
  // int8 values keep the reference continuation (see the KV quality tests).
  CHECK(j["tokens"] == reference()["generated_ids"]);
  // 5 layers x 4 kv heads x (8 x 4 bytes of f32 keys + (4 + 8) bytes of int8 values)
  CHECK(j["kv"]["bytes_per_token"] == 5 * 4 * (8 * 4 + 4 + 8));
}

TEST_CASE("generate with KV retention holds fewer blocks and reports tokens kept vs seen", "[app][cli][retention]") {
  const auto full = parse_json(run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time",
                                        "-n", "120", "--temp", "0", "--json"}));
  const auto j = parse_json(run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time",
                                     "-n", "120", "--temp", "0", "--retention", "sinks", "--kv-keep", "32", "--json"}));
  CHECK(j["retention"] == "sinks");
  CHECK(full["kv"]["peak_blocks"] == 8);   // 124 tokens in blocks of 16
  CHECK(j["kv"]["peak_blocks"] == 3);      // 32 kept + the token being computed
  CHECK(j["kv"]["retention_tokens_seen"] == 124);
  CHECK(j["kv"]["retention_tokens_kept"] == 32);
  CHECK(j["kv"]["retention_blocks_freed"].get<int>() > 0);
  CHECK(j["tokens"].size() == 120);
  const auto bad = run_cli({"generate", "-m", model_path("stories260K.gguf"), "-p", "hi", "--retention", "h2o", "--kv-keep", "0"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--kv-keep") != std::string::npos);
}

TEST_CASE("the --isa flag and KVDESK_ISA pin the CPU kernels, and an unknown name is a usage error", "[app][cli]") {
  const std::string model = model_path("stories260K.gguf");
  CHECK(parse_json(run_cli({"info", "-m", model, "--isa", "ref", "--json"}))["cpu_isa"] == "scalar");
  CHECK(parse_json(run_cli({"info", "-m", model, "--json"}))["cpu_isa"] ==
        parse_json(run_cli({"info", "-m", model, "--json"}))["cpu_isa_detected"]);
  const auto unknown = run_cli({"info", "-m", model, "--isa", "sse9"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("--isa") != std::string::npos);

  ::setenv("KVDESK_ISA", "ref", 1);
  const auto from_env = parse_json(run_cli({"info", "-m", model, "--json"}));
  ::setenv("KVDESK_ISA", "sse9", 1);
  const auto bad_env = run_cli({"info", "-m", model});
  ::unsetenv("KVDESK_ISA");
  CHECK(from_env["cpu_isa"] == "scalar");
  CHECK(bad_env.exit_code == 2);
  CHECK(bad_env.err.find("KVDESK_ISA=sse9: unknown instruction set") != std::string::npos);
}
