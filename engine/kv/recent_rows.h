// RecentRows: a sequence's newest K and V rows kept in f32 beside their quantized copies in
// the paged blocks, so that attention reads them exact (kernels/attention.h, recent_k). A
// query's error over 8-bit or 4-bit KV comes mostly from the few keys it attends most, and in
// a language model those are mostly its newest ones: on stories260K, reading the newest 16
// rows exact takes int4 KV's mean KL from f32 KV from 5.5e-2 to 5.0e-3 (KIVI's "residual" of
// full-precision recent tokens, here beside the quantized rows instead of in place of them).
// The blocks still hold every row quantized, so sharing, the prefix cache, swapping and saved
// KV are as without it; a sequence whose rows came from elsewhere (a cached prefix, a saved
// conversation) reads those as stored until newer rows replace them here.
//
// Rows are numbered by cache slot (a position minus the positions KV retention dropped).
// Invariants, per layer: the kept rows are the consecutive slots [begin, end), at most
// `capacity` of them, slot s in ring entry s % capacity; each is exactly the row the forward
// quantized into that slot.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvdesk {

// Bytes of `rows` kept rows of K and V per layer: what a sequence's RecentRows takes once used.
constexpr size_t recent_rows_bytes(int32_t rows, int32_t num_layers, int32_t row_floats) {
  return 2 * sizeof(float) * size_t(rows) * size_t(num_layers) * size_t(row_floats);
}

class RecentRows {
 public:
  RecentRows() = default;
  // capacity rows per layer of row_floats floats (kv heads x head dim); capacity 0 keeps none.
  RecentRows(int32_t capacity, int32_t num_layers, int32_t row_floats);

  int32_t row_floats() const { return row_floats_; }
  // Slots [begin(layer), end(layer)) are kept.
  int32_t begin(int32_t layer) const { return ranges_.empty() ? 0 : ranges_[size_t(layer)].begin; }
  int32_t end(int32_t layer) const { return ranges_.empty() ? 0 : ranges_[size_t(layer)].end; }

  // Layer's rows of slots [first, first + count), k and v [count][stride] (row_floats used):
  // they replace the kept rows from slot `first` on; rows before it stay if they are
  // consecutive with it. Memory is taken at the first store.
  void store(int32_t layer, int32_t first, int32_t count, const float* k, const float* v, int64_t stride);
  // Copies the kept rows of slots [max(from, begin), end) into k and v [rows][row_floats] when
  // they run up to `end` (end <= end(layer)); returns the first slot copied (end when none).
  int32_t gather(int32_t layer, int32_t from, int32_t end, float* k, float* v) const;
  // Keeps only rows of slots before `slots`: a fork of a sequence's first tokens, or KV
  // retention moved the rows from there on.
  void truncate(int32_t slots);
  size_t bytes() const { return k_.empty() ? 0 : recent_rows_bytes(capacity_, num_layers_, row_floats_); }

 private:
  struct Range {
    int32_t begin = 0;
    int32_t end = 0;
  };
  // Where slot's ring entry of layer starts in k_ and v_.
  size_t offset(int32_t layer, int32_t slot) const;

  int32_t capacity_ = 0;
  int32_t num_layers_ = 0;
  int32_t row_floats_ = 0;
  std::vector<Range> ranges_;   // [num_layers]
  std::vector<float> k_;        // [num_layers][capacity][row_floats], empty until the first store
  std::vector<float> v_;        // [num_layers][capacity][row_floats]
};

}  // namespace kvdesk
