// RecentWindow: for one layer of a forward batch, the f32 rows each token's attention reads in
// place of their quantized copies (AttentionArgs::recent_k): its sequence's newest rows up to
// its own slot, at most the cache's recent_rows of them (engine/kv/recent_rows.h).
//
// A batch holds runs of tokens of one sequence at consecutive slots. A run's window is the
// rows its sequence kept before the run, then the run's own rows as this forward computed
// them, so a token reads the same newest rows whether its prompt came in one chunk or many;
// after attention the run's rows replace the kept ones (keep()).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv/kv_cache.h"
#include "kernels/attention.h"

namespace kvdesk {

struct ForwardBatch;

class RecentWindow {
 public:
  // The batch's runs, once per forward; slot[t] is token t's cache slot. When the cache keeps
  // no rows in f32 there are none, and the calls below do nothing.
  void plan(const ForwardBatch& batch, const std::vector<int32_t>& slot, const KvCache& kv);
  // Layer's windows: kept rows, then k and v [T][kv_dim] of the batch's tokens.
  void gather(const KvCache& kv, int32_t layer, const float* k, const float* v);
  // Token t's recent rows of kv head g (head_dim floats at g * head_dim) for attention over
  // slots [args.first_token, slot[t]].
  void attach(int64_t t, int32_t g, int32_t head_dim, AttentionArgs& args) const;
  // The batch's rows of layer into their sequences' kept rows.
  void keep(KvCache& kv, int32_t layer, const float* k, const float* v) const;

 private:
  // Tokens [first_t, end_t) of seq at slots first_slot..; their window holds slots
  // [window_slot, first_slot + end_t - first_t) from row window_row of k_ and v_.
  struct Run {
    SeqId seq = 0;
    int64_t first_t = 0;
    int64_t end_t = 0;
    int32_t first_slot = 0;
    int32_t window_slot = 0;
    int64_t window_row = 0;
  };

  int32_t capacity_ = 0;
  int64_t kv_dim_ = 0;
  std::vector<Run> runs_;
  std::vector<int32_t> run_of_token_;   // [T] index into runs_
  std::vector<float> k_;                // [rows][kv_dim] every run's window, one after another
  std::vector<float> v_;                // [rows][kv_dim]
};

}  // namespace kvdesk
