// ModelLibrary: the cards of every model under the library's roots, kept between scans. A scan
// walks the roots again (cheap: folder listings and stats) but re-reads a model's headers only
// when one of its files changed size or modification time, or is new, so a library of hundreds
// of files on a slow disk costs one read per changed model. Cards of models no longer found
// are dropped.
//
// LibraryScanner runs scans on a thread of its own and hands the cards over as they are ready,
// so a window never waits for a disk.
#pragma once
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/library/model_card.h"
#include "app/library/model_sources.h"

namespace kvdesk::library {

struct ScanReport {
  std::vector<ModelCard> cards;        // [models] in find_models order
  std::vector<std::string> problems;   // from find_models
  int32_t read = 0;                    // models whose headers were read this scan
  int32_t reused = 0;                  // models whose files had not changed
  double seconds = 0;
};

class ModelLibrary {
 public:
  // Finds the models under roots and returns their cards; on_card, when given, sees each card
  // as it is ready. cancel, when set, ends the scan early with the cards so far.
  ScanReport scan(const std::vector<SourceRoot>& roots, const std::function<void(const ModelCard&)>& on_card = {},
                  const std::atomic<bool>* cancel = nullptr);

  // The cards with the stamps they were read at, as JSON to keep between runs (the app keeps it
  // in its database), and back: a restored card stands for its files while their size and
  // modification time are unchanged. A malformed entry is skipped (its model is read again);
  // never throws.
  nlohmann::json saved() const;
  void restore(const nlohmann::json& saved);

 private:
  struct FileStamp {
    uint64_t size = 0;
    int64_t modified_ns = 0;   // since the file clock's epoch (libstdc++'s lies in 2174: negative)
    bool readable = false;     // false: the file could not be stat'ed, so never taken as unchanged
    bool operator==(const FileStamp&) const = default;
  };
  struct Entry {
    std::vector<FileStamp> stamps;   // [files] of the card's model
    ModelCard card;
  };
  static std::vector<FileStamp> stamps_of(const FoundModel& model);

  std::map<std::string, Entry> entries_;   // by the model's name and first file
};

// What a LibraryScanner has found so far.
struct LibrarySnapshot {
  std::vector<ModelCard> cards;        // in the order found; during a scan, the cards read so far
  std::vector<std::string> problems;
  bool scanning = false;
  uint64_t generation = 0;             // grows with every change, so a view knows to rebuild
  ScanReport last;                     // the last finished scan's counts (cards not kept here)
  nlohmann::json saved;                // ModelLibrary::saved() after the last finished scan
};

class LibraryScanner {
 public:
  LibraryScanner() = default;
  ~LibraryScanner();
  LibraryScanner(const LibraryScanner&) = delete;
  LibraryScanner& operator=(const LibraryScanner&) = delete;

  // Starts a scan of roots on the scanner's thread; a scan still running is cancelled first.
  void rescan(std::vector<SourceRoot> roots);
  // Cards kept from an earlier run (ModelLibrary::saved), taken before the next scan reads
  // anything; waits for a running scan to stop first.
  void restore(const nlohmann::json& saved);
  LibrarySnapshot snapshot() const;
  // LibrarySnapshot::generation alone, cheap enough to ask every frame.
  uint64_t generation() const;

 private:
  void stop();

  ModelLibrary library_;   // touched only by the scan thread while it runs
  std::thread thread_;
  std::atomic<bool> cancel_{false};
  mutable std::mutex mutex_;
  LibrarySnapshot state_;  // guarded by mutex_
};

}  // namespace kvdesk::library
