// AVX-512 GEMMs over Q4_0x8 and Q8_0x8 weights (kernels/weight_repack.h) x Q8Act activation
// rows. A tile holds pairs of 8-row groups x C activation rows, a pair's groups in the low and the
// high 256 bits of its vectors: one 512-bit vpdpbusd does 16 rows x 4 values, twice the work of
// the 256-bit tiers' instruction, and each group's 8 results per act row are stored as they are,
// with no horizontal sum. Prefill pairs neighbouring groups; decode pairs groups of runs far apart
// (streamed_tiles). The weights enter vpdpbusd as u8, Q4_0's nibbles as they are
// and Q8_0's values offset by 128, and each block's integer sum starts at -offset * a.sum to take
// the offset back: the AVX-VNNI tier's integers, lane for lane, so the floats are too. In prefill
// the first act tile of each L2 row block keeps the weights it unpacks and the tiles after it
// read them back. A row range with an odd number of groups hands its last group to the AVX2
// kernel. Reached only through kAvx512Kernels.
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/pack_scratch.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/weight_repack.h"

namespace kvdesk {
namespace {

// Act rows per full tile (one pair): 8 weight vectors + 8 float accumulators + an integer sum, a
// broadcast and the row scales stay within the 32 zmm registers; narrower tiles of two pairs keep
// at most 2 x 7 accumulators. 8 measured faster than 4, 6, 10 and 12 (Q4_0, 128 act rows).
constexpr int kTileActs = 8;
// Weight bytes of a row block: its first act tile reads them from memory, and their unpacked
// copy (UnpackedBlock: Q4_0 twice the bytes, Q8_0 about the same) stays in L2 while the rest of
// the batch streams past it.
constexpr size_t kRowBlockBytes = 256 * 1024;
// How far ahead of the block in use a tile that streams its groups from memory (decode of 1 to
// kTileActs - 1 sequences, and the first act tile of each row block) prefetches each group's
// weights: as the 256-bit tiers (kernels/cpu/interleaved_gemm_avx2.h); 1 and 4 KiB measured
// slower here.
constexpr uintptr_t kPrefetchBytes = 2048;

ALWAYS_INLINE __m512i load_pair(const uint8_t* low, const uint8_t* high) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load_256(low)), load_256(high), 1);
}

// A weight format F of the tiles supplies:
//   using Block; kType, kRowType (ggml's type before interleaving), kOffset (what u8(w) adds to w)
//   unpack(low, high, w):  block j of both groups as 8 vectors of 4 values x 16 rows, u8(w)
//   chunk_acts(a, k):      the 4 act values chunk k of a block meets
//   odd_group:             the AVX2 kernel for a last unpaired group

// The 16 rows' fp16 scales as floats (both formats start with d[8]).
template <class Block>
ALWAYS_INLINE __m512 pair_scales(const Block& low, const Block& high) {
  const __m128i d_low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(low.d));
  const __m128i d_high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(high.d));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(d_low), d_high, 1));
}

struct Q4_0Pairs {
  using Block = BlockQ4_0x8;
  static constexpr GgmlType kType = GgmlType::Q4_0x8;
  static constexpr GgmlType kRowType = GgmlType::Q4_0;
  static constexpr int32_t kOffset = 8;
  static constexpr auto odd_group = &matmul_q4_0x8_avx2;

  // Chunk c's low nibbles (values 4c .. 4c + 3) in w[c], its high nibbles (values 16 + 4c ..) in
  // w[4 + c]: the codes 0..15 are w + 8.
  ALWAYS_INLINE static void unpack(const Block& low, const Block& high, __m512i (&w)[8]) {
    const __m512i nibble = _mm512_set1_epi8(15);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i raw = load_pair(low.qs + 32 * c, high.qs + 32 * c);
      w[c] = _mm512_and_si512(raw, nibble);
      w[4 + c] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
    }
  }
  ALWAYS_INLINE static const int8_t* chunk_acts(const BlockQ8Act& a, int k) {
    return a.qs + (k < 4 ? 4 * k : 16 + 4 * (k - 4));
  }
};

