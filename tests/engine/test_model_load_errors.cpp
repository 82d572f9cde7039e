// Model::load on hostile variants of stories260K.gguf that the GGUF reader accepts but a model
// cannot run: missing metadata or tensors, shapes wrong for the architecture, types kvdesk
// cannot compute, NaN/Inf hyperparameters, vocabularies that disagree with the embedding.
// Each must be refused with a kvdesk::Error naming the file and the problem. Also the
// resource limits: weights larger than the memory there is, checked after the file's own
// consistency (data past the end of the file is reported as that, not as "too big").
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/lab/gguf_writer.h"
#include "engine/model/model.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::TempDir;

namespace {

// What to change when copying stories260K.gguf: keys and tensors left out, tensors replaced by
// zeros of another type or shape, and keys added (after the copied ones, so a key dropped and
// added again is a replaced value).
struct ModelEdit {
  std::set<std::string> drop_keys;
  std::set<std::string> drop_tensors;
  std::map<std::string, std::pair<GgmlType, std::vector<int64_t>>> replace_tensors;
  std::function<void(GgufWriter&)> add_keys = [](GgufWriter&) {};
};

void copy_value(GgufWriter& w, const std::string& key, const GgufValue& v) {
  switch (v.type) {
    case GgufType::STRING: w.add_string(key, v.str); return;
    case GgufType::UINT32: w.add_uint32(key, uint32_t(v.u)); return;
    case GgufType::INT32: w.add_int32(key, int32_t(v.i)); return;
    case GgufType::FLOAT32: w.add_float32(key, float(v.f)); return;
    case GgufType::BOOL: w.add_bool(key, v.b); return;
    case GgufType::ARRAY: break;
    default: FAIL("stories260K.gguf has a value type this copy does not handle: " << key);
  }
  if (v.element_type == GgufType::STRING) return w.add_string_array(key, v.strings);
  if (v.element_type == GgufType::FLOAT32) return w.add_float32_array(key, {v.numbers.begin(), v.numbers.end()});
  REQUIRE(v.element_type == GgufType::INT32);
  w.add_int32_array(key, {v.numbers.begin(), v.numbers.end()});
}

void write_variant(const std::string& out, const ModelEdit& edit) {
  const auto src = GgufFile::open(model_path("stories260K.gguf"));
  GgufWriter w;
  for (const auto& [key, value] : src->metadata()) {
    if (!edit.drop_keys.count(key)) copy_value(w, key, value);
  }
  edit.add_keys(w);
  for (const GgufTensorInfo& t : src->tensors()) {
    if (edit.drop_tensors.count(t.name)) continue;
    const auto replaced = edit.replace_tensors.find(t.name);
    if (replaced != edit.replace_tensors.end()) {
      const auto [type, dims] = replaced->second;
      int64_t rows = 1;
      for (size_t d = 1; d < dims.size(); ++d) rows *= dims[d];
      const size_t bytes = ggml_row_bytes(type, dims[0]) * size_t(rows);
      w.add_tensor(t.name, type, dims, [bytes](std::vector<uint8_t>& o) { o.assign(bytes, 0); });
      continue;
    }
    const uint8_t* data = src->tensor_data(t);
    const uint64_t n = t.num_bytes;
    w.add_tensor(t.name, t.type, t.dims, [data, n](std::vector<uint8_t>& o) { o.assign(data, data + n); });
  }
  w.write(out);
}

struct BadModel {
  std::string what;
  ModelEdit edit;
  std::string expected;   // a phrase the message must contain
};

std::vector<BadModel> bad_models() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<BadModel> cases;
  const auto replace_key = [](std::string key, std::function<void(GgufWriter&)> add) {
    ModelEdit e;
    e.drop_keys = {key};
    e.add_keys = std::move(add);
    return e;
  };
  cases.push_back({"no architecture", ModelEdit{.drop_keys = {"general.architecture"}},
                   "missing metadata key 'general.architecture'"});
  cases.push_back({"another architecture",
                   replace_key("general.architecture", [](GgufWriter& w) { w.add_string("general.architecture", "gpt2"); }),
                   "the model architecture 'gpt2' is not supported"});
  cases.push_back({"no embedding length", ModelEdit{.drop_keys = {"llama.embedding_length"}},
                   "missing metadata key 'llama.embedding_length'"});
  cases.push_back({"a block count of 0",
                   replace_key("llama.block_count", [](GgufWriter& w) { w.add_uint32("llama.block_count", 0); }),
                   "'llama.block_count' = 0 is out of range"});
  cases.push_back({"head count not dividing the embedding",
                   replace_key("llama.attention.head_count",
                               [](GgufWriter& w) { w.add_uint32("llama.attention.head_count", 7); }),
                   "embedding_length is not a multiple of attention.head_count"});
  cases.push_back({"a NaN rope base",
                   replace_key("llama.rope.freq_base", [=](GgufWriter& w) { w.add_float32("llama.rope.freq_base", nan); }),
                   "'llama.rope.freq_base' is nan, expected a finite number"});
  cases.push_back({"an infinite norm epsilon",
                   replace_key("llama.attention.layer_norm_rms_epsilon",
                               [=](GgufWriter& w) { w.add_float32("llama.attention.layer_norm_rms_epsilon", inf); }),
                   "expected a finite number"});
  cases.push_back({"a vocabulary size that wraps to a small int32",
                   ModelEdit{.add_keys = [](GgufWriter& w) { w.add_uint32("llama.vocab_size", 0xFFFFFFFFu); }},
                   "llama.vocab_size"});
  cases.push_back({"a missing attention matrix", ModelEdit{.drop_tensors = {"blk.3.attn_q.weight"}},
                   "missing tensor 'blk.3.attn_q.weight'"});
  cases.push_back({"a missing output norm", ModelEdit{.drop_tensors = {"output_norm.weight"}},
                   "missing tensor 'output_norm.weight'"});
  cases.push_back({"a K matrix shaped for MHA with more heads",
                   ModelEdit{.replace_tensors = {{"blk.0.attn_k.weight", {GgmlType::F32, {64, 64}}}}},
                   "tensor 'blk.0.attn_k.weight' has shape [64, 64], expected [64, 32]"});
  cases.push_back({"a transposed FFN matrix",
                   ModelEdit{.replace_tensors = {{"blk.1.ffn_up.weight", {GgmlType::F32, {172, 64}}}}},
                   "tensor 'blk.1.ffn_up.weight' has shape [172, 64], expected [64, 172]"});
  cases.push_back({"a weight type kvdesk cannot compute",
                   ModelEdit{.replace_tensors = {{"blk.0.attn_q.weight", {GgmlType::Q8_1, {64, 64}}}}},
                   "tensor 'blk.0.attn_q.weight' has type q8_1, which kvdesk cannot run yet"});
  cases.push_back({"a norm stored as F16",
                   ModelEdit{.replace_tensors = {{"blk.0.ffn_norm.weight", {GgmlType::F16, {64}}}}},
                   "tensor 'blk.0.ffn_norm.weight' has type f16, expected f32"});
  cases.push_back({"no vocabulary",
                   ModelEdit{.drop_keys = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}},
                   "no vocabulary"});
  cases.push_back({"a vocabulary shorter than the embedding",
                   replace_key("tokenizer.ggml.tokens",
                               [](GgufWriter& w) {
                                 w.add_uint32("llama.vocab_size", 512);
                                 std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
                                 for (int i = 3; i < 500; ++i) tokens.push_back("t" + std::to_string(i));
                                 w.add_string_array("tokenizer.ggml.tokens", tokens);
                               }),
                   "tokenizer.ggml.scores has 512 entries but tokenizer.ggml.tokens has 500"});
  return cases;
}

}  // namespace

