// The table of supported architectures, after llama.cpp's llama-arch / llama-model: Llama
// rotates adjacent pairs and may carry Q/K/V biases; Qwen2 rotates NeoX-style halves and
// always has them.
#include "engine/model/architecture.h"

namespace kvdesk {
namespace {

constexpr Architecture kArchitectures[] = {
    {"llama", ops::RopeMode::Normal, TensorPresence::Optional},
    {"qwen2", ops::RopeMode::Neox, TensorPresence::Required},
};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string supported_architecture_names() {
  std::string names;
  for (const Architecture& a : kArchitectures) {
    if (!names.empty()) names += ", ";
    names += a.name;
  }
  return names;
}

}  // namespace kvdesk
