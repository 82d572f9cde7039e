// Walks each root in its source's layout. Walks never follow folder links (a link loop cannot
// trap them), skip hidden folders, stop at a depth and an entry count (a folder such as the home
// folder added by mistake is a problem reported, not a hang), and treat every unreadable entry
// as a problem to report, never an error that ends the scan.
#include "app/library/model_finder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>

namespace kvdesk::library {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxDepth = 8;
constexpr int64_t kMaxEntriesPerRoot = 200000;
constexpr uintmax_t kMaxManifestBytes = 1 << 20;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_projector_name(const std::string& name) { return lower(name).find("mmproj") != std::string::npos; }

std::string without_extension(const std::string& name) { return name.substr(0, name.size() - 5); }

// The GGUF files directly in each folder under root (folder -> file names, sorted).
using FolderFiles = std::map<std::string, std::vector<std::string>>;

FolderFiles gguf_files_under(const std::string& root, std::vector<std::string>& problems) {
  FolderFiles folders;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    problems.push_back(root + ": " + ec.message());
    return folders;
  }
  int64_t entries = 0;
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      problems.push_back(root + ": " + ec.message());
      break;
    }
    if (++entries > kMaxEntriesPerRoot) {
      problems.push_back(root + ": more than " + std::to_string(kMaxEntriesPerRoot) + " entries; the rest was not searched");
      break;
    }
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    std::error_code type_ec;
    if (entry.is_directory(type_ec) && !entry.is_symlink(type_ec)) {
      if (name.starts_with('.') || it.depth() >= kMaxDepth) it.disable_recursion_pending();
      continue;
    }
    if (is_gguf_name(name) && entry.is_regular_file(type_ec)) folders[entry.path().parent_path().string()].push_back(name);
  }
  for (auto& [folder, names] : folders) std::sort(names.begin(), names.end());
  return folders;
}

// NAME-00001-of-00003.gguf: llama.cpp's gguf-split naming.
struct ShardName {
  std::string stem;
  int32_t index = 0;
  int32_t count = 0;
};