struct Q8_0Pairs {
  using Block = BlockQ8_0x8;
  static constexpr GgmlType kType = GgmlType::Q8_0x8;
  static constexpr GgmlType kRowType = GgmlType::Q8_0;
  static constexpr int32_t kOffset = 128;
  static constexpr auto odd_group = &matmul_q8_0x8_avx2;

  // Chunk c (values 4c .. 4c + 3) in w[c], w + 128 as u8: the sign bit flipped.
  ALWAYS_INLINE static void unpack(const Block& low, const Block& high, __m512i (&w)[8]) {
    const __m512i sign_bit = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const auto* l = reinterpret_cast<const uint8_t*>(low.qs + 32 * c);
      const auto* h = reinterpret_cast<const uint8_t*>(high.qs + 32 * c);
      w[c] = _mm512_xor_si512(load_pair(l, h), sign_bit);
    }
  }
  ALWAYS_INLINE static const int8_t* chunk_acts(const BlockQ8Act& a, int k) { return a.qs + 4 * k; }
};

// Four activation bytes in every 32-bit lane.
ALWAYS_INLINE __m512i broadcast_4_bytes(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// acc (16 rows) += fp16(d) * a.d * (dot - offset * a.sum) per row lane; dw = fp16(d). The integer
// sum starts at -offset * a.sum, so the offset costs no subtraction. (Made with one vpmaddwd
// from the dword holding a.sum and a.low_sum, it left the tile 5-10% slower: vpmaddwd takes a
// port vpdpbusd needs, where the scalar product and its broadcast do not.)
template <class F>
ALWAYS_INLINE void act_step(const __m512i (&w)[8], __m512 dw, const BlockQ8Act& a, __m512& acc) {
  __m512i dot = _mm512_set1_epi32(-F::kOffset * a.sum);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) dot = _mm512_dpbusd_epi32(dot, w[k], broadcast_4_bytes(F::chunk_acts(a, k)));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), acc);
}

// A range of groups of one matrix against act rows [c, c + C).
template <class F>
struct GroupRange {
  const MatmulArgs& args;
  size_t a_stride;
  int64_t c;
  int64_t blocks() const {
    static_assert(kQ4_0BlockValues == kQ8ActBlockValues && kQ8_0BlockValues == kQ8ActBlockValues);
    return args.n / kQ8ActBlockValues;
  }
  const typename F::Block* group(int64_t g) const {
    return static_cast<const typename F::Block*>(args.weights) + g * blocks();
  }
  float* y(int64_t g) const { return args.y + c * args.ld_y + g * kInterleavedRows; }
  const char* acts() const { return static_cast<const char*>(args.acts) + static_cast<size_t>(c) * a_stride; }
};

// The 2P groups of a tile and where their rows go: groups 2p and 2p + 1 share pair p's vectors
// (the low and the high 256 bits), and group i's 8 rows of act row t go to y[i] + t * ld_y.
template <class F, int P>
struct TileGroups {
  const typename F::Block* group[2 * P];
  float* y[2 * P];
};

// One block of a pair as the act steps use it: the 8 unpacked weight vectors and the 16 rows'
// scales.
struct alignas(64) UnpackedBlock {
  __m512i w[8];
  __m512 dw;
};

// Where a tile's unpacked weights come from: unpacked and dropped (decode, a batch of one full
// tile), unpacked and kept for the act tiles after it (the first tile of a row block), or loaded
// as that tile kept them, which saves the later tiles the unpacking: 16 vector operations a
// block of Q4_0 (12 of Q8_0), one eighth of the tile's.
enum class Unpacked { kDrop, kKeep, kReuse };

