// Internal, included only by the ISA translation units: walks a row range x activation batch in
// micro-kernel tiles. Everything here has internal linkage so each ISA keeps its own copy.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/check.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {
namespace {

// One micro-kernel call: R weight rows x C activation rows over all n values.
struct Tile {
  const char* w;              // first weight row
  size_t w_stride;            // bytes between the tile's weight rows
  const char* a;              // first prepared activation row
  size_t a_stride;            // bytes between activation rows
  int64_t n;                  // values per row
  float* y;                   // y[c * ld_y + r * y_row_stride] = dot(row r, act c)
  int64_t ld_y;
  int64_t y_row_stride = 1;   // rows of y between the tile's rows
};

// Activation rows as a micro-kernel reads them: the prepared rows themselves, or the kernel's
// repacked copy of a few of them (K::pack_acts).
struct ActPanel {
  const char* rows;   // first activation row of the panel
  size_t stride;      // bytes between its rows
};

// A micro-kernel's float accumulators: acc[R][C] vectors (__m256 or __m512), one per weight row
// r and act c, set to zero before the tile and stored to y as the sums of their lanes.
template <class V, int R, int C>
ALWAYS_INLINE void zero_tile(V (&acc)[R][C]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) set_zero(acc[r][c]);
  }
}

template <class V, int R, int C>
ALWAYS_INLINE void store_tile(const Tile& t, V (&acc)[R][C]) {
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) t.y[c * t.ld_y + r * t.y_row_stride] = hsum(acc[r][c]);
  }
}

// Batch-1 tiles (decode's GEMV) prefetch each of their weight streams this far ahead of the
// bytes they read: the hardware prefetchers alone keep too few lines in flight for two cores to
// reach the memory bandwidth (AVX-512, TinyLlama-shaped decode, alternating with and without:
// Q4_0 84-88% -> 88-93% of the read bandwidth, Q8_0 86-87% -> 88-94%).
constexpr size_t kGemvPrefetchBytes = 2048;

// Prefetches the bytes [offset, offset + bytes) + kGemvPrefetchBytes of each of the tile's R
// weight rows (a prefetch past the matrix's end reads nothing and cannot fault).
template <int R>
ALWAYS_INLINE void prefetch_streams(const Tile& t, size_t offset, size_t bytes) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const char* ahead = t.w + static_cast<size_t>(r) * t.w_stride + offset + kGemvPrefetchBytes;
    for (size_t line = 0; line < bytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
  }
}

template <class T>
const T* row_at(const char* base, size_t stride, int i) {
  return reinterpret_cast<const T*>(base + static_cast<size_t>(i) * stride);
}

// A format whose decode_tile unpacks the scales of all R rows of a tile at once: one vector
// instruction then serves several rows (up to 4 on AVX-512, one per 128-bit lane), where a
// per-row decode spends the same instructions on each row.
template <class F, int R>
concept DecodesTile = requires(const typename F::Block* (&blocks)[R], typename F::Decoded (&dec)[R]) {
  F::template decode_tile<R>(blocks, dec);
};

// Block j of each of the tile's R weight rows, and its unpacked scales: F::decode_tile for the
// whole tile where the format has it, else F::decode row by row.
template <class F, int R>
ALWAYS_INLINE void decode_rows(const Tile& t, int64_t j, const typename F::Block* (&blocks)[R],
                               typename F::Decoded (&dec)[R]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) blocks[r] = &row_at<typename F::Block>(t.w, t.w_stride, r)[j];
  if constexpr (DecodesTile<F, R>) {
    F::template decode_tile<R>(blocks, dec);
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) dec[r] = F::decode(*blocks[r]);
  }
}

