// The model information view's rows and text (ui/model_info.h), from a hand-made ModelView.
#include <catch2/catch.hpp>

#include "ui/model_info.h"

using namespace kvdesk::ui;

namespace {

ViewModel gemma_like() {
  ViewModel vm;
  ModelView& m = vm.model;
  m.state = ModelState::Loaded;
  m.path = "/models/tiny.gguf";
  m.architecture = "gemma3";
  m.parameters = 1234567;
  m.layers = 6;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.context_length = 8192;
  m.vocab_size = 262144;
  m.tokenizer_kind = "SentencePiece";
  m.chat_template = "gemma";
  m.sliding_window = 512;
  m.local_layers = 5;
  m.weight_types = {{"attn_q", "q8_0", 6, 6144}, {"token_embd", "f16", 1, 2048}};
  vm.kv_types = {{"f16", 1536, {}}, {"int8", 800, {KvQualityState::Measured, 0.001, 99.0, ""}}};
  return vm;
}

}  // namespace

TEST_CASE("the model view's text names every figure of the model", "[ui][model_info]") {
  const std::string text = model_info_text(gemma_like());
  CHECK(text.find("Model\n  file: /models/tiny.gguf\n  architecture: gemma3\n  parameters: 1,234,567\n") == 0);
  CHECK(text.find("  attention heads: 4 (2 KV heads of 16)\n") != std::string::npos);
  CHECK(text.find("  context length: 8,192\n") != std::string::npos);
  CHECK(text.find("  vocabulary: 262,144\n  tokenizer: SentencePiece\n  chat template: gemma\n") != std::string::npos);
  CHECK(text.find("  sliding window: 512 tokens on 5 of 6 layers\n") != std::string::npos);
  CHECK(text.find("Weight types\n  attn_q: q8_0: 6 tensors, 6.00 KiB\n  token_embd: f16: 1 tensor, 2.00 KiB\n") !=
        std::string::npos);
  CHECK(text.find("KV bytes per token (K + V, all layers)\n  f16: 1,536 B\n  int8: 800 B\n") != std::string::npos);
}

TEST_CASE("a model without local layers or a model at all says so", "[ui][model_info]") {
  ViewModel vm = gemma_like();
  vm.model.sliding_window = 0;
  CHECK(model_info_text(vm).find("sliding window: none (every layer sees the whole context)") != std::string::npos);
  vm.model.state = ModelState::Loading;
  CHECK(model_info_text(vm) == "no model is loaded\n");
}

TEST_CASE("a dense model shows its FFN size, a mixture how many experts of what size a token runs", "[ui][model_info]") {
  ViewModel vm = gemma_like();
  vm.model.feed_forward_length = 6144;
  CHECK(model_info_text(vm).find("  feed forward: 6144\n") != std::string::npos);
  vm.model.expert_count = 128;
  vm.model.expert_used_count = 8;
  vm.model.expert_feed_forward_length = 768;
  CHECK(model_info_text(vm).find("  feed forward: 8 of 128 experts of 768 per token\n") != std::string::npos);
  vm.model.expert_count = 60;
  vm.model.expert_used_count = 4;
  vm.model.expert_feed_forward_length = 1408;
  vm.model.expert_shared_feed_forward_length = 5632;
  CHECK(model_info_text(vm).find("  feed forward: 4 of 60 experts of 1408 per token, and a shared expert of 5632\n") !=
        std::string::npos);
}
