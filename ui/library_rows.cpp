// Library rows: filter, then a stable sort on the chosen column.
#include "ui/library_rows.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace kvdesk::ui {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool keeps(const LibraryEntryView& e, const LibraryQuery& q, const std::string& text) {
  if (!q.arch.empty() && e.arch != q.arch) return false;
  if (q.max_size_bytes > 0 && e.size_bytes > q.max_size_bytes) return false;
  return text.empty() || lower(e.name).find(text) != std::string::npos || lower(e.path).find(text) != std::string::npos;
}

// Negative, zero or positive as a sorts before, with or after b on the column.
int compare(const LibraryEntryView& a, const LibraryEntryView& b, LibraryColumn column) {
  auto order = [](const auto& x, const auto& y) { return x < y ? -1 : y < x ? 1 : 0; };
  switch (column) {
    case LibraryColumn::Name: return order(lower(a.name), lower(b.name));
    case LibraryColumn::Source: return order(a.source, b.source);
    case LibraryColumn::Size: return order(a.size_bytes, b.size_bytes);
    case LibraryColumn::Arch: return order(a.arch, b.arch);
    case LibraryColumn::Params: return order(a.params, b.params);
    case LibraryColumn::WeightType: return order(a.weight_type, b.weight_type);
    case LibraryColumn::Context: return order(a.context_length, b.context_length);
    case LibraryColumn::Template: return order(a.chat_template, b.chat_template);
    case LibraryColumn::Fits: return order(f16_context(a), f16_context(b));
  }
  return 0;
}

}  // namespace

int64_t f16_context(const LibraryEntryView& entry) {
  for (const LibraryFitView& f : entry.fits) {
    if (f.kv_type == "f16") return f.max_context;
  }
  return 0;
}

std::vector<int32_t> library_rows(const std::vector<LibraryEntryView>& entries, const LibraryQuery& query) {
  const std::string text = lower(query.text);
  std::vector<int32_t> rows;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (keeps(entries[i], query, text)) rows.push_back(int32_t(i));
  }
  std::stable_sort(rows.begin(), rows.end(), [&](int32_t a, int32_t b) {
    const int c = compare(entries[size_t(a)], entries[size_t(b)], query.sort);
    return query.ascending ? c < 0 : c > 0;
  });
  return rows;
}

std::vector<std::string> library_architectures(const std::vector<LibraryEntryView>& entries) {
  std::set<std::string> archs;
  for (const LibraryEntryView& e : entries) {
    if (!e.arch.empty()) archs.insert(e.arch);
  }
  return {archs.begin(), archs.end()};
}

}  // namespace kvdesk::ui
