// Internal to the scalar twins of the interleaved layouts (kernels/weight_repack*.cpp): the loop
// ref::matmul_rows runs over a matrix of 8-row groups, each output one row of a group against
// one prepared act row.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/weight_repack.h"

namespace kvdesk::ref {

// y[b * ld_y + r] = dot_row(group, r % 8, act row b, blocks) for r in [row_begin, row_end)
// (row_begin a multiple of 8), `group` the Block run of r's group: a matrix of `type` whose rows
// are blocks = n / block_values Blocks each, against act rows of Act blocks.
template <class Block, class Act, class DotRow>
void matmul_x8_rows(GgmlType type, int64_t block_values, const MatmulArgs& args, int64_t row_begin, int64_t row_end,
                    DotRow dot_row) {
  KVDESK_ASSERT(args.weight_type == type && row_begin % kInterleavedRows == 0);
  const int64_t blocks = args.n / block_values;
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const auto* groups = static_cast<const Block*>(args.weights);
  for (int64_t b = 0; b < args.batch; ++b) {
    const auto* a = reinterpret_cast<const Act*>(static_cast<const char*>(args.acts) + b * a_stride);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const Block* group = groups + (r / kInterleavedRows) * blocks;
      args.y[b * args.ld_y + r] = dot_row(group, static_cast<int>(r % kInterleavedRows), a, blocks);
    }
  }
}

}  // namespace kvdesk::ref
