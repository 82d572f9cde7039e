// Internal, included by attention_driver.h: the steps of the SIMD paged attention that read
// int8 / int4 rows without dequantizing them.
//
// Key scores (IntScores), tokens in lanes: a tile's W key rows are laid out word-major,
// key_chunks[k][r] = 32-bit word k of row r's codes, once per tile for all query heads (int8:
// a word is a chunk of 4 codes; int4: 8 codes, split into the chunks' nibbles as they are
// read, as attention_int_keys.h orders them). Then each query head
// takes, per key group g, the integer dot D_g of every row at once: one u8 x int multiply-add
// per chunk (Isa::dot_chunk, the query chunk broadcast to every lane), so no partial sums are
// added across lanes. Lane r's score is sq * sum_g (s_g[r] * D_g[r] + m_g[r] * C_g) * scale.
//
// Values: int8 / int4 values are weighed by codes over pairs of tiles
// (attention_weighted_codes.h); their min terms, rescaled with the accumulator by the online
// softmax, are added to each group's dims once at the end (add_value_min_terms).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention_int_keys.h"
#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

// The (s, m) of every scale group of W int8 / int4 rows as f32 vectors over the rows:
// scales[g * stride + r] = s_g of row r, scales[(G + g) * stride + r] = m_g. Lanes past the
// tile's rows repeat row 0 (their key scores are masked, their softmax weights 0).
template <class Isa>
void tile_group_scales(const uint8_t* const* rows, int32_t groups, int32_t stride, float* scales) {
  for (int32_t g = 0; g < groups; ++g) {
    typename Isa::Vec s, m;
    Isa::f16_pairs(Isa::gather_words(rows, 4 * size_t(g)), s, m);
    Isa::store(scales + g * stride, s);
    Isa::store(scales + (groups + g) * stride, m);
  }
}

// Each head's query quantized (attention_int_keys.h), packed per chunk as one word of 4 s8 (the
// factor every ISA's byte multiply-add takes), its scale times the attention scale and its code
// sums per key group.
template <class Isa, KvType Type>
void prepare_int_query(const GroupJob& job) {
  int16_t* codes = job.ints.query_codes;
  const int32_t d = job.d;
  const int32_t group = kv_row_group(Type, d);
  const int32_t groups = kv_row_scales(Type, d);
  uint32_t* q_chunks = job.ints.q_chunks;
  float* q_scales = job.ints.q_scales;
  float* q_sums = job.ints.q_sums;
  for (int32_t h = 0; h < job.heads; ++h) {
    q_scales[h] = quantize_query(job.q + h * d, d, simd_query_pair_max(Type, Isa::kIsa), codes) * job.scale;
    for (int32_t k = 0; k < d / 4; ++k) {
      int8_t chunk[4];
      for (int32_t j = 0; j < 4; ++j) chunk[j] = int8_t(codes[int_key_chunk_dim(Type, k, j)]);
      std::memcpy(q_chunks + h * d / 4 + k, chunk, sizeof(chunk));
    }
    for (int32_t g = 0; g < groups; ++g) {
      int32_t sum = 0;
      const int32_t end = kv_group_end(Type, d, g);
      for (int32_t i = g * group; i < end; ++i) sum += codes[i];
      q_sums[h * groups + g] = float(sum);
    }
  }
}

// The tile's key codes, word-major: key_chunks[k][r] = 32-bit word k of row r's codes (int8:
// chunk k; int4: the nibbles of chunks 2k and 2k + 1, split as they are read, key_codes).
// Lanes past the rows repeat row 0 (their scores are masked). Words go four at a time through
// Isa::transpose_words4, the rest one by one.
template <class Isa, KvType Type>
void transpose_key_codes(const RowTile<Isa>& tile, int32_t d, int32_t groups, uint32_t* key_chunks) {
  constexpr int W = Isa::kLanes;
  const size_t offset = kv_values_offset(groups);
  const int32_t words = Type == KvType::INT8 ? d / 4 : d / 8;
  int32_t k = 0;
  for (; k + 4 <= words; k += 4) Isa::transpose_words4(tile.k, offset + 4 * size_t(k), key_chunks + k * W);
  for (; k < words; ++k) {
    for (int32_t r = 0; r < W; ++r) std::memcpy(key_chunks + k * W + r, tile.k[r] + offset + 4 * k, sizeof(uint32_t));
  }
}

// Key chunks a word of the tile's key codes (transpose_key_codes) holds: int8 one, int4 two.
template <KvType Type>
constexpr int32_t kChunksPerWord = Type == KvType::INT4 ? 2 : 1;

// The chunks of word w of the tile's key codes, 4 u8 codes a lane: int8 chunk w; int4 chunks
// 2w and 2w + 1, the low and high nibbles of the word.
template <class Isa, KvType Type>
void key_word_chunks(const uint32_t* key_chunks, int32_t w, typename Isa::IVec* chunks) {
  constexpr int W = Isa::kLanes;
  const typename Isa::IVec word = Isa::iload(key_chunks + w * W);
  if constexpr (Type == KvType::INT8) {
    chunks[0] = word;
  } else {
    chunks[0] = Isa::low_nibbles(word);
    chunks[1] = Isa::high_nibbles(word);
  }
}

