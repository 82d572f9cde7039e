// Fuzz target: arbitrary bytes as a GGUF file, then everything a model load reads from it
// (hyperparameters, weight shapes and data, vocabulary, chat template). Every failure must be
// a kvdesk::Error; a crash, a sanitizer report or an out-of-bounds read is a bug.
#include <cstdint>
#include <cstdlib>

#include "engine/chat/chat_template.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/memory_file.h"

namespace {

// Reads every byte of every tensor, so data the reader let through outside the file faults.
uint8_t touch_tensor_data(const kvdesk::GgufFile& file) {
  uint8_t sum = 0;
  for (const kvdesk::GgufTensorInfo& t : file.tensors()) {
    const uint8_t* data = file.tensor_data(t);
    for (uint64_t i = 0; i < t.num_bytes; ++i) sum ^= data[i];
  }
  return sum;
}

void load_like_a_model(const kvdesk::GgufFile& file) {
  volatile uint8_t sink = touch_tensor_data(file);
  (void)sink;
  const kvdesk::ChatTemplate chat_template = kvdesk::chat_template_for(file, "");
  const kvdesk::ModelConfig config = kvdesk::read_model_config(file);
  kvdesk::bind_model_weights(file, config);
  const auto tokenizer = kvdesk::Tokenizer::from_gguf(file);
  if (tokenizer->vocab_size() <= 0) std::abort();
  for (const int32_t id : kvdesk::encode_chat(*tokenizer, chat_template, {{"user", "Hi! 12345 don't \xea\xb0\x80"}})) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvdesk::fuzz::MemoryFile file;
  file.assign(data, size);
  try {
    load_like_a_model(*kvdesk::GgufFile::open(file.path()));
  } catch (const kvdesk::Error&) {
  }
  return 0;
}
