// Speed run (hidden tag [.bench], run by tests/gpu/check.sh): batched decode attention at 1K,
// 8K and 32K tokens of context for every KV type, on tensor cores where the type has that path
// and on the f32 path, Llama-3-8B's layer shape (32 query heads, 8
// kv heads, head_dim 128, 16-token blocks in shuffled order). Prints the time per call and the
// K+V bytes read per second; asserts nothing about speed. Rows hold one constant byte pattern:
// the kernels' work does not depend on the values. Each context runs one sequence and a batch of
// 128K tokens in all; a single 1K sequence (4 MB of f16 K/V) stays in L2, so its GB/s is not DRAM's.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/kv_quant.h"
#include "tests/gpu/device_buffer.h"
#include "tests/gpu/device_timer.h"

using namespace kvdesk;
using gpu_test::DeviceBuffer;

namespace {

constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;
constexpr int kWarmup = 3, kRuns = 20;

struct Result {
  double ms_per_call;
  double gb_per_s;
  bool tensor_cores;   // which kernel ran (cuda::attention_on_tensor_cores)
};

// num_seqs sequences of ctx tokens each, one KV type for K and V.
Result time_attention(KvType type, int32_t ctx, int32_t num_seqs, int multiprocessors, bool tensor_cores) {
  const int32_t blocks_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  const int32_t pool_blocks = blocks_per_seq * num_seqs;
  PagedKvLayer layer;
  layer.block_size = kBlockSize;
  layer.num_kv_heads = kKvHeads;
  layer.head_dim = kHeadDim;
  const size_t row = kv_row_bytes(type, kHeadDim);
  for (PagedKvTensor* t : {&layer.k, &layer.v}) {
    t->type = type;
    t->row_stride = row;
    t->head_stride = row * kBlockSize;
    t->block_stride = t->head_stride * kKvHeads;
  }
  DeviceBuffer<uint8_t> k(layer.k.block_stride * size_t(pool_blocks)), v(layer.v.block_stride * size_t(pool_blocks));
  cudaMemset(k.get(), 0x3C, k.size());
  cudaMemset(v.get(), 0x3C, v.size());
  layer.k.data = k.get();
  layer.v.data = v.get();

  std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));
  DeviceBuffer<int32_t> tables(ids);
  std::vector<PagedSeq> seqs;
  for (int32_t s = 0; s < num_seqs; ++s) seqs.push_back(PagedSeq{tables.get() + size_t(s) * blocks_per_seq, ctx});
  DeviceBuffer<PagedSeq> d_seqs(seqs);

  cuda::AttentionPlan plan = cuda::plan_attention(num_seqs, kHeads, kKvHeads, ctx, multiprocessors);
  plan.tensor_cores = tensor_cores;
  DeviceBuffer<float> q(std::vector<float>(size_t(num_seqs) * kHeads * kHeadDim, 0.01f));
  DeviceBuffer<float> out(q.size());
  DeviceBuffer<float> work(size_t(cuda::attention_workspace_floats(plan, num_seqs, kHeads, kHeadDim)));
  const AttentionArgs args{q.get(), kHeads, 0.088f, out.get(), work.get()};

  const auto launch = [&] { cuda::paged_attention(layer, d_seqs.get(), num_seqs, ctx, args, plan); };
  for (int i = 0; i < kWarmup; ++i) launch();
  const double per_call = gpu_test::device_ms_per_call(kRuns, launch);
  const double bytes = double(num_seqs) * ctx * kKvHeads * double(2 * row);
  return Result{per_call, bytes / (per_call * 1e-3) / 1e9, tensor_cores && cuda::attention_on_tensor_cores(layer)};
}

bool has_tensor_core_path(KvType type) {
  PagedKvLayer layer;
  layer.k.type = type;
  layer.v.type = type;
  layer.head_dim = kHeadDim;
  return cuda::attention_on_tensor_cores(layer);
}

}  // namespace

TEST_CASE("CUDA decode attention speed", "[.bench][cuda]") {
  const int sms = cuda::multiprocessor_count();
  std::printf("\ndecode attention, %s, %d SMs; %d heads / %d kv heads, head_dim %d, block %d\n",
              cuda::device_description().c_str(), sms, kHeads, kKvHeads, kHeadDim, kBlockSize);
  std::printf("%-9s %6s %5s %10s %9s %12s %6s\n", "kv type", "ctx", "seqs", "ms/call", "GB/s", "vs f16 (ms)", "path");
  for (int32_t ctx : {1024, 8192, 32768}) {
    for (int32_t seqs : {1, 131072 / ctx}) {
      // Each path's speed-up against f16 on the same path: tensor cores (the default) first, then
      // the f32 path of the types that have both.
      for (bool tensor_cores : {true, false}) {
        const double f16_ms = time_attention(KvType::F16, ctx, seqs, sms, tensor_cores).ms_per_call;
        for (KvType type : all_kv_types()) {
          if (!tensor_cores && !has_tensor_core_path(type)) continue;
          const Result r = time_attention(type, ctx, seqs, sms, tensor_cores);
          std::printf("%-9s %6d %5d %10.4f %9.1f %11.2fx %6s\n", kv_type_name(type), ctx, seqs, r.ms_per_call, r.gb_per_s,
                      f16_ms / r.ms_per_call, r.tensor_cores ? "mma" : "f32");
          std::fflush(stdout);
        }
      }
    }
  }
}
