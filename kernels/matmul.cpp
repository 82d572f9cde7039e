// Weight-matrix x activation-batch products over a row range: ref:: loops over ref::vec_dot,
// cpu:: hands the range to the active ISA's tiled kernel (dot_avx2.cpp / dot_avx512.cpp).
#include "kernels/matmul.h"

#include "kernels/check.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/dot.h"
#include "kernels/weight_repack.h"

namespace kvdesk {

namespace ref {

// y[b * ld_y + r] = vec_dot(W[r], A[b]); the interleaved layouts have their own twin.
void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  KVDESK_ASSERT(0 <= row_begin && row_begin <= row_end);
  if (args.weight_type == GgmlType::Q4_0x8) return matmul_q4_0x8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q2_Kx8) return matmul_q2_kx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q3_Kx8) return matmul_q3_kx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q4_Kx8) return matmul_q4_kx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q5_Kx8) return matmul_q5_kx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q6_Kx8) return matmul_q6_kx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q8_0x8) return matmul_q8_0x8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::IQ4_XSx8) return matmul_iq4_xsx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::IQ4_NLx8) return matmul_iq4_nlx8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::MXFP4x8) return matmul_mxfp4x8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q4_1x8) return matmul_q4_1x8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q5_0x8) return matmul_q5_0x8_rows(args, row_begin, row_end);
  if (args.weight_type == GgmlType::Q5_1x8) return matmul_q5_1x8_rows(args, row_begin, row_end);
  const size_t w_stride = ggml_row_bytes(args.weight_type, args.n);
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const char* w = static_cast<const char*>(args.weights);
  const char* a = static_cast<const char*>(args.acts);
  for (int64_t b = 0; b < args.batch; ++b) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      args.y[b * args.ld_y + r] = vec_dot(args.weight_type, w + r * w_stride, a + b * a_stride, args.n);
    }
  }
}

}  // namespace ref

namespace cpu {

void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  KVDESK_ASSERT(0 <= row_begin && row_begin <= row_end);
  cpu_isa_kernels().matmul_rows(args, row_begin, row_end);
}

}  // namespace cpu
}  // namespace kvdesk