// A micro-kernel K provides: kGemvRows (rows per tile when batch == 1), kRows x kActs (the
// tile for batches), template <int R, int C> static void tile(const Tile&), and
// static ActPanel pack_acts(const MatmulArgs&, size_t a_stride, int64_t first, int count)
// (UnpackedActs, below, for kernels that read the prepared rows as they are).
template <class K, int R, int C>
void run_tile(const MatmulArgs& args, size_t w_stride, ActPanel acts, int64_t r, int64_t c) {
  const Tile t{static_cast<const char*>(args.weights) + static_cast<size_t>(r) * w_stride, w_stride,
               acts.rows, acts.stride, args.n, args.y + c * args.ld_y + r, args.ld_y};
  K::template tile<R, C>(t);
}

// Rows [r_begin, r_end) in tiles of R (single rows for the rest) against acts [c, c + C).
template <class K, int R, int C>
void run_rows(const MatmulArgs& args, size_t w_stride, ActPanel acts, int64_t r_begin, int64_t r_end,
              int64_t c) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) run_tile<K, R, C>(args, w_stride, acts, r, c);
  for (; r < r_end; ++r) run_tile<K, 1, C>(args, w_stride, acts, r, c);
}

// Weight bytes of a row block that stays in L2 while the whole batch streams past it.
constexpr size_t kRowBlockBytes = 256 * 1024;

// Rows of one row block: as many whole kRows tiles as fit in kRowBlockBytes, at least one.
template <class K>
int64_t row_block_rows(size_t w_stride) {
  const int64_t fit = w_stride > 0 ? static_cast<int64_t>(kRowBlockBytes / w_stride) : 0;
  return fit > K::kRows ? fit / K::kRows * K::kRows : K::kRows;
}

// Batch 1 (decode): rows [row_begin, row_end) cut into R equal contiguous segments, and tile t
// takes row t of every segment, so each of the R load streams of the micro-kernel runs
// sequentially through memory. (R rows side by side would be R streams restarting every
// tile, which the hardware prefetchers follow poorly: half the bandwidth.)
template <class K>
void gemv_segmented(const MatmulArgs& args, size_t w_stride, ActPanel acts, int64_t row_begin,
                    int64_t row_end) {
  constexpr int R = K::kGemvRows;
  const int64_t segment = (row_end - row_begin) / R;
  for (int64_t r = row_begin; r < row_begin + segment; ++r) {
    const Tile t{static_cast<const char*>(args.weights) + static_cast<size_t>(r) * w_stride,
                 w_stride * static_cast<size_t>(segment), acts.rows, acts.stride, args.n, args.y + r,
                 args.ld_y, segment};
    K::template tile<R, 1>(t);
  }
  run_rows<K, 1, 1>(args, w_stride, acts, row_begin + segment * R, row_end, 0);
}

// The last count < kActs act rows of a batch, from act c, as one tile of that width over rows
// [rb, re): each weight block is decoded once for all of them (decode of 2 to kActs - 1
// sequences, a prompt's last rows), not once per act row.
template <class K, int C = K::kActs - 1>
void run_rest(const MatmulArgs& args, size_t w_stride, size_t a_stride, int64_t rb, int64_t re, int64_t c,
              int count) {
  if constexpr (C > 0) {
    if (count != C) return run_rest<K, C - 1>(args, w_stride, a_stride, rb, re, c, count);
    run_rows<K, K::kRows, C>(args, w_stride, K::pack_acts(args, a_stride, c, C), rb, re, c);
  }
}

// y[b * ld_y + r] = dot(W[r], A[b]) for r in [row_begin, row_end), b in [0, batch).
// batch 1 streams the rows (segmented GEMV); larger batches walk L2-sized row blocks, and
// inside each, act chunks of kActs stay in L1 while tiles of kRows rows go by, the last chunk
// as wide as the acts left.
template <class K>
void matmul_tiled(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  const size_t w_stride = ggml_row_bytes(args.weight_type, args.n);
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  if (args.batch == 1) {
    gemv_segmented<K>(args, w_stride, K::pack_acts(args, a_stride, 0, 1), row_begin, row_end);
    return;
  }
  const int64_t block_rows = row_block_rows<K>(w_stride);
  for (int64_t rb = row_begin; rb < row_end; rb += block_rows) {
    const int64_t re = row_end - rb < block_rows ? row_end : rb + block_rows;
    int64_t c = 0;
    for (; c + K::kActs <= args.batch; c += K::kActs) {
      const ActPanel acts = K::pack_acts(args, a_stride, c, K::kActs);
      run_rows<K, K::kRows, K::kActs>(args, w_stride, acts, rb, re, c);
    }
    if (c < args.batch) run_rest<K>(args, w_stride, a_stride, rb, re, c, static_cast<int>(args.batch - c));
  }
}

