// Expert routing of a mixture-of-experts layer (Mixtral, Qwen2 and Qwen3 MoE): each token runs
// the k experts its router scores highest, weighted by their softmax over all experts, the top
// k kept and, for Mixtral and Qwen3 MoE, renormalized to sum to 1 (= the softmax of those k
// scores), as llama.cpp's build_moe_ffn computes it for these families. The routes are grouped
// by expert, so each expert's matrices are read once for all the tokens of a batch that chose
// it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvdesk {

// Invariant: the rows of expert e are [first_row[e], first_row[e + 1]), its tokens in
// increasing order; every token has exactly k rows, under k different experts, whose weights
// sum to 1 when renormalized and to at most 1 when not.
struct ExpertRoutes {
  std::vector<int32_t> first_row;   // [experts + 1]
  std::vector<int32_t> tokens;      // [tokens * k] the token of each row
  std::vector<float> weights;       // [tokens * k] its weight in that token's FFN output

  int32_t rows_of(int32_t expert) const { return first_row[std::size_t(expert) + 1] - first_row[std::size_t(expert)]; }
};

// scores [tokens][experts]: the router's logits. Ties go to the lower expert index; a NaN
// score ranks below every number and weighs 0. Requires 1 <= k <= experts.
ExpertRoutes route_tokens(const float* scores, int64_t tokens, int32_t experts, int32_t k, bool renormalize = true);

}  // namespace kvdesk
