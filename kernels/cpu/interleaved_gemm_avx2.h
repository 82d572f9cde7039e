// Internal, included only by the AVX2 GEMMs over 8-row interleaved weights (kernels/
// weight_repack.h): the loops they share. A tile is one group of 8 rows (a few, for narrow
// batches) x C activation rows; its accumulators hold one output row per float lane, stored as 8
// floats a group with no horizontal sum. Row groups go in L2-sized blocks, and inside each block
// the act rows walk the groups kTileActs at a time; narrower batches (decode) stream the groups
// in a few runs side by side.
//
// A kernel K supplies:
//   using Block;                                 one block of the group's 8 rows
//   static constexpr GgmlType kType;             the interleaved type
//   static constexpr GgmlType kRowType;          ggml's type of the rows before interleaving
//   static constexpr int64_t kBlockValues;       values per row in one block
//   template <int C> static void step(const Block&, const char* acts, size_t a_stride,
//                                     int64_t j, __m256 (&acc)[C]);   block j x every act row
// and sizes its step so that kTileActs act rows fit the 16 ymm registers. A kernel whose step
// unpacks each block before its act rows may split it in two (KeepsUnpacked):
//   struct Unpacked;                             a block as its act rows use it, alignas(64)
//   static void unpack(const Block&, Unpacked&);
//   template <int C> static void step_unpacked(const Unpacked&, const Block&, const char* acts,
//                                              size_t a_stride, int64_t j, __m256 (&acc)[C]);
// and the first full tile of a row block then keeps what it unpacks for the tiles after it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/pack_scratch.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/weight_repack.h"

namespace kvdesk {
namespace {

constexpr int kTileActs = 4;
// Weight bytes of a row block that stays in L2 while the whole batch streams past it.
constexpr size_t kRowBlockBytes = 256 * 1024;

// v pinned where it was computed: GCC cannot move code across an empty asm that reads and
// writes it. Without it GCC 12 defers a block's madd-and-adds per act row to the block's end and
// spills their operands to the stack (Q5_Kx8: 16 a super-block, Q6_Kx8: 32, IQ4_XSx8: 64).
ALWAYS_INLINE void pin_register(__m256i& v) { __asm__("" : "+x"(v)); }

// The bits of every byte of v that `mask` keeps after a shift right by `shift`: a 16-bit shift,
// whose bits crossing from the next byte the mask drops.
ALWAYS_INLINE __m256i shifted_bits(__m256i v, int shift, char mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(mask));
}

// Four activation bytes in every 32-bit lane: the operand one maddubs pairs with a chunk of
// 4 values x 8 rows.
ALWAYS_INLINE __m256i broadcast_4_bytes(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Bytes 8h .. 8h + 7 of v (one sub-block's scales of the 8 rows, h = 0 or 1) each twice: widened
// to 16 bits, row r's scale fills lanes 2r and 2r + 1, the pair a madd meets with row r's sums.
ALWAYS_INLINE __m128i row_bytes_twice(__m128i v, int h) {
  return _mm_shuffle_epi8(v, h == 0 ? _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)
                                    : _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
}

// Two sub-blocks' bytes of the 8 rows side by side: bytes r and 8 + r of v at 2r and 2r + 1.
ALWAYS_INLINE __m128i row_bytes_zipped(__m128i v) {
  return _mm_shuffle_epi8(v, _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
}

// How far ahead of the block in use a tile that streams its groups from memory (a narrow batch:
// decode of 1 to 3 sequences) prefetches its weights. The hardware prefetchers alone keep too few
// lines in flight for it: on a Zen 3 (AVX2, 2 cores, ~30 GB/s) the 2-thread GEMV, then reading
// one stream, ran at 75-79% of the read bandwidth for Q4_0x8 without software prefetch and 88-97%
// with it 2 KiB ahead (4 and 8 KiB no better), Q6_Kx8 (its block then read out of address order)
// at half the rate without it; on the Intel AVX-512 machine 1, 3 and 4 KiB were no better for the
// four streams below. The first full tile of each row block (row_block_tiles) reads it from
// memory too and prefetches; the tiles after it read the block from L2, where the prefetches
// would only cost instructions (2-4% of prefill), so they issue none.
constexpr uintptr_t kPrefetchBytes = 2048;

// Narrow batches (fewer than kTileActs act rows: decode of 1 to 3 sequences) read every weight
// once, from memory. Their groups are cut into equal runs and each tile takes one group of every
// run, so a call reads several sequential streams at once: 4 for one act row, as the AVX-512 row
// kernels' segmented GEMV (kernels/cpu/tile_driver.h), 2 for two, 1 for three, so that a tile of
// S streams x C act rows keeps S * C <= kTileActs accumulators, the full tile's register budget.
// On the Intel AVX-512 machine (2 threads, matrices larger than the caches) the Q4_0x8 GEMV read
// 22-23 GB/s from one stream and 34-39 from four on the AVX2 tier, 21-26 and 40-43 on AVX-VNNI.
constexpr int kDecodeStreams = 4;
static_assert(kDecodeStreams <= kTileActs, "one act row's streams fit the full tile's accumulators");

constexpr int streams_for(int acts) { return kDecodeStreams / acts > 1 ? kDecodeStreams / acts : 1; }

template <class K>
concept KeepsUnpacked = requires(const typename K::Block& b, typename K::Unpacked& u) { K::unpack(b, u); };

// Where a tile's unpacked blocks come from (KeepsUnpacked kernels): unpacked and dropped (decode,
// single tiles), unpacked and kept for the act tiles after it (the first full tile of a row
// block), or read as that tile kept them, which saves the later tiles the unpacking (Q4_0x8:
// 4 loads and 12 vector operations a block, per 4 act rows).
enum class Unpacked { kDrop, kKeep, kReuse };

// Block j of one group against every act row of the tile, unpacked and kept (kKeep) or read as
// kept (kReuse); kept: the group's unpacked blocks.
template <class K, int C, Unpacked kMode>
ALWAYS_INLINE void group_step(const typename K::Block& b, const char* acts, size_t a_stride, int64_t j,
                              typename K::Unpacked* kept, __m256 (&acc)[C]) {
  if constexpr (kMode == Unpacked::kKeep) K::unpack(b, kept[j]);
  K::template step_unpacked<C>(kept[j], b, acts, a_stride, j, acc);
}

// y[s][t * ld_y + r] for the 8 rows r of each of the S groups and act rows t < C, over all blocks;
// kStreamed: the weights come from memory, prefetched (else from L2, where a full tile left them).
// kMode other than kDrop: one group (S = 1) whose unpacked blocks `kept` holds.
template <class K, int S, int C, bool kStreamed, Unpacked kMode = Unpacked::kDrop>
void interleaved_tile(const typename K::Block* const (&groups)[S], float* const (&y)[S], const char* acts,
                      size_t a_stride, int64_t blocks, int64_t ld_y, void* kept = nullptr) {
  static_assert(kMode == Unpacked::kDrop || S == 1, "a tile that keeps its blocks has one group");
  __m256 acc[S][C];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) acc[s][t] = _mm256_setzero_ps();
  }
  for (int64_t j = 0; j < blocks; ++j) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      if constexpr (kStreamed) prefetch_block_ahead(groups[s] + j, kPrefetchBytes);
      if constexpr (kMode == Unpacked::kDrop) {
        K::template step<C>(groups[s][j], acts, a_stride, j, acc[s]);
      } else {
        group_step<K, C, kMode>(groups[s][j], acts, a_stride, j, static_cast<typename K::Unpacked*>(kept), acc[s]);
      }
      // Each stream's step whole before the next's: GCC otherwise schedules the unrolled steps
      // into each other, keeps several streams' unpacked scales live and spills them (Q4_Kx8: 117
      // stack accesses a super-block, 24 with this barrier, 26 with one stream).
      if constexpr (S > 1) __asm__ __volatile__("" ::: "memory");
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) _mm256_storeu_ps(y[s] + t * ld_y, acc[s][t]);
  }
}

