// AVX2 / AVX-VNNI paged attention: the shared driver (attention_driver.h) over 8-float vectors,
// float and fp8 KV widened to f32 in registers (fp8 through vcvtph2ps), int8 / int4 codes
// multiplied as bytes by the u8 x s8 dot of byte_dot_avx2.h (vpmaddubsw on AVX2, vpdpbusd on
// AVX-VNNI; both tiers round as AVX2 does, attention_isa.h simd_int_scheme, so their int16 bounds
// hold for both) (attention_int_phases.h, attention_weighted_codes.h). Built with AVX2/FMA/F16C
// flags, and again with AVX-VNNI's (KVDESK_AVXVNNI), reached only through cpu::paged_attention
// after the CPU check; it also serves head dims that are a multiple of 8 but not of 16 on AVX-512
// machines.
#include "kernels/cpu/byte_dot_avx2.h"

#include "kernels/cpu/attention_driver.h"
#include "kernels/cpu/attention_isa.h"

namespace kvdesk {
namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec div_or_zero(Vec a, Vec x) { return _mm256_and_ps(_mm256_cmp_ps(x, zero(), _CMP_GT_OQ), div(a, x)); }
  static Vec round(Vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // y * 2^n for integral n in [-126, 127]: n goes straight into the exponent field.
  static Vec ldexp(Vec y, Vec n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  }
  static Vec zero_below(Vec x, float limit, Vec y) { return _mm256_and_ps(_mm256_cmp_ps(x, set1(limit), _CMP_GE_OQ), y); }
  static Vec first_lanes(Vec v, int32_t n, float fill) {
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_blendv_ps(set1(fill), v, _mm256_castsi256_ps(keep));
  }
  static float reduce_add(Vec v) { return hsum(v); }
  static float reduce_max(Vec v) { return hmax(v); }
  // The largest lane in every lane.
  static Vec max_all(Vec v) {
    v = max(v, _mm256_permute2f128_ps(v, v, 1));
    v = max(v, _mm256_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    return max(v, _mm256_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  static float first(Vec v) { return _mm256_cvtss_f32(v); }
  static bool any_above(Vec v, float x) { return _mm256_movemask_ps(_mm256_cmp_ps(v, set1(x), _CMP_GT_OQ)) != 0; }

  // parts[8][8] -> lane r = sum of parts[r][0..8): pairs, quads, then the two 128-bit halves.
  static Vec transpose_sum(const float* parts) {
    Vec x[4], z[2];
    for (int k = 0; k < 4; ++k) {
      const Vec a = load(parts + 16 * k);
      const Vec b = load(parts + 16 * k + 8);
      x[k] = add(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    }
    for (int k = 0; k < 2; ++k) {
      z[k] = add(_mm256_shuffle_ps(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                 _mm256_shuffle_ps(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    return add(_mm256_permute2f128_ps(z[0], z[1], 0x20), _mm256_permute2f128_ps(z[0], z[1], 0x31));
  }

  // 8 stored values at p -> f32.
  static Vec load_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static __m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
  static Vec load_f16(const uint8_t* p) { return _mm256_cvtph_ps(load16(p)); }
  static Vec load_bf16(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load16(p)), 16));
  }
  // e5m2 is the high byte of an f16.
  static Vec load_e5m2(const uint8_t* p) { return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(load8(p)), 8)); }
  // e4m3 S.EEEE.MMM -> f16 S.0EEEE.MMM0000000 = value * 2^-8: sign-extend, shift by 7, clear bit 14.
  static Vec load_e4m3(const uint8_t* p) {
    const __m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(load8(p)), 7);
    return _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16(short(0xBF80))));
  }
  // Integer key scores (attention_int_phases.h): 8 lanes of 4 u8 codes each, one per row,
  // multiplied by 4 s8 query codes (over int8 keys the query's pairs of codes are limited to 128
  // in sum, attention_isa.h simd_int_scheme).
  using IVec = __m256i;
  static constexpr CpuIsa kIsa = kByteDotVnni ? CpuIsa::AvxVnni : CpuIsa::Avx2;
  // Query heads scored at once: int4 keys keep 2 accumulators a head, 8 of the 16 registers (8
  // heads of int8 keys' 1 measured 6% slower: spills).
  static constexpr int kIntHeadTile = 4;
  static IVec izero() { return _mm256_setzero_si256(); }
  static IVec iload(const uint32_t* p) { return load_256(p); }
  static void istore(uint32_t* p, IVec v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static IVec low_nibbles(IVec w) { return _mm256_and_si256(w, _mm256_set1_epi8(15)); }
  static IVec high_nibbles(IVec w) { return _mm256_and_si256(_mm256_srli_epi32(w, 4), _mm256_set1_epi8(15)); }
  // The 32-bit word at rows[r] + offset of each of the 8 rows: two gathers of 4, by each
  // row's distance from row 0.
  static IVec gather_words(const uint8_t* const* rows, size_t offset) {
    const __m256i base = _mm256_set1_epi64x(int64_t(rows[0]));
    const __m256i lo = _mm256_sub_epi64(load_256(rows), base), hi = _mm256_sub_epi64(load_256(rows + 4), base);
    const int* at = reinterpret_cast<const int*>(rows[0] + offset);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_i64gather_epi32(at, lo, 1)), _mm256_i64gather_epi32(at, hi, 1), 1);
  }
  // 8 words of (f16 s, f16 m) -> s and m as f32: each half of the words packed to 8 u16.
  static void f16_pairs(IVec w, Vec& s, Vec& m) {
    const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi32(0xFFFF)), hi = _mm256_srli_epi32(w, 16);
    s = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
    m = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
  }
  // out[k][r] = 32-bit word k of rows[r] + offset, k in 0..3: 128-bit lane i of z[a] is row
  // a + 4i, and a 4 x 4 transpose of words inside the lanes puts row a + 4i at lane 4i + a.
  static void transpose_words4(const uint8_t* const* rows, size_t offset, uint32_t* out) {
    __m256i z[4];
    for (int a = 0; a < 4; ++a) {
      z[a] = _mm256_inserti128_si256(_mm256_castsi128_si256(load16(rows[a] + offset)), load16(rows[a + 4] + offset), 1);
    }
    const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    istore(out, _mm256_unpacklo_epi64(t0, t2));
    istore(out + 8, _mm256_unpackhi_epi64(t0, t2));
    istore(out + 16, _mm256_unpacklo_epi64(t1, t3));
    istore(out + 24, _mm256_unpackhi_epi64(t1, t3));
  }
  // The chunk's products. AVX2: two int16 pair sums (vpmaddubsw); int8 keys widen them into a0
  // at once (each may reach 255 * 128 = 32640); int4 keys add them in a0 (at most
  // 2 * 15 * 127 = 3810 each) and widen into a1 once per span of 8 chunks (30480). AVX-VNNI:
  // both add into a0 in int32 (vpdpbusd), one span.
  static constexpr bool kInt16Spans = !kByteDotVnni;
  template <KvType Type>
  static void dot_chunk(IVec& a0, IVec t, uint32_t q) {
    const __m256i s8 = _mm256_set1_epi32(int32_t(q));
    if constexpr (Type == KvType::INT4 && kInt16Spans) {
      a0 = byte_sum_add(a0, t, s8);
    } else {
      a0 = dot_u8s8(a0, t, s8);
    }
  }
  template <KvType Type>
  static constexpr int32_t span_chunks() { return Type == KvType::INT4 && kInt16Spans ? 8 : 1 << 20; }
  template <KvType Type>
  static void end_span(IVec& a0, IVec& a1) {
    if constexpr (Type == KvType::INT4 && kInt16Spans) {
      a1 = _mm256_add_epi32(a1, widen(a0));
      a0 = izero();
    }
  }
  template <KvType Type>
  static IVec combine(IVec a0, IVec a1) { return Type == KvType::INT4 && kInt16Spans ? a1 : a0; }
  static Vec to_float(IVec v) { return _mm256_cvtepi32_ps(v); }

  // Values weighted by codes (attention_weighted_codes.h). u8 weights meet s8 centred codes; on
  // AVX2 vpmaddubsw multiplies them into int16 pairs: int4's (the low nibbles, even dims, and the
  // high ones, odd dims; |c| <= 8) leave room for a run of four tiles (8 quads) to add up before
  // widening; int8's (|c| <= 128, with 7-bit weights) are widened quad by quad. AVX-VNNI sums
  // both in int32.
  //
  // 4 rows' vectors -> 4: vector k, 32-bit lane 4L + i holds the rows' bytes at position
  // 16L + 4k + i (bytes, then words, interleaved within 128-bit lanes).
  static void interleave4(const __m256i* r, __m256i* x) {
    const __m256i a = _mm256_unpacklo_epi8(r[0], r[1]), b = _mm256_unpackhi_epi8(r[0], r[1]);
    const __m256i c = _mm256_unpacklo_epi8(r[2], r[3]), e = _mm256_unpackhi_epi8(r[2], r[3]);
    x[0] = _mm256_unpacklo_epi16(a, c), x[1] = _mm256_unpackhi_epi16(a, c);
    x[2] = _mm256_unpacklo_epi16(b, e), x[3] = _mm256_unpackhi_epi16(b, e);
  }
  // Up to 32 bytes of a row from `at`, zero past its `bytes`.
  static __m256i row_bytes(const uint8_t* values, int32_t at, int32_t bytes) {
    const int32_t n = bytes - at < 32 ? (bytes - at > 0 ? bytes - at : 0) : 32;
    if (n == 32) return load_256(values + at);
    alignas(32) uint8_t part[32] = {};
    std::memcpy(part, values + at, size_t(n));
    return load_256(part);
  }
  static __m256i low_nibble(__m256i raw) { return _mm256_and_si256(raw, _mm256_set1_epi8(15)); }
  static __m256i high_nibble(__m256i raw) { return _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(15)); }
  // Unit u of 4 rows. int4: 8 vectors, the low nibbles' 4 then the high ones'. int8: 4 vectors
  // for each 32-dim half.
  template <KvType Type>
  static void interleave_values(const uint8_t* const* rows, int32_t u, int32_t d, uint8_t* out) {
    // The rows' bytes are interleaved first, then centred (int4: split into nibbles, which stay
    // at their byte's position).
    __m256i raw[4], x[4];
    if constexpr (Type == KvType::INT4) {
      const __m256i eight = _mm256_set1_epi8(8);
      for (int a = 0; a < 4; ++a) raw[a] = row_bytes(rows[a], 32 * u, d / 2);
      interleave4(raw, x);
      for (int k = 0; k < 4; ++k) {
        istore(reinterpret_cast<uint32_t*>(out + 32 * k), _mm256_sub_epi8(low_nibble(x[k]), eight));
        istore(reinterpret_cast<uint32_t*>(out + 128 + 32 * k), _mm256_sub_epi8(high_nibble(x[k]), eight));
      }
    } else {
      const __m256i center = _mm256_set1_epi8(char(0x80));
      for (int half = 0; half < 2; ++half) {
        for (int a = 0; a < 4; ++a) raw[a] = row_bytes(rows[a], 64 * u + 32 * half, d);
        interleave4(raw, x);
        for (int k = 0; k < 4; ++k) istore(reinterpret_cast<uint32_t*>(out + 128 * half + 32 * k), _mm256_xor_si256(x[k], center));
      }
    }
  }
  // The dim (within its unit) of float f of a unit's accumulator, vector f / 8, lane f % 8:
  // int4, vector v of the low nibbles (v < 4) or the high ones; int8, vector v of half v / 4.
  template <KvType Type>
  static constexpr int32_t value_dim(int32_t f) {
    const int32_t v = f / 8, position = 16 * (f % 8 / 4) + 4 * (v % 4) + f % 4;
    return Type == KvType::INT4 ? 2 * position + v / 4 : 32 * (v / 4) + position;
  }
  // Group slots: the first float of each vector (a vector's dims share a group; an int4 unit is
  // one group, an int8 unit's halves one each).
  static constexpr int kGroupSlots = 8;
  static constexpr int32_t group_slot(int32_t i) { return 8 * i; }
  // 2 x 8 weights scaled to [0, 255] -> their nearest codes as 16 bytes: packed to words and
  // bytes within 128-bit lanes, then the four 4-byte runs put in order.
  static void store_weight_codes(Vec w0, Vec w1, uint8_t* out) {
    const __m256i words = _mm256_packs_epi32(_mm256_cvtps_epi32(w0), _mm256_cvtps_epi32(w1));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words, words), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(bytes));
  }
  // The weight codes of quads 4k..4k + 3 of group g (rows 16k..16k + 15 of codes [groups][32]),
  // each quad's 4 in every 32-bit lane.
  static void quad_weights(const uint8_t* weight_codes, int32_t g, int32_t k, __m256i* w) {
    const __m256i lanes = _mm256_broadcastsi128_si256(load16(weight_codes + 32 * g + 16 * k));
    w[0] = _mm256_shuffle_epi32(lanes, 0x00), w[1] = _mm256_shuffle_epi32(lanes, 0x55);
    w[2] = _mm256_shuffle_epi32(lanes, 0xAA), w[3] = _mm256_shuffle_epi32(lanes, 0xFF);
  }
  // sum over the Quads quads of w[q] . codes at `at` of quad q (kValueQuadBytes apart), 4 rows a
  // dim: int4 in int16 pairs (2 x Quads products of at most 255 x 8: 8 quads reach 32640),
  // widened once; int8 widened quad by quad.
  template <KvType Type, int Quads>
  static __m256i quad_sum(const __m256i* w, const uint8_t* codes, int32_t at) {
    static_assert(Type == KvType::INT8 || Quads <= 8, "int16 sums of int4 products");
    if constexpr (Type == KvType::INT4) {
      ByteSum sum = byte_sum(w[0], load_256(codes + at));
      for (int q = 1; q < Quads; ++q) sum = byte_sum_add(sum, w[q], load_256(codes + q * kValueQuadBytes + at));
      return widen(sum);
    }
    __m256i sum = _mm256_setzero_si256();
    for (int q = 0; q < Quads; ++q) sum = dot_u8s8(sum, w[q], load_256(codes + q * kValueQuadBytes + at));
    return sum;
  }
  // acc[f] += step * sum over the run's Quads quads of the weight codes . the centred codes,
  // vector v's weights and step those of group slot_group[v] in codes [groups][32] and steps.
  // An int4 unit lies in one group (64 dims, groups start at multiples of 64); an int8 unit's
  // halves have a group each (vectors 0..3 and 4..7), over a pair of tiles (4 quads).
  template <KvType Type, int Quads>
  static void accumulate_unit(const uint8_t* codes, const uint8_t* weight_codes, const float* steps,
                              const int32_t* slot_group, float* acc) {
    if constexpr (Type == KvType::INT4) {
      __m256i w[Quads];
      for (int k = 0; k < Quads / 4; ++k) quad_weights(weight_codes, slot_group[0], k, w + 4 * k);
      const Vec step = set1(steps[slot_group[0]]);
      for (int v = 0; v < 8; ++v) {
        const __m256i sum = quad_sum<Type, Quads>(w, codes, v * 32);
        store(acc + 8 * v, fma(step, _mm256_cvtepi32_ps(sum), load(acc + 8 * v)));
      }
    } else {
      static_assert(Quads == 4, "int8 values over a pair of tiles");
      __m256i w[2][4];
      quad_weights(weight_codes, slot_group[0], 0, w[0]);
      quad_weights(weight_codes, slot_group[4], 0, w[1]);
      for (int v = 0; v < 8; ++v) {
        const __m256i sum = quad_sum<Type, Quads>(w[v / 4], codes, v * 32);
        store(acc + 8 * v, fma(set1(steps[slot_group[v]]), _mm256_cvtepi32_ps(sum), load(acc + 8 * v)));
      }
    }
  }
};

}  // namespace

void KVDESK_TIER_NAME(paged_attention)(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  paged_attention_simd<Avx2>(layer, seq, args);
}

}  // namespace kvdesk