// The tile's 16P rows x act rows t < C, over all blocks; kStreamed: its weights come from memory,
// prefetched (else from L2, where earlier tiles left them). kept[p * blocks + j]: pair p's block
// j, written (kKeep) or read in place of the weights (kReuse).
template <class F, int P, int C, bool kStreamed, Unpacked kUnpacked = Unpacked::kDrop>
void pair_tile(const TileGroups<F, P>& tile, const GroupRange<F>& range, UnpackedBlock* kept = nullptr) {
  const int64_t blocks = range.blocks();
  const char* acts = range.acts();
  __m512 acc[P][C];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  for (int64_t j = 0; j < blocks; ++j) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m512i w[8];
      __m512 dw;
      if constexpr (kUnpacked == Unpacked::kReuse) {
        const UnpackedBlock& u = kept[p * blocks + j];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) w[k] = _mm512_load_si512(&u.w[k]);
        dw = _mm512_load_ps(&u.dw);
      } else {
        const typename F::Block& low = tile.group[2 * p][j];
        const typename F::Block& high = tile.group[2 * p + 1][j];
        if constexpr (kStreamed) {
          prefetch_block_ahead(&low, kPrefetchBytes);
          prefetch_block_ahead(&high, kPrefetchBytes);
        }
        F::unpack(low, high, w);
        dw = pair_scales(low, high);
        if constexpr (kUnpacked == Unpacked::kKeep) {
          UnpackedBlock& u = kept[p * blocks + j];
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) _mm512_store_si512(&u.w[k], w[k]);
          _mm512_store_ps(&u.dw, dw);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < C; ++t) {
        act_step<F>(w, dw, reinterpret_cast<const BlockQ8Act*>(acts + t * range.a_stride)[j], acc[p][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) {
      _mm256_storeu_ps(tile.y[2 * p] + t * range.args.ld_y, _mm512_castps512_ps256(acc[p][t]));
      _mm256_storeu_ps(tile.y[2 * p + 1] + t * range.args.ld_y, _mm512_extractf32x8_ps(acc[p][t], 1));
    }
  }
}

// Groups [g_begin, g_end) (an even count) in tiles of two neighbouring groups.
// kept: the row block's unpacked pairs from g_begin on (kKeep, kReuse).
template <class F, int C, bool kStreamed, Unpacked kUnpacked = Unpacked::kDrop>
void neighbour_tiles(const GroupRange<F>& range, int64_t g_begin, int64_t g_end, UnpackedBlock* kept = nullptr) {
  for (int64_t g = g_begin; g < g_end; g += 2) {
    const TileGroups<F, 1> tile{{range.group(g), range.group(g + 1)}, {range.y(g), range.y(g + 1)}};
    UnpackedBlock* pair_kept = kUnpacked == Unpacked::kDrop ? nullptr : kept + (g - g_begin) / 2 * range.blocks();
    pair_tile<F, 1, C, kStreamed, kUnpacked>(tile, range, pair_kept);
  }
}

// Narrow batches (decode) read every weight once, from memory: groups [g_begin, g_end) (an even
// count) cut into kStreams equal runs, each tile one group of every run (two pairs), so a call
// reads kStreams sequential streams at once, as many as the AVX-512 row kernels' segmented GEMV
// (kernels/cpu/tile_driver.h). One stream of neighbouring pairs kept 2 threads at 77-86% of the
// read bandwidth where four reach the row kernels' 88-95% (TinyLlama-shaped Q4_0 decode); 8 were
// slower. The groups past the last whole runs (none or one pair) go as neighbours.
constexpr int kStreams = 4;
static_assert(kStreams % 2 == 0, "the streams fill whole pairs");

template <class F, int C>
void streamed_tiles(const GroupRange<F>& range, int64_t g_begin, int64_t g_end) {
  const int64_t run = (g_end - g_begin) / kStreams;
  for (int64_t i = 0; i < run; ++i) {
    TileGroups<F, kStreams / 2> tile;
    for (int s = 0; s < kStreams; ++s) {
      tile.group[s] = range.group(g_begin + s * run + i);
      tile.y[s] = range.y(g_begin + s * run + i);
    }
    pair_tile<F, kStreams / 2, C, true>(tile, range);
  }
  neighbour_tiles<F, C, true>(range, g_begin + kStreams * run, g_end);
}

