// Internal, included only by the ISA translation units: walks a row range x activation batch in
// micro-kernel tiles. Everything here has internal linkage so each ISA keeps its own copy.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {
namespace {

// One micro-kernel call: R weight rows x C activation rows over all n values.
struct Tile {
  const char* w;       // first weight row
  size_t w_stride;     // bytes between weight rows
  const char* a;       // first prepared activation row
  size_t a_stride;     // bytes between activation rows
  int64_t n;           // values per row
  float* y;            // y[c * ld_y + r] = dot(row r, act c)
  int64_t ld_y;
};

template <class T>
const T* row_at(const char* base, size_t stride, int i) {
  return reinterpret_cast<const T*>(base + static_cast<size_t>(i) * stride);
}

// A micro-kernel K provides: kGemvRows (rows per tile when batch == 1), kRows x kActs (the
// tile for batches), and template <int R, int C> static void tile(const Tile&).
template <class K, int R, int C>
void run_tile(const MatmulArgs& args, size_t w_stride, size_t a_stride, int64_t r, int64_t c) {
  const Tile t{static_cast<const char*>(args.weights) + static_cast<size_t>(r) * w_stride, w_stride,
               static_cast<const char*>(args.acts) + static_cast<size_t>(c) * a_stride, a_stride,
               args.n, args.y + c * args.ld_y + r, args.ld_y};
  K::template tile<R, C>(t);
}

// Rows [r_begin, r_end) in tiles of R (single rows for the rest) against acts [c, c + C).
template <class K, int R, int C>
void run_rows(const MatmulArgs& args, size_t w_stride, size_t a_stride, int64_t r_begin,
              int64_t r_end, int64_t c) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) run_tile<K, R, C>(args, w_stride, a_stride, r, c);
  for (; r < r_end; ++r) run_tile<K, 1, C>(args, w_stride, a_stride, r, c);
}

// Weight bytes of a row block that stays in L2 while the whole batch streams past it.
constexpr size_t kRowBlockBytes = 256 * 1024;

// y[b * ld_y + r] = dot(W[r], A[b]) for r in [row_begin, row_end), b in [0, batch).
// batch 1 streams the rows (GEMV); larger batches walk L2-sized row blocks, and inside each,
// act chunks of kActs stay in L1 while tiles of kRows rows go by.
template <class K>
void matmul_tiled(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  const size_t w_stride = ggml_row_bytes(args.weight_type, args.n);
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  if (args.batch == 1) {
    run_rows<K, K::kGemvRows, 1>(args, w_stride, a_stride, row_begin, row_end, 0);
    return;
  }
  const int64_t fit = static_cast<int64_t>(kRowBlockBytes / w_stride) / K::kRows * K::kRows;
  const int64_t block_rows = fit > K::kRows ? fit : K::kRows;
  for (int64_t rb = row_begin; rb < row_end; rb += block_rows) {
    const int64_t re = row_end - rb < block_rows ? row_end : rb + block_rows;
    int64_t c = 0;
    for (; c + K::kActs <= args.batch; c += K::kActs) {
      run_rows<K, K::kRows, K::kActs>(args, w_stride, a_stride, rb, re, c);
    }
    for (; c < args.batch; ++c) run_rows<K, K::kRows, 1>(args, w_stride, a_stride, rb, re, c);
  }
}

// One weight row x one act row through the 1 x 1 tile.
template <class K>
float dot_one(const void* w_row, const void* act_row, int64_t n) {
  float y = 0.0f;
  const Tile t{static_cast<const char*>(w_row), 0, static_cast<const char*>(act_row), 0, n, &y, 1};
  K::template tile<1, 1>(t);
  return y;
}

}  // namespace
}  // namespace kvdesk
