// Architecture: the Llama-family architectures kvdesk runs and the few ways their blocks
// differ. A GGUF names its architecture in general.architecture, and that name is also the
// prefix of its hyperparameter keys ("qwen2.embedding_length").
#pragma once
#include <string>
#include <string_view>

#include "kernels/ops.h"

namespace kvdesk {

// Whether the architecture requires a tensor in the file or merely allows it.
enum class TensorPresence { Required, Optional };

struct Architecture {
  std::string_view name;
  ops::RopeMode rope_mode;
  TensorPresence qkv_bias;   // blk.N.attn_{q,k,v}.bias, added after the projections
};

// The architecture of that name, or nullptr when kvdesk cannot run it.
const Architecture* find_architecture(std::string_view name);

// "llama, qwen2": for messages.
std::string supported_architecture_names();

}  // namespace kvdesk
