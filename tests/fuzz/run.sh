#!/usr/bin/env bash
# Runs every libFuzzer target of a KVDESK_FUZZ build for a bounded time each, starting from its
# seed corpus in tests/fuzz/corpus/<target>/ (left unchanged: new inputs go to a scratch folder);
# fuzz_gguf's seed models are made here by make_gguf_seeds.py.
# Fails on the first crash, sanitizer report, leak or timeout; the input that caused it is kept
# as <work>/<target>-crash-... (or leak-/timeout-) and printed, to become a regression test.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET (45)] [TARGET...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]}" && pwd)"
seconds="${2:-45}"
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_tokenizer fuzz_chat_template fuzz_conversation_json fuzz_openai_request fuzz_grammar)
work="$(mktemp -d "${TMPDIR:-/tmp}/kvdesk-fuzz.XXXXXX")"
export KVDESK_MODELS_DIR="${KVDESK_MODELS_DIR:-$here/../../../shared/models}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

python3 "$here/make_gguf_seeds.py" "$work/gguf-seeds"

for target in "${targets[@]}"; do
  mkdir -p "$work/$target"
  seeds="$here/corpus/$target"
  [ "$target" != fuzz_gguf ] || seeds="$work/gguf-seeds"
  echo "== $target: ${seconds} s"
  if ! "$build/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$work/$target-" \
      "$work/$target" "$seeds" >"$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log"
    echo "FAILED: $target; the input is in $work:" && ls "$work" | grep "^$target-" || true
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^Done [0-9]+ runs" "$work/$target.log" || true
done
rm -rf "$work"
echo "fuzzing: all ${#targets[@]} targets ran ${seconds} s each without a failure"
