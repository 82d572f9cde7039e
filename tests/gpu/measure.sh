#!/usr/bin/env bash
# GPU speed figures of the whole engine path (kvdesk-cli generate --backend cuda), after
# tests/gpu/check.sh: TinyLlama-1.1B-shaped models with random weights (22 layers, d 2048,
# 32 heads, 4 KV heads, FFN 5632, Llama-2 vocabulary, 8K context) as Q8_0, Q4_0 and Q4_K_M, f16
# KV. For each: decode tok/s at depth ~128 and ~4K, prefill tok/s of ~512 and ~4K tokens (the
# prompt is assets/quality/tinystories_sample.txt, cut or repeated). One line per run.
#   tests/gpu/measure.sh [build-dir]        (a folder made by tests/gpu/bundle.sh, or a build)
# KVDESK_MEASURE_TYPES: the weight types to make and run (default "q8_0 q4_0 q4_k_m").
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
logs=${OUT:-$build}
models=${KVDESK_MODELS_DIR:-$(cd .. && pwd)/shared/models}
if [ -f "$build/PREBUILT" ]; then
  source tests/gpu/prebuilt_env.sh
  prebuilt_env "$build"
fi
cli="$build/kvdesk-cli"
work=${TMPDIR:-/tmp}/kvdesk-measure
mkdir -p "$work"

sample=$(cat assets/quality/tinystories_sample.txt)
prompt_of() {  # prompt_of COPIES: the sample COPIES times
  local p=""
  for ((i = 0; i < $1; ++i)); do p+="$sample "; done
  printf '%s' "$p"
}
# The sample is about 810 tokens of the Llama-2 vocabulary: 450 characters are about 128 tokens,
# 1850 about 512, five copies about 4K.
short=$(printf '%s' "$sample" | head -c 450)
medium=$(printf '%s' "$sample" | head -c 1850)

run() {  # run MODEL LABEL PROMPT DECODE_TOKENS
  timeout 120 "$cli" generate -m "$1" --backend cuda --json -n "$4" --temp 0 --seed 1 -p "$3" 2>>"$logs/measure.err" |
    tail -1 | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
print("%-34s prompt %5d  prefill %8.1f tok/s  ttft %8.1f ms  decode %7.1f tok/s" %
      (sys.argv[1], j["prompt_tokens"], j["prefill_tok_s"], j["ttft_ms"], j["decode_tok_s"]))' "$2" ||
    echo "$2: FAILED"
}

for type in ${KVDESK_MEASURE_TYPES:-q8_0 q4_0 q4_k_m}; do
  m="$work/tinyllama_$type.gguf"
  [ -f "$m" ] || timeout 180 "$cli" make-model --layers 22 --embd 2048 --heads 32 --kv-heads 4 --ff 5632 --ctx 8192 \
    --vocab-from "$models/tokenizer.model" --type "$type" -o "$m" >/dev/null 2>>"$logs/measure.err" || { echo "make-model $type failed"; continue; }
  run "$m" "tinyllama-22L $type depth 128" "$short" 128
  run "$m" "tinyllama-22L $type prefill 512" "$medium" 16
  run "$m" "tinyllama-22L $type depth 4K" "$(prompt_of 5)" 128
done
tail -5 "$logs/measure.err" 2>/dev/null
