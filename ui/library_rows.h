// Which library models the Library view lists, in which order: its filters (text in the name
// or path, an architecture, a largest file size) and the column it is sorted by. Plain data in,
// indices out, so the choice is tested without a window.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ui/view_model.h"

namespace kvdesk::ui {

enum class LibraryColumn : uint8_t { Name, Source, Size, Arch, Params, WeightType, Context, Template, Fits };

struct LibraryQuery {
  std::string text;               // case-insensitive, in the name or the path; "": any
  std::string arch;               // "": any
  uint64_t max_size_bytes = 0;    // 0: any
  LibraryColumn sort = LibraryColumn::Name;
  bool ascending = true;
};

// Indices into entries of the models the query keeps, in its order; ties keep the scan's order.
std::vector<int32_t> library_rows(const std::vector<LibraryEntryView>& entries, const LibraryQuery& query);

// The architectures present, sorted, without repeats (the filter's choices).
std::vector<std::string> library_architectures(const std::vector<LibraryEntryView>& entries);

// The longest context at f16 KV, the sort key of the Fits column (0 when it cannot run).
int64_t f16_context(const LibraryEntryView& entry);

}  // namespace kvdesk::ui
