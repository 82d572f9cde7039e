// Model file checks: cheap ones (the file, its first four bytes) that catch a wrong file before
// the engine, which releases its current model as a load begins, is asked to load it. The
// magic decides, not the name: model stores such as Ollama's keep GGUFs without an extension.
#include "app/gui/model_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/library/model_finder.h"

namespace kvdesk::gui {
namespace {

constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};

bool named_gguf(const std::filesystem::path& path) { return library::is_gguf_name(path.filename().string()); }

}  // namespace

std::string model_file_problem(const std::string& path) {
  if (path.empty()) return "no model path given";
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(p, ec);
  if (ec || !std::filesystem::exists(status)) return "no model file at '" + path + "'";
  if (std::filesystem::is_directory(status)) return "'" + name + "' is a folder, not a model file (.gguf)";
  if (!std::filesystem::is_regular_file(status)) return "'" + name + "' is not a regular file";
  std::ifstream in(p, std::ios::binary);
  if (!in) return "cannot read '" + path + "': " + std::strerror(errno);
  char magic[sizeof kGgufMagic] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() == sizeof magic && std::memcmp(magic, kGgufMagic, sizeof magic) == 0) return "";
  if (!named_gguf(p)) return "'" + name + "' is not a model: kvdesk opens GGUF model files (.gguf)";
  return "'" + name + "' is not a GGUF model (it does not start with \"GGUF\"): damaged or another format";
}

std::string dropped_model_path(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (named_gguf(path)) return path;
  }
  return paths.empty() ? "" : paths.front();
}

}  // namespace kvdesk::gui
