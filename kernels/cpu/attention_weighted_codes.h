// Internal, included by attention_driver.h: the values step of the SIMD paged attention over
// int8 / int4 values, their codes weighed by 8-bit (AVX2 over int8: 7-bit) weight codes
// (attention_int_values.h says the arithmetic, attention_isa.h simd_int_scheme the rows
// weighed at once and the weights' bits per ISA).
//
// It runs once per run of R tiles (simd_value_run rows; the driver scores them all first, then
// takes the run's softmax in one step), so its fixed costs, the weights' codes and the widening of
// the sums, are paid once per R rows. Per run: each head's softmax weights times the rows' value
// scales become codes per value group (one step per head and group), and p * (m_g + C s_g) joins
// the f32 min terms. The run's codes, centred, are laid out once for every head in units of 64
// dims: for each quad of 4 rows, the ISA's vectors hold those rows' codes of a dim side by side in
// one 32-bit lane (Isa::interleave_values), so one u8 x s8 multiply-add with the quad's 4 weight
// codes (one 32-bit lane, repeated) sums 4 rows per dim. The dims of one 128-bit lane share a
// value group, so the ISA lays a head's weight codes out per lane from the groups of its group
// slots. A head's integer sums over the run, times its steps, go to its value accumulator in the
// ISA's dim order (Isa::value_dim), which joins the f32 accumulator at the end.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/attention_int_values.h"
#include "kernels/cpu/attention_int_phases.h"
#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

template <class Isa, KvType Type>
struct WeightedValues {
  using Vec = typename Isa::Vec;
  static constexpr int W = Isa::kLanes;
  static constexpr int kRows = simd_value_run(Type, Isa::kIsa);
  static constexpr int kTiles = kRows / W;
  static constexpr int kQuads = kRows / 4;
  static_assert(kTiles % 2 == 0, "store_weight_codes takes tiles in pairs");
  static constexpr int kWeightBytes = 32;  // a head's weight codes of one group (kRows <= 32)
  static constexpr int32_t kCodeMax = simd_weight_code_max(Type, Isa::kIsa);

  // Quad q of unit u in the run's interleaved codes.
  static uint8_t* unit_codes(const GroupJob& job, int32_t u, int32_t q) {
    return job.ints.value_codes + (u * kQuads + q) * kValueQuadBytes;
  }

  // The run's rows' m_g become m_g + C s_g in value_scales, once for every head.
  static void centre_mins(const GroupJob& job, int32_t groups) {
    const float* s = job.ints.value_scales;
    float* m = job.ints.value_scales + groups * kRows;
    const Vec center = Isa::set1(float(value_code_center(Type)));
    for (int32_t i = 0; i < groups * kRows; i += W) Isa::store(m + i, Isa::fma(center, Isa::load(s + i), Isa::load(m + i)));
  }

  // min terms += p * (m_g + C s_g) (centre_mins first); the weight codes and steps of p * s_g,
  // every tile of the run, head by head and group by group: the largest weight in every lane,
  // then step = wmax / K and the codes w * (K / wmax) (IEEE divisions, so the same as the
  // twin's).
  static void quantize_weights(const GroupJob& job, int32_t groups) {
    const float* s = job.ints.value_scales;
    const float* centred_min = job.ints.value_scales + groups * kRows;
    const Vec code_max = Isa::set1(float(kCodeMax));
    for (int32_t h = 0; h < job.heads; ++h) {
      Vec p[kTiles];
      for (int j = 0; j < kTiles; ++j) p[j] = Isa::load(job.p + h * job.p_stride + j * W);
      for (int32_t g = 0; g < groups; ++g) {
        const int32_t at = h * groups + g;
        Vec w[kTiles];
        Vec terms = Isa::load(job.ints.value_min_terms + at * W);
        for (int j = 0; j < kTiles; ++j) {
          const Vec scale = Isa::load(s + g * kRows + j * W);
          terms = Isa::fma(p[j], Isa::load(centred_min + g * kRows + j * W), terms);
          w[j] = Isa::mul(p[j], scale);
        }
        Isa::store(job.ints.value_min_terms + at * W, terms);
        Vec wmax = w[0];
        for (int j = 1; j < kTiles; ++j) wmax = Isa::max(wmax, w[j]);
        wmax = Isa::max_all(wmax);
        const Vec inverse = Isa::div_or_zero(code_max, wmax);
        job.ints.weight_steps[at] = Isa::first(Isa::div(wmax, code_max));
        for (int j = 0; j < kTiles; j += 2) {
          Isa::store_weight_codes(Isa::mul(w[j], inverse), Isa::mul(w[j + 1], inverse),
                                  job.ints.weight_codes + at * kWeightBytes + j * W);
        }
      }
    }
  }

