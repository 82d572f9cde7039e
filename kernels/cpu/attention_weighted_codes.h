// Internal, included by attention_int_phases.h: the values step of the SIMD paged attention for
// ISAs that weigh int8 / int4 value codes by 8-bit weight codes (attention_int_values.h says the
// arithmetic and attention_isa.h simd_int_value_tile which ISA does it for which type).
//
// Per tile: each head's softmax weights times the rows' value scales become 8-bit codes per
// value group (one step per head and group), and p * (m_g + C s_g) joins the f32 min terms.
// The tile's codes, centred, are laid out once for every head in units of 64 dims: for each
// quad of 4 rows, the ISA's vectors hold those rows' codes of a dim side by side in one 32-bit
// lane (Isa::interleave_values), so one u8 x s8 multiply-add with the quad's 4 weight codes
// (one 32-bit lane, repeated) sums 4 rows per dim. Each 128-bit lane of those vectors holds dims
// of one value group, so a head's weight codes are laid out per lane (the group of its dims).
// A head's integer sums over the tile, times its steps, go to its value accumulator in the
// ISA's dim order (Isa::value_dim), which joins the f32 accumulator at the end.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/attention_int_values.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

template <class Isa, KvType Type>
struct WeightedValues {
  using Vec = typename Isa::Vec;
  static constexpr int W = Isa::kLanes;
  static constexpr int kQuadBytes = 256;   // one quad of 4 rows x 64 dims

  // Quad q of unit u in the tile's interleaved codes.
  static uint8_t* unit_codes(const GroupJob& job, int32_t u, int32_t q) {
    return job.ints.value_codes + (u * (W / 4) + q) * kQuadBytes;
  }

  // min terms += p * (m_g + C s_g); the weight codes and steps of p * s_g.
  static void quantize_weights(const GroupJob& job, int32_t groups) {
    const float* s = job.ints.value_scales;
    const float* m = job.ints.value_scales + groups * W;
    const Vec center = Isa::set1(float(value_code_center(Type)));
    for (int32_t h = 0; h < job.heads; ++h) {
      const Vec p = Isa::load(job.p + h * W);
      for (int32_t g = 0; g < groups; ++g) {
        const int32_t at = h * groups + g;
        const Vec scale = Isa::load(s + g * W);
        float* terms = job.ints.value_min_terms + at * W;
        Isa::store(terms, Isa::fma(p, Isa::fma(center, scale, Isa::load(m + g * W)), Isa::load(terms)));
        const Vec w = Isa::mul(p, scale);
        const float wmax = Isa::reduce_max(w);
        const float inverse = wmax > 0 ? float(kValueWeightCodeMax) / wmax : 0.0f;
        Isa::store_weight_codes(Isa::mul(w, Isa::set1(inverse)), job.ints.weight_codes + at * 16);
        job.ints.weight_steps[at] = wmax / float(kValueWeightCodeMax);
      }
    }
  }

  // The tile's value codes, every quad of the vector width; rows past the tile repeat row 0
  // (their weights are 0).
  static void interleave(const RowTile<Isa>& tile, const GroupJob& job) {
    const int32_t d = job.d;
    const size_t offset = kv_row_values_offset(Type, d);
    for (int32_t u = 0; u < simd_value_units(d); ++u) {
      for (int32_t q = 0; q < W / 4; ++q) {
        const uint8_t* rows[4];
        for (int32_t a = 0; a < 4; ++a) rows[a] = tile.v[4 * q + a < tile.rows ? 4 * q + a : 0] + offset;
        Isa::template interleave_values<Type>(rows, u, d, unit_codes(job, u, q));
      }
    }
  }

  // The value group of each 128-bit lane of unit u (a lane's dims share one; dims past the
  // head's, in its last unit, read the last group).
  static void lane_groups(const GroupJob& job, int32_t u, int32_t groups, int32_t* lane_group) {
    const int32_t group = kv_row_group(Type, job.d);
    for (int32_t lane = 0; lane < W / 4; ++lane) {
      const int32_t g = (64 * u + Isa::template value_dim<Type>(4 * lane)) / group;
      lane_group[lane] = g < groups ? g : groups - 1;
    }
  }

  static void tile(const RowTile<Isa>& tile, const GroupJob& job, int32_t groups) {
    const int64_t units = simd_value_units(job.d);
    quantize_weights(job, groups);
    interleave(tile, job);
    for (int32_t u = 0; u < units; ++u) {
      int32_t lane_group[W / 4];
      lane_groups(job, u, groups, lane_group);
      for (int32_t h = 0; h < job.heads; ++h) {
        Isa::template accumulate_unit<Type>(unit_codes(job, u, 0), job.ints.weight_codes + h * groups * 16,
                                            job.ints.weight_steps + h * groups, lane_group,
                                            job.ints.value_acc + (h * units + u) * 64);
      }
    }
  }

  // The accumulator joins acc (dims past head_dim, in the last unit, are padding).
  static void finish(const GroupJob& job) {
    const int64_t units = simd_value_units(job.d);
    for (int32_t h = 0; h < job.heads; ++h) {
      for (int32_t u = 0; u < units; ++u) {
        const float* sums = job.ints.value_acc + (h * units + u) * 64;
        for (int32_t f = 0; f < 64; ++f) {
          const int32_t dim = 64 * u + Isa::template value_dim<Type>(f);
          if (dim < job.d) job.acc[h * job.d + dim] += sums[f];
        }
      }
    }
  }

};

}  // namespace
}  // namespace kvdesk
