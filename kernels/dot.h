// Dot products of one weight row (stored in its GGUF type, never dequantized in memory)
// with one activation row. Quantized weights meet activations quantized once per matmul to
// an 8-bit block format (BlockQ8Act per 32 values, BlockQ8K per 256 for the K-quants), so the
// inner loop is integer SIMD; float weights meet float activations.
//
// Three faces, one signature: ref:: is the scalar truth, cpu:: dispatches at run time to the
// widest ISA present (AVX-512 VNNI, AVX-VNNI, AVX2, scalar), and tests compare the two.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/ggml_types.h"

namespace kvdesk {

// Activation block for integer dots: 32 values x[i] ~= d * qs[i]; sum = sum(qs) lets Q4_0's
// -8 offset be applied once per block instead of per value, and low_sum = sum(qs[0..15]) (with
// sum - low_sum) Q2_K's mins, one per 16 values. |sum| <= 32 * 127 fits int16.
constexpr int kQ8ActBlockValues = 32;
constexpr int kQ8ActLowValues = 16;
struct BlockQ8Act {
  float d;
  int16_t sum;
  int16_t low_sum;
  int8_t qs[kQ8ActBlockValues];
};
static_assert(sizeof(BlockQ8Act) == 40);

// Activation super-block for the K-quants (ggml's Q8_K): 256 values x[i] ~= d * qs[i] with one
// scale, so a whole weight super-block is summed in integers (its sub-block scales multiplying
// int32 partial dots) and converted to float once; bsums[k] = sum of qs[16k .. 16k + 15] carry
// the mins (Q4_K, Q5_K) and the -32 offset (Q6_K) in integers too.
constexpr int kQ8KBlockValues = 256;
constexpr int kQ8KSumValues = 16;
struct BlockQ8K {
  float d;
  int8_t qs[kQ8KBlockValues];
  int16_t bsums[kQ8KBlockValues / kQ8KSumValues];
};
static_assert(sizeof(BlockQ8K) == 292);

enum class ActFormat { F32, Q8Act, Q8K };
ActFormat act_format_for(GgmlType weight_type);
// Bytes of one prepared activation row of n values for this weight type.
size_t act_row_bytes(GgmlType weight_type, int64_t n);

// AvxVnni: the AVX2 kernels with the VEX-encoded 256-bit vpdpbusd (Intel 12th generation and
// later without AVX-512); a CPU may have it, AVX-512 or both.
enum class CpuIsa { Scalar, Avx2, AvxVnni, Avx512 };
const char* cpu_isa_name(CpuIsa isa);
CpuIsa cpu_isa_detected();          // best ISA of this CPU (AVX-512 over AVX-VNNI where both are)
CpuIsa cpu_isa_active();            // what cpu:: uses now
// Tests pin a path; one the CPU lacks falls to the next narrower it has (Avx512, AvxVnni,
// Avx2, Scalar).
void cpu_isa_force(CpuIsa isa);
bool cpu_isa_supported(CpuIsa isa); // this CPU can run isa's kernels
// "avx2", "avxvnni" (or "avx-vnni"), "avx512" (or "avx512-vnni"), "ref" (or "scalar"), "auto"
// (the detected one); nullopt for any other name.
std::optional<CpuIsa> cpu_isa_from_name(std::string_view name);

namespace ref {
// x[n] floats -> act (act_row_bytes(weight_type, n) bytes).
void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n);
// sum_i w[i] * a[i] over n values; w is one row of weight_type, a a prepared act row.
float vec_dot(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n);
}  // namespace ref

namespace cpu {
void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n);
float vec_dot(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n);
}  // namespace cpu

}  // namespace kvdesk
