// Where people keep GGUF files: the folders that LM Studio, Ollama, the Hugging Face hub cache
// and llama.cpp download into, found the way those programs find them (their environment
// variables first, then their defaults under the home folder), plus folders the user adds.
// Only paths are computed here; nothing is read.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::library {

// Each source lays out its files its own way (model_finder.h reads each layout).
enum class ModelSource { LmStudio, Ollama, HuggingFace, LlamaCpp, Folder };

// "LM Studio", "Ollama", "Hugging Face", "llama.cpp", "folder".
const char* model_source_name(ModelSource source);
// "lmstudio", "ollama", "huggingface", "llamacpp", "folder": the JSON spelling.
const char* model_source_key(ModelSource source);
std::optional<ModelSource> model_source_from_key(std::string_view key);

struct SourceRoot {
  ModelSource source;
  std::string path;   // the folder the source's layout starts at
};

// An environment variable's value, or null when unset (std::getenv, or a test's table).
using EnvLookup = std::function<const char*(const char* name)>;

// The roots of the four programs' caches, in the order above; a root is listed whether or not
// it exists (the finder skips missing ones). Unset or empty HOME gives no default roots.
//   LM Studio:    ~/.lmstudio/models, ~/.cache/lm-studio/models (before LM Studio 0.3)
//   Ollama:       $OLLAMA_MODELS, else ~/.ollama/models
//   Hugging Face: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
//                 else ~/.cache/huggingface/hub
//   llama.cpp:    $LLAMA_CACHE, else $XDG_CACHE_HOME/llama.cpp, else ~/.cache/llama.cpp
std::vector<SourceRoot> default_roots(const EnvLookup& env);

// The process's own environment.
EnvLookup process_environment();

// default_roots plus each of `folders` as a Folder root.
std::vector<SourceRoot> library_roots(const EnvLookup& env, const std::vector<std::string>& folders);

}  // namespace kvdesk::library
