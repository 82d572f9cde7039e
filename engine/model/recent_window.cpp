// RecentWindow: runs of a batch, their windows of f32 rows, and what each token reads.
#include "engine/model/recent_window.h"

#include <algorithm>
#include <cstring>

#include "engine/model/model.h"
#include "kernels/check.h"

namespace kvdesk {

void RecentWindow::plan(const ForwardBatch& batch, const std::vector<int32_t>& slot, const KvCache& kv) {
  capacity_ = kv.layout().recent_rows;
  runs_.clear();
  if (capacity_ == 0) return;
  const int64_t T = batch.size();
  kv_dim_ = kv.recent_rows(batch.seq_ids[0]).row_floats();
  run_of_token_.resize(size_t(T));
  int64_t rows = 0;
  for (int64_t t = 0; t < T; ++t) {
    const bool continues = !runs_.empty() && batch.seq_ids[t] == runs_.back().seq &&
                           slot[size_t(t)] == runs_.back().first_slot + int32_t(t - runs_.back().first_t);
    if (continues) {
      runs_.back().end_t = t + 1;
    } else {
      runs_.push_back(Run{batch.seq_ids[t], t, t + 1, slot[size_t(t)], slot[size_t(t)], 0});
    }
    run_of_token_[size_t(t)] = int32_t(runs_.size() - 1);
  }
  for (const Run& run : runs_) rows += capacity_ - 1 + (run.end_t - run.first_t);
  k_.resize(size_t(rows * kv_dim_));
  v_.resize(k_.size());
}

void RecentWindow::gather(const KvCache& kv, int32_t layer, const float* k, const float* v) {
  int64_t row = 0;
  for (Run& run : runs_) {
    const size_t at = size_t(row * kv_dim_);
    const RecentRows& kept = kv.recent_rows(run.seq);
    run.window_slot = kept.gather(layer, std::max(0, run.first_slot - (capacity_ - 1)), run.first_slot, &k_[at], &v_[at]);
    run.window_row = row;
    row += run.first_slot - run.window_slot;
    const size_t n = size_t(run.end_t - run.first_t) * size_t(kv_dim_);
    std::memcpy(&k_[size_t(row * kv_dim_)], k + run.first_t * kv_dim_, sizeof(float) * n);
    std::memcpy(&v_[size_t(row * kv_dim_)], v + run.first_t * kv_dim_, sizeof(float) * n);
    row += run.end_t - run.first_t;
  }
}

void RecentWindow::attach(int64_t t, int32_t g, int32_t head_dim, AttentionArgs& args) const {
  if (runs_.empty()) return;
  const Run& run = runs_[size_t(run_of_token_[size_t(t)])];
  const int32_t slot = run.first_slot + int32_t(t - run.first_t);
  const int32_t start = std::max({run.window_slot, slot - capacity_ + 1, args.first_token});
  const int64_t at = (run.window_row + (start - run.window_slot)) * kv_dim_ + int64_t(g) * head_dim;
  args.recent_k = k_.data() + at;
  args.recent_v = v_.data() + at;
  args.recent_count = slot + 1 - start;
  args.recent_stride = kv_dim_;
}

void RecentWindow::keep(KvCache& kv, int32_t layer, const float* k, const float* v) const {
  for (const Run& run : runs_) {
    kv.recent_rows(run.seq).store(layer, run.first_slot, int32_t(run.end_t - run.first_t),
                                  k + run.first_t * kv_dim_, v + run.first_t * kv_dim_, kv_dim_);
  }
}

}  // namespace kvdesk