// Scores of heads [h0, h0 + HT) for the tile in key_chunks / key_scales -> p[h][W]. A group's
// words go in spans of Isa::span_chunks<Type>() chunks, after which the ISA may widen what it
// summed in narrower lanes (Isa::end_span); groups and spans hold whole words of chunks (an
// int4 group and span an even number of chunks).
template <class Isa, KvType Type, int HT>
void int_score_heads(const GroupJob& job, int32_t h0, int32_t rows, int32_t group, int32_t groups) {
  using Vec = typename Isa::Vec;
  using IVec = typename Isa::IVec;
  constexpr int W = Isa::kLanes;
  constexpr int32_t kPerWord = kChunksPerWord<Type>;
  constexpr int32_t kSpanWords = Isa::template span_chunks<Type>() / kPerWord;
  static_assert(Isa::template span_chunks<Type>() % kPerWord == 0, "spans of whole words");
  const int32_t d = job.d;
  const int32_t group_words = group / 4 / kPerWord;
  const float* s = job.ints.key_scales;
  const float* m = job.ints.key_scales + groups * W;
  const uint32_t* q[HT];
  for (int i = 0; i < HT; ++i) q[i] = job.ints.q_chunks + (h0 + i) * (d / 4);
  Vec score[HT];
  for (int i = 0; i < HT; ++i) score[i] = Isa::zero();
  for (int32_t g = 0; g < groups; ++g) {
    IVec a0[HT], a1[HT];
    for (int i = 0; i < HT; ++i) a0[i] = a1[i] = Isa::izero();
    const int32_t end = g + 1 < groups ? (g + 1) * group_words : d / 4 / kPerWord;
    for (int32_t span = g * group_words; span < end; span += kSpanWords) {
      const int32_t span_end = span + kSpanWords < end ? span + kSpanWords : end;
      for (int32_t w = span; w < span_end; ++w) {
        IVec t[kPerWord];
        key_word_chunks<Isa, Type>(job.ints.key_chunks, w, t);
        for (int32_t c = 0; c < kPerWord; ++c) {
          for (int i = 0; i < HT; ++i) Isa::template dot_chunk<Type>(a0[i], t[c], q[i][w * kPerWord + c]);
        }
      }
      for (int i = 0; i < HT; ++i) Isa::template end_span<Type>(a0[i], a1[i]);
    }
    for (int i = 0; i < HT; ++i) {
      score[i] = Isa::fma(Isa::load(s + g * W), Isa::to_float(Isa::template combine<Type>(a0[i], a1[i])), score[i]);
      score[i] = Isa::fma(Isa::load(m + g * W), Isa::set1(job.ints.q_sums[(h0 + i) * groups + g]), score[i]);
    }
  }
  for (int i = 0; i < HT; ++i) {
    const Vec scaled = Isa::mul(score[i], Isa::set1(job.ints.q_scales[h0 + i]));
    Isa::store(job.p + (h0 + i) * job.p_stride, Isa::first_lanes(scaled, rows, -INFINITY));
  }
}

template <class Isa, KvType Type>
struct IntScores {
  template <int HT>
  struct Step {
    static void run(int32_t h0, const GroupJob& job, int32_t rows, int32_t group, int32_t groups) {
      int_score_heads<Isa, Type, HT>(job, h0, rows, group, groups);
    }
  };
  static void tile(const RowTile<Isa>& tile, const GroupJob& job) {
    const int32_t group = kv_row_group(Type, job.d);
    const int32_t groups = job.ints.key_groups;
    transpose_key_codes<Isa, Type>(tile, job.d, groups, job.ints.key_chunks);
    tile_group_scales<Isa>(tile.k, groups, Isa::kLanes, job.ints.key_scales);
    for_head_tiles<Step, Isa::kIntHeadTile>(job.heads, job, tile.rows, group, groups);
  }
};

// At the end: acc[h][dims of g] += sum of min_terms[h][g] (the softmax-weighted sum of m_g).
template <class Isa>
void add_value_min_terms(const GroupJob& job, KvType v_type) {
  constexpr int W = Isa::kLanes;
  const int32_t group = kv_row_group(v_type, job.d);
  const int32_t groups = job.ints.value_groups;
  for (int32_t h = 0; h < job.heads; ++h) {
    for (int32_t g = 0; g < groups; ++g) {
      const typename Isa::Vec min_sum = Isa::set1(Isa::reduce_add(Isa::load(job.ints.value_min_terms + (h * groups + g) * W)));
      const int32_t end = kv_group_end(v_type, job.d, g);
      for (int32_t c = g * group; c < end; c += W) {
        float* acc = job.acc + h * job.d + c;
        Isa::store(acc, Isa::add(Isa::load(acc), min_sum));
      }
    }
  }
}

}  // namespace
}  // namespace kvdesk