// The S groups first + s * stride (s < S) against act rows [c, c + C), as one tile.
template <class K, int S, int C, bool kStreamed, Unpacked kMode = Unpacked::kDrop>
void strided_tile(const MatmulArgs& args, size_t a_stride, int64_t c, int64_t first, int64_t stride,
                  void* kept = nullptr) {
  const int64_t blocks = args.n / K::kBlockValues;
  const typename K::Block* groups[S];
  float* group_y[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    const int64_t g = first + s * stride;
    groups[s] = static_cast<const typename K::Block*>(args.weights) + g * blocks;
    group_y[s] = args.y + c * args.ld_y + g * kInterleavedRows;
  }
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(c) * a_stride;
  interleaved_tile<K, S, C, kStreamed, kMode>(groups, group_y, acts, a_stride, blocks, args.ld_y, kept);
}

// Groups [g_begin, g_end) one at a time against act rows [c, c + C), their unpacked blocks kept
// (kKeep) or read (kReuse) at kept: the row block's groups from g_begin on.
template <class K, int C, bool kStreamed, Unpacked kMode>
void kept_groups(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end, int64_t c,
                 typename K::Unpacked* kept) {
  const int64_t blocks = args.n / K::kBlockValues;
  for (int64_t g = g_begin; g < g_end; ++g) {
    strided_tile<K, 1, C, kStreamed, kMode>(args, a_stride, c, g, 1, kept + (g - g_begin) * blocks);
  }
}

// Groups [g_begin, g_end) against act rows [c, c + C): cut into S equal runs read side by side,
// and the fewer than S groups past the last whole run side by side in one tile.
template <class K, int S, int C, bool kStreamed>
void interleaved_groups(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end, int64_t c) {
  const int64_t run = (g_end - g_begin) / S;
  for (int64_t i = 0; i < run; ++i) strided_tile<K, S, C, kStreamed>(args, a_stride, c, g_begin + i, run);
  static_assert(S <= 4, "the groups past the runs are at most 3");
  const int64_t rest_begin = g_begin + S * run;
  const int64_t rest = g_end - rest_begin;
  if constexpr (S > 3) {
    if (rest == 3) return strided_tile<K, 3, C, kStreamed>(args, a_stride, c, rest_begin, 1);
  }
  if constexpr (S > 2) {
    if (rest == 2) return strided_tile<K, 2, C, kStreamed>(args, a_stride, c, rest_begin, 1);
  }
  if (rest == 1) strided_tile<K, 1, C, kStreamed>(args, a_stride, c, rest_begin, 1);
}

