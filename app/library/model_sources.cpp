// Roots of the model caches: each program's own variable wins over its default location.
#include "app/library/model_sources.h"

#include <cstdlib>

namespace kvdesk::library {
namespace {

std::string variable(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value ? std::string(value) : std::string();
}

// $XDG_CACHE_HOME, else ~/.cache (empty when neither is known).
std::string cache_home(const EnvLookup& env, const std::string& home) {
  const std::string xdg = variable(env, "XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg;
  return home.empty() ? std::string() : home + "/.cache";
}

std::string hugging_face_root(const EnvLookup& env, const std::string& cache) {
  const std::string hub = variable(env, "HF_HUB_CACHE");
  if (!hub.empty()) return hub;
  const std::string hf_home = variable(env, "HF_HOME");
  if (!hf_home.empty()) return hf_home + "/hub";
  return cache.empty() ? std::string() : cache + "/huggingface/hub";
}

}  // namespace

const char* model_source_name(ModelSource source) {
  switch (source) {
    case ModelSource::LmStudio: return "LM Studio";
    case ModelSource::Ollama: return "Ollama";
    case ModelSource::HuggingFace: return "Hugging Face";
    case ModelSource::LlamaCpp: return "llama.cpp";
    case ModelSource::Folder: return "folder";
  }
  return "folder";
}

const char* model_source_key(ModelSource source) {
  switch (source) {
    case ModelSource::LmStudio: return "lmstudio";
    case ModelSource::Ollama: return "ollama";
    case ModelSource::HuggingFace: return "huggingface";
    case ModelSource::LlamaCpp: return "llamacpp";
    case ModelSource::Folder: return "folder";
  }
  return "folder";
}

std::optional<ModelSource> model_source_from_key(std::string_view key) {
  for (ModelSource s : {ModelSource::LmStudio, ModelSource::Ollama, ModelSource::HuggingFace, ModelSource::LlamaCpp,
                        ModelSource::Folder}) {
    if (key == model_source_key(s)) return s;
  }
  return std::nullopt;
}

std::vector<SourceRoot> default_roots(const EnvLookup& env) {
  const std::string home = variable(env, "HOME");
  const std::string cache = cache_home(env, home);
  std::vector<SourceRoot> roots;
  auto add = [&](ModelSource source, const std::string& path) {
    if (!path.empty()) roots.push_back(SourceRoot{source, path});
  };
  if (!home.empty()) {
    add(ModelSource::LmStudio, home + "/.lmstudio/models");
    add(ModelSource::LmStudio, home + "/.cache/lm-studio/models");
  }
  const std::string ollama = variable(env, "OLLAMA_MODELS");
  add(ModelSource::Ollama, !ollama.empty() ? ollama : home.empty() ? std::string() : home + "/.ollama/models");
  add(ModelSource::HuggingFace, hugging_face_root(env, cache));
  const std::string llama_cache = variable(env, "LLAMA_CACHE");
  add(ModelSource::LlamaCpp, !llama_cache.empty() ? llama_cache : cache.empty() ? std::string() : cache + "/llama.cpp");
  return roots;
}

EnvLookup process_environment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::vector<SourceRoot> library_roots(const EnvLookup& env, const std::vector<std::string>& folders) {
  std::vector<SourceRoot> roots = default_roots(env);
  for (const std::string& folder : folders) roots.push_back(SourceRoot{ModelSource::Folder, folder});
  return roots;
}

}  // namespace kvdesk::library
