// A reference forward pass of every family the engine runs, for its tests: logits computed in
// double with plain loops over the GGUF's tensors, read by name, each family's pieces (biases,
// q/k norms, post norms, NeoX or adjacent-pair RoPE, frequency factors, YaRN, sliding windows,
// soft caps, fused projections, multipliers, GQA, tied output, expert routing, a shared expert,
// attention sinks, clamped SwiGLU) written the way the model's own code defines them, never from
// the engine's.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/gguf/gguf_reader.h"

namespace kvdesk::test {

using Vec = std::vector<double>;

struct ReferenceOptions {
  bool use_rope_freqs = true;       // false: ignore the file's rope_freqs (to see that they matter)
  bool use_sliding_window = true;   // false: every layer global (to see that the window matters)
  bool use_shared_expert = true;    // false: leave out Qwen2 MoE's shared expert (to see that it matters)
};

// Logits [T][vocab] of tokens at positions 0..T-1 of one sequence.
std::vector<Vec> reference_logits(const GgufFile& f, const std::vector<int32_t>& tokens,
                                  const ReferenceOptions& options = {});

}  // namespace kvdesk::test
