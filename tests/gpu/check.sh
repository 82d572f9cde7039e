#!/usr/bin/env bash
# GPU check: builds the CUDA kernels with -DKVDESK_CUDA=ON (architecture "native" when
# nvidia-smi sees a GPU), runs kvdesk_gpu_tests (every kernel against its CPU reference: KV
# append/copy, paged attention on both paths, row ops, embedding, GEMV, GEMM, argmax) and the
# decode-attention, GEMV and GEMM speed runs ([.bench]), whole-model greedy generation on the
# CUDA backend against the CPU (stories260K, a TinyLlama-shaped 4-layer model), and the decode
# speed of kvdesk-cli generate --backend cuda on a 4-layer TinyLlama-shaped q8_0 model, then
# prints a summary. Logs go to $OUT when it is set (the device tool), else to the build folder.
# Budget on an H200: about 8 minutes building there; with a bundle, 1.5 to 2 (tests 32-50 s,
# speed runs 15-40 s, the rest making the 4-layer model).
#   tests/gpu/check.sh [build-dir]          (default build-gpu)
# KVDESK_MODELS_DIR: the folder with stories260K.gguf and tokenizer.model (default ../shared/models,
# as CMake's); the whole-model tests and the generate run read it.
# A folder made by tests/gpu/bundle.sh (it holds PREBUILT) is used as it is: no build, its lib/
# on LD_LIBRARY_PATH and its models/ as KVDESK_MODELS_DIR (for GPU machines without kvdesk's
# build dependencies).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
logs=${OUT:-$build}
mkdir -p "$build" "$logs"

arch="80;86;89;90"
if nvidia-smi -L >/dev/null 2>&1; then
  arch=native
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
fi

models=${KVDESK_MODELS_DIR:-$(cd .. && pwd)/shared/models}
start=$(date +%s)
if [ -f "$build/PREBUILT" ]; then
  arch="prebuilt by tests/gpu/bundle.sh"
  source tests/gpu/prebuilt_env.sh
  prebuilt_env "$build"
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVDESK_BUILD_APP=OFF -DKVDESK_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$logs/configure.txt" 2>&1 || { tail -30 "$logs/configure.txt"; exit 1; }
  cmake --build "$build" -j"$(nproc)" --target kvdesk_gpu_tests kvdesk-cli >"$logs/build.txt" 2>&1 || { tail -40 "$logs/build.txt"; exit 1; }
fi
export KVDESK_MODELS_DIR=$models
built=$(date +%s)

timeout 200 "$build/kvdesk_gpu_tests" >"$logs/tests.txt" 2>&1
tests_rc=$?
tested=$(date +%s)
timeout 120 "$build/kvdesk_gpu_tests" "[.bench]" >"$logs/bench.txt" 2>&1
bench_rc=$?
# Decode speed of the whole engine path (Generator over CudaForward): 4 TinyLlama layers, q8_0.
tiny="$build/tinyllama4_q8_0.gguf"
gen_rc=0
{ [ -f "$tiny" ] || timeout 60 "$build/kvdesk-cli" make-model --layers 4 --embd 2048 --heads 32 --kv-heads 4 \
      --ff 5632 --vocab-from "$models/tokenizer.model" --type q8_0 -o "$tiny"; } >"$logs/generate.txt" 2>&1 &&
  timeout 60 "$build/kvdesk-cli" generate -m "$tiny" --backend cuda --json -n 256 --temp 0 --seed 1 \
      -p "The quick brown fox" >>"$logs/generate.txt" 2>&1 || gen_rc=$?
done_at=$(date +%s)

verdict() { case $1 in 0) echo passed ;; 77) echo "skipped (no CUDA device)" ;; 124) echo "TIMED OUT" ;; *) echo "FAILED (rc $1)" ;; esac; }
echo "== kvdesk GPU check (arch $arch) =="
echo "build:  $((built - start)) s"
echo "tests:  $(verdict $tests_rc), $((tested - built)) s"
tail -4 "$logs/tests.txt"
echo "speed:  $(verdict $bench_rc), $((done_at - tested)) s"
grep -E "^decode|^kv type|^gemv|^type|^[A-Za-z0-9_]+ +[0-9a-z_]+ +[0-9]+ " "$logs/bench.txt"
grep -E "^stories260K kv|^tinyllama-4L" "$logs/tests.txt"
if [ $gen_rc -eq 0 ]; then
  python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print("generate cuda tinyllama-4L q8_0: decode %.1f tok/s over %d tokens" % (j["decode_tok_s"], len(j["tokens"])))' <"$logs/generate.txt" ||
    tail -5 "$logs/generate.txt"
else
  echo "generate cuda: $(verdict $gen_rc)"; tail -5 "$logs/generate.txt"
fi
# Exit 0 when all passed, 77 when there was no device, 1 otherwise.
if [ $tests_rc -eq 0 ] && [ $bench_rc -eq 0 ] && [ $gen_rc -eq 0 ]; then exit 0; fi
if [ $tests_rc -eq 77 ]; then exit 77; fi
exit 1
