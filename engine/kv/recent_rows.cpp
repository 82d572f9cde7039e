// RecentRows: the ring of each layer's newest f32 rows.
#include "engine/kv/recent_rows.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"

namespace kvdesk {

RecentRows::RecentRows(int32_t capacity, int32_t num_layers, int32_t row_floats)
    : capacity_(capacity), num_layers_(num_layers), row_floats_(row_floats) {
  KVDESK_ASSERT(capacity >= 0 && num_layers > 0 && row_floats > 0);
  if (capacity > 0) ranges_.resize(size_t(num_layers));
}

size_t RecentRows::offset(int32_t layer, int32_t slot) const {
  return (size_t(layer) * size_t(capacity_) + size_t(slot % capacity_)) * size_t(row_floats_);
}

void RecentRows::store(int32_t layer, int32_t first, int32_t count, const float* k, const float* v, int64_t stride) {
  if (capacity_ == 0 || count <= 0) return;
  KVDESK_ASSERT(layer >= 0 && layer < num_layers_ && first >= 0 && stride >= row_floats_);
  if (k_.empty()) {
    k_.assign(size_t(num_layers_) * size_t(capacity_) * size_t(row_floats_), 0.0f);
    v_.assign(k_.size(), 0.0f);
  }
  Range& range = ranges_[size_t(layer)];
  if (first < range.begin || first > range.end) range.begin = first;
  // Only the last `capacity` rows of the run are kept: earlier ones would be overwritten.
  for (int32_t i = std::max(0, count - capacity_); i < count; ++i) {
    std::memcpy(k_.data() + offset(layer, first + i), k + i * stride, sizeof(float) * size_t(row_floats_));
    std::memcpy(v_.data() + offset(layer, first + i), v + i * stride, sizeof(float) * size_t(row_floats_));
  }
  range.end = first + count;
  range.begin = std::max(range.begin, range.end - capacity_);
}

int32_t RecentRows::gather(int32_t layer, int32_t from, int32_t end, float* k, float* v) const {
  if (capacity_ == 0) return end;
  const Range& range = ranges_[size_t(layer)];
  if (end > range.end || end < range.begin) return end;
  const int32_t start = std::max(from, range.begin);
  for (int32_t slot = start; slot < end; ++slot) {
    const size_t row = size_t(slot - start) * size_t(row_floats_);
    std::memcpy(k + row, k_.data() + offset(layer, slot), sizeof(float) * size_t(row_floats_));
    std::memcpy(v + row, v_.data() + offset(layer, slot), sizeof(float) * size_t(row_floats_));
  }
  return start;
}

void RecentRows::truncate(int32_t slots) {
  for (Range& range : ranges_) {
    range.end = std::min(range.end, slots);
    range.begin = std::min(range.begin, range.end);
  }
}

}  // namespace kvdesk
