// ModelFinder: the GGUF models under the library's roots, found by walking folders and reading
// Ollama's manifests; no GGUF is opened here. Each source's layout names its models:
//   LM Studio   <publisher>/<repo>/<file>.gguf            "publisher/repo/file"
//   Ollama      manifests/<host>/<namespace>/<model>/<tag> "model:tag" (the default registry's
//               library namespace), else "namespace/model:tag" or "host/namespace/model:tag";
//               the manifest's model layer is blobs/sha256-<hex>
//   Hugging Face models--<org>--<repo>/snapshots/<rev>/... "org/repo" (plus "/file" when the
//               repository holds several models), the revision refs/main names when there is one
//   llama.cpp   <file>.gguf                                 "file"
//   folder      any depth below it                          its path below the folder
// A split model (NAME-00001-of-00003.gguf ...) is one model whose files are its shards in
// order; mmproj (vision projector) files are listed with the models of their folder, never as
// models. The same file reached through two roots is listed once, under the first.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/library/model_sources.h"

namespace kvdesk::library {

struct FoundModel {
  std::string name;                      // what the library shows
  ModelSource source = ModelSource::Folder;
  std::vector<std::string> files;        // [shards found] in shard order; files[0] holds the metadata
  int32_t expected_shards = 1;           // what the file names say; > files.size(): shards missing
  std::vector<std::string> projectors;   // vision projector files that go with it
};

struct FindResult {
  std::vector<FoundModel> models;     // in root order, then by name
  std::vector<std::string> problems;  // folders that could not be read, manifests that do not parse
};

FindResult find_models(const std::vector<SourceRoot>& roots);

// A file name ending in ".gguf", in any letter case (how a model file is named; Ollama's blobs
// are not, which only a file's magic can tell).
bool is_gguf_name(std::string_view name);

}  // namespace kvdesk::library
