// Scans with change detection, and the thread that runs them for the window.
#include "app/library/model_library.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <system_error>

#include "app/library/model_finder.h"

namespace kvdesk::library {

std::vector<ModelLibrary::FileStamp> ModelLibrary::stamps_of(const FoundModel& model) {
  std::vector<FileStamp> stamps;
  for (const std::string& path : model.files) {
    std::error_code size_ec, time_ec;
    const auto size = std::filesystem::file_size(path, size_ec);
    const auto modified = std::filesystem::last_write_time(path, time_ec);
    if (size_ec || time_ec) {
      stamps.push_back(FileStamp{});
      continue;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(modified.time_since_epoch()).count();
    stamps.push_back(FileStamp{uint64_t(size), int64_t(ns), true});
  }
  return stamps;
}

ScanReport ModelLibrary::scan(const std::vector<SourceRoot>& roots, const std::function<void(const ModelCard&)>& on_card,
                              const std::atomic<bool>* cancel) {
  const auto start = std::chrono::steady_clock::now();
  ScanReport report;
  FindResult found = find_models(roots);
  report.problems = std::move(found.problems);
  std::map<std::string, Entry> kept;
  for (FoundModel& model : found.models) {
    if (cancel && cancel->load()) break;
    const std::string key = model.name + '\n' + (model.files.empty() ? std::string() : model.files.front());
    std::vector<FileStamp> stamps = stamps_of(model);
    auto old = entries_.find(key);
    Entry entry;
    const bool readable = std::all_of(stamps.begin(), stamps.end(), [](const FileStamp& f) { return f.readable; });
    if (readable && old != entries_.end() && old->second.stamps == stamps && old->second.card.found.files == model.files) {
      entry = std::move(old->second);
      entry.card.found = std::move(model);   // projectors may have come or gone
      ++report.reused;
    } else {
      entry = Entry{std::move(stamps), read_model_card(model)};
      ++report.read;
    }
    report.cards.push_back(entry.card);
    if (on_card) on_card(entry.card);
    kept[key] = std::move(entry);
  }
  if (cancel && cancel->load()) {
    for (auto& [key, entry] : entries_) kept.try_emplace(key, std::move(entry));   // not visited: still valid
  }
  entries_ = std::move(kept);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

nlohmann::json ModelLibrary::saved() const {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [key, entry] : entries_) {
    nlohmann::json stamps = nlohmann::json::array();
    for (const FileStamp& s : entry.stamps) stamps.push_back({s.size, s.modified_ns, s.readable});
    entries.push_back({{"key", key}, {"stamps", stamps}, {"card", card_to_json(entry.card)}});
  }
  return {{"version", 1}, {"entries", entries}};
}

void ModelLibrary::restore(const nlohmann::json& saved) {
  if (!saved.is_object()) return;
  const auto version = saved.find("version"), entries = saved.find("entries");
  if (version == saved.end() || *version != 1 || entries == saved.end() || !entries->is_array()) return;
  for (const nlohmann::json& e : *entries) {
    try {
      Entry entry;
      for (const nlohmann::json& s : e.at("stamps")) {
        entry.stamps.push_back(FileStamp{s.at(0).get<uint64_t>(), s.at(1).get<int64_t>(), s.at(2).get<bool>()});
      }
      entry.card = card_from_json(e.at("card"));
      entries_.insert_or_assign(e.at("key").get<std::string>(), std::move(entry));
    } catch (const std::exception&) {   // damaged: that model is read again
    }
  }
}

LibraryScanner::~LibraryScanner() { stop(); }

void LibraryScanner::restore(const nlohmann::json& saved) {
  stop();
  library_.restore(saved);
}

void LibraryScanner::stop() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
  cancel_ = false;
}

void LibraryScanner::rescan(std::vector<SourceRoot> roots) {
  stop();
  {
    std::lock_guard lock(mutex_);
    state_.cards.clear();
    state_.scanning = true;
    ++state_.generation;
  }
  thread_ = std::thread([this, roots = std::move(roots)] {
    ScanReport report;
    try {
      report = library_.scan(roots, [this](const ModelCard& card) {
        std::lock_guard lock(mutex_);
        state_.cards.push_back(card);
        ++state_.generation;
      }, &cancel_);
    } catch (const std::exception& e) {   // out of memory, a folder the walk could not handle
      report.problems.push_back(std::string("the library scan stopped: ") + e.what());
    }
    nlohmann::json saved = library_.saved();
    std::lock_guard lock(mutex_);
    state_.saved = std::move(saved);
    state_.problems = report.problems;
    state_.scanning = false;
    ++state_.generation;
    report.cards.clear();
    state_.last = std::move(report);
  });
}

uint64_t LibraryScanner::generation() const {
  std::lock_guard lock(mutex_);
  return state_.generation;
}

LibrarySnapshot LibraryScanner::snapshot() const {
  std::lock_guard lock(mutex_);
  return state_;
}

}  // namespace kvdesk::library