// The act rows [c, batch), fewer than kTileActs, in tiles of that width: streamed from memory
// when they are the whole batch (kStreamed), one group at a time after full tiles, reading the
// blocks those kept where the kernel keeps them (kept; null only when no act rows are left).
template <class K, bool kStreamed>
void interleaved_rest(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end, int64_t c,
                      void* kept = nullptr) {
  if constexpr (KeepsUnpacked<K> && !kStreamed) {
    auto* unpacked = static_cast<typename K::Unpacked*>(kept);
    switch (args.batch - c) {
      case 1: return kept_groups<K, 1, false, Unpacked::kReuse>(args, a_stride, g_begin, g_end, c, unpacked);
      case 2: return kept_groups<K, 2, false, Unpacked::kReuse>(args, a_stride, g_begin, g_end, c, unpacked);
      case 3: return kept_groups<K, 3, false, Unpacked::kReuse>(args, a_stride, g_begin, g_end, c, unpacked);
      default: return;
    }
  }
  constexpr auto streams = [](int acts) { return kStreamed ? streams_for(acts) : 1; };
  switch (args.batch - c) {
    case 1: return interleaved_groups<K, streams(1), 1, kStreamed>(args, a_stride, g_begin, g_end, c);
    case 2: return interleaved_groups<K, streams(2), 2, kStreamed>(args, a_stride, g_begin, g_end, c);
    case 3: return interleaved_groups<K, streams(3), 3, kStreamed>(args, a_stride, g_begin, g_end, c);
    default: return;
  }
}

// The full tiles of one row block [g_begin, g_end), then the narrower rest: the first reads the
// block from memory, the others from L2 or, where the kernel keeps its unpacked blocks, from the
// per-thread buffer the first filled. A batch of one full tile keeps nothing.
template <class K>
void row_block_tiles(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end) {
  if constexpr (KeepsUnpacked<K>) {
    if (args.batch > kTileActs) {
      thread_local PackScratch<typename K::Unpacked> scratch;
      auto* kept = scratch.get(static_cast<size_t>((g_end - g_begin) * (args.n / K::kBlockValues)));
      kept_groups<K, kTileActs, true, Unpacked::kKeep>(args, a_stride, g_begin, g_end, 0, kept);
      int64_t c = kTileActs;
      for (; c + kTileActs <= args.batch; c += kTileActs) {
        kept_groups<K, kTileActs, false, Unpacked::kReuse>(args, a_stride, g_begin, g_end, c, kept);
      }
      return interleaved_rest<K, false>(args, a_stride, g_begin, g_end, c, kept);
    }
  }
  int64_t c = 0;
  for (; c + kTileActs <= args.batch; c += kTileActs) {
    if (c == 0) {
      interleaved_groups<K, 1, kTileActs, true>(args, a_stride, g_begin, g_end, c);
    } else {
      interleaved_groups<K, 1, kTileActs, false>(args, a_stride, g_begin, g_end, c);
    }
  }
  interleaved_rest<K, false>(args, a_stride, g_begin, g_end, c);
}

// Rows [row_begin, row_end) (whole groups) of y = W x acts: a narrow batch streams them all at
// once; wider ones walk L2-sized row blocks, inside each the act rows kTileActs at a time. The
// first tile of a block reads it from memory, with prefetch: a prompt of 32 tokens (8 tiles
// a block) waited on those reads, and prefetching them raised TinyLlama-shaped prefill of 32
// tokens by 11-13% for Q4_0 and 7-8% for Q8_0 on every tier, the AVX-512 pair tiles included
// (128 and 512 tokens within the noise; Q4_K_M, heavier per byte, unchanged; docs/PERFORMANCE.md).
template <class K>
void interleaved_matmul(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  KVDESK_ASSERT(args.weight_type == K::kType && row_begin % kInterleavedRows == 0 && row_end % kInterleavedRows == 0);
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const int64_t g_begin = row_begin / kInterleavedRows;
  const int64_t g_end = row_end / kInterleavedRows;
  if (args.batch < kTileActs) return interleaved_rest<K, true>(args, a_stride, g_begin, g_end, 0);
  const size_t group_bytes = kInterleavedRows * ggml_row_bytes(K::kRowType, args.n);
  const int64_t block_groups = group_bytes < kRowBlockBytes ? static_cast<int64_t>(kRowBlockBytes / group_bytes) : 1;
  for (int64_t gb = g_begin; gb < g_end; gb += block_groups) {
    row_block_tiles<K>(args, a_stride, gb, g_end - gb < block_groups ? g_end : gb + block_groups);
  }
}

}  // namespace
}  // namespace kvdesk