std::optional<ShardName> shard_name(const std::string& name) {
  static const std::regex pattern(R"(^(.*)-(\d{5})-of-(\d{5})\.[gG][gG][uU][fF]$)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  const int32_t index = std::stoi(m[2].str()), count = std::stoi(m[3].str());
  if (index < 1 || count < 1 || index > count) return std::nullopt;
  return ShardName{m[1].str(), index, count};
}

// The models of one folder: one per file, one per split set, projectors attached to each.
// `name_of(stem)` makes the library name from a file name without its extension.
template <typename NameOf>
std::vector<FoundModel> models_in_folder(const std::string& folder, const std::vector<std::string>& names,
                                         ModelSource source, NameOf name_of) {
  std::vector<std::string> projectors;
  std::map<std::pair<std::string, int32_t>, std::map<int32_t, std::string>> splits;
  std::vector<FoundModel> models;
  for (const std::string& name : names) {
    const std::string path = folder + "/" + name;
    if (is_projector_name(name)) {
      projectors.push_back(path);
    } else if (const std::optional<ShardName> shard = shard_name(name)) {
      splits[{shard->stem, shard->count}][shard->index] = path;
    } else {
      models.push_back(FoundModel{name_of(without_extension(name)), source, {path}, 1, {}});
    }
  }
  for (const auto& [key, shards] : splits) {
    FoundModel model{name_of(key.first), source, {}, key.second, {}};
    for (const auto& [index, path] : shards) model.files.push_back(path);
    // Without its first shard the metadata is missing: still listed, as broken, so it is seen.
    models.push_back(std::move(model));
  }
  for (FoundModel& m : models) m.projectors = projectors;
  return models;
}

std::string relative_to(const std::string& root, const std::string& folder) {
  std::error_code ec;
  const fs::path rel = fs::relative(folder, root, ec);
  return ec || rel == "." ? std::string() : rel.generic_string();
}

// LM Studio, llama.cpp's cache and user folders: files named by where they lie.
std::vector<FoundModel> walk_files(const SourceRoot& root, std::vector<std::string>& problems) {
  std::vector<FoundModel> models;
  for (const auto& [folder, names] : gguf_files_under(root.path, problems)) {
    const std::string prefix = root.source == ModelSource::LlamaCpp ? std::string() : relative_to(root.path, folder);
    auto name_of = [&](const std::string& stem) { return prefix.empty() ? stem : prefix + "/" + stem; };
    for (FoundModel& m : models_in_folder(folder, names, root.source, name_of)) models.push_back(std::move(m));
  }
  return models;
}

std::string read_small_file(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxManifestBytes) return {};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// models--<org>--<repo> -> "org/repo"; empty for other folder names.
std::string hub_repo_name(const std::string& folder_name) {
  const std::string prefix = "models--";
  if (!folder_name.starts_with(prefix)) return {};
  const std::string rest = folder_name.substr(prefix.size());
  const size_t sep = rest.find("--");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= rest.size()) return {};
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

// The snapshot folders to list: the one refs/main names, else every snapshot.
std::vector<fs::path> hub_snapshots(const fs::path& repo_dir) {
  std::string main_rev = read_small_file(repo_dir / "refs" / "main");
  while (!main_rev.empty() && std::isspace(static_cast<unsigned char>(main_rev.back()))) main_rev.pop_back();
  std::error_code ec;
  if (!main_rev.empty() && main_rev.find('/') == std::string::npos && fs::is_directory(repo_dir / "snapshots" / main_rev, ec)) {
    return {repo_dir / "snapshots" / main_rev};
  }
  std::vector<fs::path> snapshots;
  for (fs::directory_iterator it(repo_dir / "snapshots", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (it->is_directory(entry_ec)) snapshots.push_back(it->path());
  }
  std::sort(snapshots.begin(), snapshots.end());
  return snapshots;
}

std::vector<FoundModel> walk_hugging_face(const SourceRoot& root, std::vector<std::string>& problems) {
  std::vector<FoundModel> models;
  std::error_code ec;
  for (fs::directory_iterator it(root.path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string repo = hub_repo_name(it->path().filename().string());
    if (repo.empty()) continue;
    std::vector<FoundModel> in_repo;
    for (const fs::path& snapshot : hub_snapshots(it->path())) {
      for (const auto& [folder, names] : gguf_files_under(snapshot.string(), problems)) {
        const std::string prefix = relative_to(snapshot.string(), folder);
        auto name_of = [&](const std::string& stem) { return repo + "/" + (prefix.empty() ? stem : prefix + "/" + stem); };
        for (FoundModel& m : models_in_folder(folder, names, root.source, name_of)) in_repo.push_back(std::move(m));
      }
    }
    if (in_repo.size() == 1) in_repo[0].name = repo;
    for (FoundModel& m : in_repo) models.push_back(std::move(m));
  }
  if (ec && ec != std::errc::no_such_file_or_directory) problems.push_back(root.path + ": " + ec.message());
  return models;
}

// "sha256:<64 hex>" -> "sha256-<hex>" (the blob's file name); empty for anything else, so a
// manifest cannot point outside the blobs folder.
std::string blob_file_name(const std::string& digest) {
  const std::string prefix = "sha256:";
  if (!digest.starts_with(prefix) || digest.size() != prefix.size() + 64) return {};
  for (size_t i = prefix.size(); i < digest.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(digest[i]))) return {};
  }
  return "sha256-" + digest.substr(prefix.size());
}

// The blob's path: "sha256-<hex>", or "sha256:<hex>" as Ollama named blobs before it moved to
// names Windows allows, when only that one exists.
std::string blob_path(const fs::path& blobs, const std::string& file_name) {
  const fs::path current = blobs / file_name;
  std::error_code ec;
  if (fs::exists(current, ec)) return current.string();
  const fs::path older = blobs / ("sha256:" + file_name.substr(7));
  return fs::exists(older, ec) ? older.string() : current.string();
}

// A manifest field's text; "" when absent or not a string (a manifest is untrusted input).
std::string text_of(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string ollama_name(const std::string& host, const std::string& ns, const std::string& model, const std::string& tag) {
  const std::string name_tag = model + ":" + tag;
  if (host == "registry.ollama.ai") return ns == "library" ? name_tag : ns + "/" + name_tag;
  return host + "/" + ns + "/" + name_tag;
}

// One manifest's model (and projector) layers as a FoundModel; nullopt when it has no model
// layer (an embedding-only or foreign manifest) or does not parse (a problem).
std::optional<FoundModel> ollama_model(const fs::path& manifest, const std::string& name, const fs::path& blobs,
                                       std::vector<std::string>& problems) {
  const nlohmann::json doc = nlohmann::json::parse(read_small_file(manifest), nullptr, false);
  if (!doc.is_object() || !doc.contains("layers") || !doc["layers"].is_array()) {
    problems.push_back(manifest.string() + ": not an Ollama manifest");
    return std::nullopt;
  }
  FoundModel model{name, ModelSource::Ollama, {}, 1, {}};
  for (const nlohmann::json& layer : doc["layers"]) {
    if (!layer.is_object()) continue;
    const std::string type = text_of(layer, "mediaType"), blob = blob_file_name(text_of(layer, "digest"));
    if (blob.empty()) continue;
    if (type == "application/vnd.ollama.image.model" && model.files.empty()) model.files.push_back(blob_path(blobs, blob));
    if (type == "application/vnd.ollama.image.projector") model.projectors.push_back(blob_path(blobs, blob));
  }
  if (model.files.empty()) return std::nullopt;
  return model;
}

std::vector<FoundModel> walk_ollama(const SourceRoot& root, std::vector<std::string>& problems) {
  std::vector<FoundModel> models;
  const fs::path manifests = fs::path(root.path) / "manifests", blobs = fs::path(root.path) / "blobs";
  std::error_code ec;
  fs::recursive_directory_iterator it(manifests, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 3) it.disable_recursion_pending();
    std::error_code entry_ec;
    if (it.depth() != 3 || !it->is_regular_file(entry_ec)) continue;
    const fs::path rel = fs::relative(it->path(), manifests, entry_ec);
    if (entry_ec) continue;
    std::vector<std::string> parts;
    for (const fs::path& part : rel) parts.push_back(part.string());
    if (parts.size() != 4) continue;
    const std::string name = ollama_name(parts[0], parts[1], parts[2], parts[3]);
    if (std::optional<FoundModel> m = ollama_model(it->path(), name, blobs, problems)) models.push_back(std::move(*m));
  }
  if (ec && ec != std::errc::no_such_file_or_directory) problems.push_back(manifests.string() + ": " + ec.message());
  return models;
}

std::vector<FoundModel> walk_root(const SourceRoot& root, std::vector<std::string>& problems) {
  std::error_code ec;
  if (!fs::is_directory(root.path, ec)) {
    if (root.source == ModelSource::Folder) problems.push_back(root.path + ": not a folder");
    return {};
  }
  switch (root.source) {
    case ModelSource::Ollama: return walk_ollama(root, problems);
    case ModelSource::HuggingFace: return walk_hugging_face(root, problems);
    default: return walk_files(root, problems);
  }
}

// The file's identity across links (HF snapshots link into blobs; a folder may be reached twice).
std::string identity(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  return ec ? path : canonical.string();
}

}  // namespace

bool is_gguf_name(std::string_view name) {
  return name.size() > 5 && lower(std::string(name.substr(name.size() - 5))) == ".gguf";
}

FindResult find_models(const std::vector<SourceRoot>& roots) {
  FindResult result;
  std::set<std::string> seen;
  for (const SourceRoot& root : roots) {
    std::vector<FoundModel> models = walk_root(root, result.problems);
    std::sort(models.begin(), models.end(), [](const FoundModel& a, const FoundModel& b) { return a.name < b.name; });
    for (FoundModel& m : models) {
      if (!m.files.empty() && !seen.insert(identity(m.files.front())).second) continue;
      result.models.push_back(std::move(m));
    }
  }
  return result;
}

}  // namespace kvdesk::library
