// Controller, the model library and the file browser. The library scans on its own thread
// (app/library/model_library.h) and update() copies what it has found into the view; the user's
// folders and the file browser's last folder are settings in the store. Listing a folder for the
// browser is one directory read on the UI thread, as a file dialog does.
#include <spawn.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "app/gui/controller.h"
#include "app/library/model_finder.h"
#include "engine/error.h"
#include "engine/system/memory_limit.h"

extern char** environ;

namespace kvdesk::gui {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFoldersKey = "library.folders";
constexpr const char* kBrowserFolderKey = "browser.folder";
constexpr const char* kCardsKey = "library.cards";   // ModelLibrary::saved(): the next start reads only changes

ui::LibraryEntryView entry_view(const library::ModelCard& card, uint64_t memory_bytes) {
  ui::LibraryEntryView e;
  e.name = card.found.name;
  e.source = library::model_source_name(card.found.source);
  e.path = card.found.files.empty() ? std::string() : card.found.files.front();
  e.size_bytes = card.size_bytes;
  e.arch = card.arch;
  e.params = card.params;
  e.weight_type = card.weight_type;
  e.context_length = card.context_length;
  e.chat_template = card.chat_template;
  e.projectors = int32_t(card.found.projectors.size());
  for (const library::KvFit& f : library::kv_fits(card, memory_bytes)) {
    e.fits.push_back({kv_type_name(f.type), f.max_context, f.conversations});
  }
  e.error = card.error;
  e.broken = card.broken;
  return e;
}

std::string home_folder() {
  const char* home = std::getenv("HOME");
  return home && *home ? home : "/";
}

// Waits for a started child on a thread of its own, so it never lingers as a zombie.
void reap_later(pid_t pid) {
  std::thread([pid] {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }).detach();
}

}  // namespace

void Controller::start_library() {
  vm_.library.folders.clear();
  const nlohmann::json folders = nlohmann::json::parse(store().setting(kFoldersKey).value_or("[]"), nullptr, false);
  if (folders.is_array()) {
    for (const nlohmann::json& f : folders) {
      if (f.is_string()) vm_.library.folders.push_back(f.get<std::string>());
    }
  }
  vm_.browser.folder = store().setting(kBrowserFolderKey).value_or(home_folder());
  library_.restore(nlohmann::json::parse(store().setting(kCardsKey).value_or("{}"), nullptr, false));
  rescan_library();
}

void Controller::rescan_library() {
  library_.rescan(library::library_roots(library::process_environment(), vm_.library.folders));
  vm_.library.scanning = true;   // at once, before the next refresh sees the scanner's state
}

void Controller::refresh_library() {
  if (library_.generation() == library_generation_) return;
  library::LibrarySnapshot s = library_.snapshot();
  library_generation_ = s.generation;
  vm_.library.memory_bytes = available_memory_bytes();
  vm_.library.entries.clear();
  for (const library::ModelCard& card : s.cards) vm_.library.entries.push_back(entry_view(card, vm_.library.memory_bytes));
  vm_.library.problems = s.problems;
  vm_.library.scanning = s.scanning;
  if (!s.scanning) {
    try {
      if (!s.saved.is_null()) store().set_setting(kCardsKey, s.saved.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } catch (const Error& e) {   // the store could not keep them: the next start reads every header
      set_status(std::string("the library's cards were not kept: ") + e.what(), true);
    }
    char summary[160];
    std::snprintf(summary, sizeof summary, "%zu models, found in %.2f s (%d read, %d unchanged); fits in %s available now",
                  s.cards.size(), s.last.seconds, s.last.read, s.last.reused, mib_text(vm_.library.memory_bytes).c_str());
    vm_.library.summary = summary;
  }
}

void Controller::save_library_folders() {
  store().set_setting(kFoldersKey, nlohmann::json(vm_.library.folders).dump());
}

void Controller::add_library_folder(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw Error("'" + folder + "' is not a folder");
  const std::string normal = fs::absolute(folder, ec).lexically_normal().string();
  if (std::find(vm_.library.folders.begin(), vm_.library.folders.end(), normal) == vm_.library.folders.end()) {
    vm_.library.folders.push_back(normal);
    save_library_folders();
  }
  rescan_library();
  set_status("the library also looks in " + normal, false);
}

void Controller::remove_library_folder(const std::string& folder) {
  std::erase(vm_.library.folders, folder);
  save_library_folders();
  rescan_library();
}

void Controller::show_in_folder(const std::string& path) {
  const std::string folder = fs::path(path).parent_path().string();
  const char* argv[] = {"xdg-open", folder.c_str(), nullptr};
  pid_t pid = 0;
  const int err = ::posix_spawnp(&pid, "xdg-open", nullptr, nullptr, const_cast<char* const*>(argv), environ);
  if (err != 0) throw Error("cannot start xdg-open to show " + folder + ": " + std::strerror(err));
  reap_later(pid);
}

void Controller::browse(const std::string& requested) {
  const std::string folder = requested.empty() ? vm_.browser.folder : requested;
  ui::FileBrowserView view;
  std::error_code ec;
  view.folder = fs::absolute(folder, ec).lexically_normal().string();
  if (view.folder.size() > 1 && view.folder.back() == '/') view.folder.pop_back();
  fs::directory_iterator it(view.folder, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    vm_.browser.error = "cannot list '" + view.folder + "': " + ec.message();
    return;   // the folder shown stays
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.starts_with('.')) continue;
    std::error_code type_ec;
    const bool is_folder = it->is_directory(type_ec);
    const uint64_t size = is_folder ? 0 : uint64_t(it->file_size(type_ec));
    view.entries.push_back({name, is_folder, !is_folder && library::is_gguf_name(name), type_ec ? 0 : size});
  }
  std::sort(view.entries.begin(), view.entries.end(), [](const ui::FileBrowserEntry& a, const ui::FileBrowserEntry& b) {
    return a.is_folder != b.is_folder ? a.is_folder : a.name < b.name;
  });
  vm_.browser = std::move(view);
  vm_.ui.browser_path = vm_.browser.folder;
  store().set_setting(kBrowserFolderKey, vm_.browser.folder);
}

}  // namespace kvdesk::gui