// The act rows [c, c + count), count < kTileActs, as one tile of that width: streamed when they
// are the whole batch (kept null), neighbour pairs after full tiles, reading the weights the
// first of those kept unpacked.
template <class F, int C = kTileActs - 1>
void narrow_tiles(const GroupRange<F>& range, int count, UnpackedBlock* kept, int64_t g_begin, int64_t g_end) {
  if constexpr (C > 0) {
    if (count != C) return narrow_tiles<F, C - 1>(range, count, kept, g_begin, g_end);
    if (kept == nullptr) return streamed_tiles<F, C>(range, g_begin, g_end);
    neighbour_tiles<F, C, false, Unpacked::kReuse>(range, g_begin, g_end, kept);
  }
}

// The unpacked weights of the row block in use (row_block_tiles), one buffer a thread.
thread_local PackScratch<UnpackedBlock> unpacked_scratch;

// Groups per L2 row block: as many whole pairs as fit in kRowBlockBytes, at least one.
template <class F>
int64_t row_block_groups(int64_t n) {
  const size_t pair_bytes = 2 * kInterleavedRows * ggml_row_bytes(F::kRowType, n);
  const int64_t pairs = pair_bytes < kRowBlockBytes ? static_cast<int64_t>(kRowBlockBytes / pair_bytes) : 1;
  return 2 * pairs;
}

// The act tiles of one row block [g_begin, g_end) (whole pairs), kTileActs act rows or more: the
// first reads the block from memory with prefetch (the 256-bit tiers' interleaved_matmul says
// what it gained) and, when more act rows follow, keeps its unpacked weights in a per-thread
// buffer that the tiles after it read instead.
template <class F>
void row_block_tiles(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end) {
  if (args.batch == kTileActs) return neighbour_tiles<F, kTileActs, true>(GroupRange<F>{args, a_stride, 0}, g_begin, g_end);
  UnpackedBlock* kept = unpacked_scratch.get(static_cast<size_t>((g_end - g_begin) / 2 * (args.n / kQ8ActBlockValues)));
  neighbour_tiles<F, kTileActs, true, Unpacked::kKeep>(GroupRange<F>{args, a_stride, 0}, g_begin, g_end, kept);
  int64_t c = kTileActs;
  for (; c + kTileActs <= args.batch; c += kTileActs) {
    neighbour_tiles<F, kTileActs, false, Unpacked::kReuse>(GroupRange<F>{args, a_stride, c}, g_begin, g_end, kept);
  }
  if (c < args.batch) narrow_tiles(GroupRange<F>{args, a_stride, c}, static_cast<int>(args.batch - c), kept, g_begin, g_end);
}

// Rows [row_begin, row_end) (whole groups) of y = W x acts. Batches of kTileActs and more walk
// L2-sized row blocks of group pairs (row_block_tiles); narrower batches stream the groups. A
// last unpaired group goes through the AVX2 kernel.
template <class F>
void pair_matmul(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  KVDESK_ASSERT(args.weight_type == F::kType && row_begin % kInterleavedRows == 0 && row_end % kInterleavedRows == 0);
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const int64_t g_begin = row_begin / kInterleavedRows;
  const int64_t pairs_end = g_begin + (row_end / kInterleavedRows - g_begin) / 2 * 2;
  if (args.batch < kTileActs) {
    narrow_tiles(GroupRange<F>{args, a_stride, 0}, static_cast<int>(args.batch), nullptr, g_begin, pairs_end);
  } else {
    const int64_t block_groups = row_block_groups<F>(args.n);
    for (int64_t gb = g_begin; gb < pairs_end; gb += block_groups) {
      row_block_tiles<F>(args, a_stride, gb, pairs_end - gb < block_groups ? pairs_end : gb + block_groups);
    }
  }
  if (pairs_end * kInterleavedRows < row_end) F::odd_group(args, pairs_end * kInterleavedRows, row_end);
}

}  // namespace

void matmul_q4_0x8_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  pair_matmul<Q4_0Pairs>(args, row_begin, row_end);
}

void matmul_q8_0x8_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  pair_matmul<Q8_0Pairs>(args, row_begin, row_end);
}

}  // namespace kvdesk