// One weight row x one act row, as a one-row matmul.
template <class K>
float dot_one(GgmlType type, const void* w_row, const void* act_row, int64_t n) {
  float y = 0.0f;
  const MatmulArgs args{type, w_row, n, act_row, 1, &y, 1};
  matmul_tiled<K>(args, 0, 1);
  return y;
}

// The pack_acts of micro-kernels that read the prepared rows as they are (they derive from it).
struct UnpackedActs {
  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int) {
    return ActPanel{static_cast<const char*>(args.acts) + static_cast<size_t>(first) * a_stride, a_stride};
  }
};

// ---- entry points from one list of kernels ---------------------------------------------------

// Weight type T served by the micro-kernel K of this translation unit.
template <GgmlType T, class K>
struct Serves {
  static constexpr GgmlType kType = T;
  static float vec_dot(GgmlType type, const void* w_row, const void* act_row, int64_t n) {
    return dot_one<K>(type, w_row, act_row, n);
  }
  static void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
    matmul_tiled<K>(args, row_begin, row_end);
  }
};

// Weight type T served by another translation unit, through the vec_dot and matmul_rows of its
// table `Entries`.
template <GgmlType T, const auto& Entries>
struct HandsOff {
  static constexpr GgmlType kType = T;
  static float vec_dot(GgmlType type, const void* w_row, const void* act_row, int64_t n) {
    return Entries.vec_dot(type, w_row, act_row, n);
  }
  static void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
    Entries.matmul_rows(args, row_begin, row_end);
  }
};

// Weight type T in an interleaved layout (kernels/weight_repack.h), served by Matmul. Its rows
// are not contiguous, so there is no single-row dot: callers use matmul_rows.
template <GgmlType T, void (*Matmul)(const MatmulArgs&, int64_t, int64_t)>
struct Interleaved {
  static constexpr GgmlType kType = T;
  static float vec_dot(GgmlType, const void*, const void*, int64_t) {
    KVDESK_ASSERT(!"vec_dot: an interleaved weight layout has no single rows");
    return 0.0f;
  }
  static void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
    Matmul(args, row_begin, row_end);
  }
};

// vec_dot and matmul_rows of a kernel table: the entry (Serves / HandsOff) whose kType is the
// weight type takes the call; a type no entry serves is a bug of the caller. The type is
// matched once per call, outside the micro-kernels' loops.
template <class Entry, class... Rest>
struct KernelTable {
  static float vec_dot(GgmlType type, const void* w_row, const void* act_row, int64_t n) {
    if (type == Entry::kType) return Entry::vec_dot(type, w_row, act_row, n);
    if constexpr (sizeof...(Rest) > 0) {
      return KernelTable<Rest...>::vec_dot(type, w_row, act_row, n);
    } else {
      KVDESK_ASSERT(!"vec_dot: no kernel in this table for the weight type");
      return 0.0f;
    }
  }
  static void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
    if (args.weight_type == Entry::kType) return Entry::matmul_rows(args, row_begin, row_end);
    if constexpr (sizeof...(Rest) > 0) {
      KernelTable<Rest...>::matmul_rows(args, row_begin, row_end);
    } else {
      KVDESK_ASSERT(!"matmul_rows: no kernel in this table for the weight type");
    }
  }
};

}  // namespace
}  // namespace kvdesk