  static void interleave(const ValueRows& run_rows, const GroupJob& job) {
    const int32_t d = job.d;
    const size_t offset = kv_values_offset(job.ints.value_groups);
    for (int32_t u = 0; u < simd_value_units(d); ++u) {
      for (int32_t q = 0; q < kQuads; ++q) {
        const uint8_t* rows[4];
        for (int32_t a = 0; a < 4; ++a) rows[a] = run_rows.v[4 * q + a] + offset;
        Isa::template interleave_values<Type>(rows, u, d, unit_codes(job, u, q));
      }
    }
  }

  // The value group of each of the ISA's group slots of unit u (Isa::group_slot: the slots
  // whose dims stand for a run of dims sharing one group; dims past the head's, in its last
  // unit, read the last group). kv_group_of without its divisions: a row shorter than the
  // standard group is one group, which the clamp gives too.
  static void slot_groups(int32_t u, int32_t groups, int32_t* slot_group) {
    for (int32_t i = 0; i < Isa::kGroupSlots; ++i) {
      const int32_t g = (64 * u + Isa::template value_dim<Type>(Isa::group_slot(i))) / kv_standard_group(Type);
      slot_group[i] = g < groups ? g : groups - 1;
    }
  }

  // The run's rows, weighed; p holds every tile's weights (0 for tiles past the rows).
  static void run(const ValueRows& run_rows, const GroupJob& job) {
    const int32_t groups = job.ints.value_groups;
    const int64_t units = simd_value_units(job.d);
    for (int j = 0; j < kTiles; ++j) tile_group_scales<Isa>(run_rows.v + j * W, groups, kRows, job.ints.value_scales + j * W);
    centre_mins(job, groups);
    quantize_weights(job, groups);
    interleave(run_rows, job);
    for (int32_t u = 0; u < units; ++u) {
      int32_t slot_group[Isa::kGroupSlots];
      slot_groups(u, groups, slot_group);
      for (int32_t h = 0; h < job.heads; ++h) {
        Isa::template accumulate_unit<Type, kQuads>(unit_codes(job, u, 0), job.ints.weight_codes + h * groups * kWeightBytes,
                                            job.ints.weight_steps + h * groups, slot_group,
                                            job.ints.value_acc + (h * units + u) * 64);
      }
    }
  }

  // The dim within its unit of each float of a unit's accumulator (Isa::value_dim), worked
  // out at compile time.
  static constexpr std::array<int8_t, 64> kValueDims = [] {
    std::array<int8_t, 64> dims{};
    for (int32_t f = 0; f < 64; ++f) dims[size_t(f)] = int8_t(Isa::template value_dim<Type>(f));
    return dims;
  }();

  // The accumulator joins acc (dims past head_dim, in the last unit, are padding).
  static void finish(const GroupJob& job) {
    const int64_t units = simd_value_units(job.d);
    for (int32_t h = 0; h < job.heads; ++h) {
      for (int32_t u = 0; u < units; ++u) {
        const float* sums = job.ints.value_acc + (h * units + u) * 64;
        for (int32_t f = 0; f < 64; ++f) {
          const int32_t dim = 64 * u + kValueDims[size_t(f)];
          if (dim < job.d) job.acc[h * job.d + dim] += sums[f];
        }
      }
    }
  }
};

}  // namespace
}  // namespace kvdesk