TEST_CASE("Every model the reader accepts but kvdesk cannot run is refused naming the problem",
          "[engine][gguf][model]") {
  TempDir dir;
  int index = 0;
  for (const BadModel& bad : bad_models()) {
    const std::string path = dir.file("bad-" + std::to_string(index++) + ".gguf");
    write_variant(path, bad.edit);
    INFO(bad.what);
    CHECK_THROWS_AS(Model::load(path), Error);
    CHECK_THROWS_WITH(Model::load(path), Catch::Contains(path + ": ") && Catch::Contains(bad.expected));
  }
}

TEST_CASE("A vocabulary of fewer tokens than the embedding's rows is refused", "[engine][gguf][model]") {
  // The GGUF's own tokens agree with its embedding; a SentencePiece file of fewer tokens does not.
  TempDir dir;
  const std::string path = dir.file("wide.gguf");
  write_variant(path, ModelEdit{.replace_tensors = {{"token_embd.weight", {GgmlType::F32, {64, 600}}},
                                                    {"output.weight", {GgmlType::F32, {64, 600}}}},
                                .add_keys = [](GgufWriter& w) { w.add_uint32("llama.vocab_size", 600); }});
  CHECK_THROWS_WITH(Model::load(path), Catch::Contains(path + ": its vocabulary has 512 tokens but the model embeds 600"));
}

TEST_CASE("A tokenizer path that is no SentencePiece file is refused with its name", "[engine][model]") {
  TempDir dir;
  const std::string model = model_path("stories260K.gguf");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "/dev/zero: not a regular file"},
      {dir.path().string(), dir.path().string() + ": is a directory"},
      {dir.file("missing.model"), dir.file("missing.model") + ": cannot open the SentencePiece model"},
      {model_path("tokenizer.model"), model_path("tokenizer.model") + " has 32000 tokens but the model embeds 512"}};
  for (const auto& [tokenizer, expected] : cases) {
    CHECK_THROWS_WITH(Model::load(model, ModelLoadOptions{.tokenizer_path = tokenizer}), Catch::Contains(expected));
  }
}

TEST_CASE("Weights larger than the memory there is are refused before the model is used",
          "[engine][gguf][model][memory]") {
  const std::string path = model_path("stories260K.gguf");
  const auto model = Model::load(path);
  const uint64_t weights = model->weights().weight_bytes;
  REQUIRE(weights > 100'000);
  ModelLoadOptions options;
  options.memory_limit_bytes = weights / 2;
  CHECK_THROWS_WITH(Model::load(path, options),
                    Catch::Contains(path + ": the model's weights needs ") && Catch::Contains(" MiB but only ") &&
                        Catch::Contains("of memory is available"));
  options.memory_limit_bytes = weights + 1;
  CHECK_NOTHROW(Model::load(path, options));
}

TEST_CASE("Tensor data past the end of the file is reported as such even when it would not fit in memory",
          "[engine][gguf][model][memory]") {
  TempDir dir;
  const std::string whole = model_path("stories260K.gguf");
  const std::string cut = dir.file("cut.gguf");
  std::filesystem::copy_file(whole, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(whole) - 4096);
  ModelLoadOptions options;
  options.memory_limit_bytes = 1024;
  CHECK_THROWS_WITH(Model::load(cut, options), Catch::Contains(cut + ": ") && Catch::Contains("past end of file"));
}
