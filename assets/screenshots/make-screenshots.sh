#!/usr/bin/env bash
# Regenerates the README's screenshots with the app's own --script mode under Xvfb:
# library.png (the model library over a scratch home holding copies of the shared test models
# laid out as LM Studio, Ollama, the Hugging Face cache and llama.cpp keep them, plus a broken
# file) and chat.png (a conversation with stories260K, emoji in its questions, and the KV block map).
# Usage: assets/screenshots/make-screenshots.sh [BUILD_DIR] [MODELS_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:-build}")
models=$(realpath "${2:-$here/../../../shared/models}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

home="$work/home"
mkdir -p "$home/.lmstudio/models/lmstudio-community/stories260K-GGUF" "$home/.cache/llama.cpp" \
         "$home/.ollama/models/blobs" "$home/.ollama/models/manifests/registry.ollama.ai/library/stories" \
         "$home/.cache/huggingface/hub/models--karpathy--tinyllamas/snapshots/main" "$home/.cache/huggingface/hub/models--karpathy--tinyllamas/refs"
cp "$models/stories260K-Q8_0.gguf" "$home/.lmstudio/models/lmstudio-community/stories260K-GGUF/stories260K-Q8_0.gguf"
cp "$models/stories260K-F16.gguf" "$home/.lmstudio/models/lmstudio-community/stories260K-GGUF/stories260K-F16.gguf"
digest=$(sha256sum "$models/stories260K.gguf" | cut -d' ' -f1)
cp "$models/stories260K.gguf" "$home/.ollama/models/blobs/sha256-$digest"
printf '{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s"}]}' "$digest" \
  > "$home/.ollama/models/manifests/registry.ollama.ai/library/stories/260k"
cp "$models/stories260K.gguf" "$home/.cache/huggingface/hub/models--karpathy--tinyllamas/snapshots/main/stories260K.gguf"
echo main > "$home/.cache/huggingface/hub/models--karpathy--tinyllamas/refs/main"
"$build/kvdesk-cli" make-model --output "$home/.cache/llama.cpp/qwen3-shaped-random.gguf" --arch qwen3 \
  --vocab-from "$models/tokenizer.model" \
  --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 128 --ctx 32768 >/dev/null
echo "not a model" > "$home/.cache/llama.cpp/partial-download.gguf"

cat > "$work/library.script" <<SCRIPT
library
wait_library
sleep 0.5
screenshot library.png
quit
SCRIPT
cat > "$work/chat.script" <<SCRIPT
wait_model
send Once upon a time 🐉🏰
wait_answer
send Tell me more about the little girl. 👧🏽✨
wait_answer
open_panel blocks
sleep 0.5
screenshot chat.png
quit
SCRIPT

run() {  # run SCRIPT [args...]
  local script=$1
  shift
  HOME="$home" XDG_CACHE_HOME="$home/.cache" xvfb-run -a -s "-screen 0 1280x800x24" \
    "$build/kvdesk" --db "$work/kvdesk.db" --script "$script" --screenshot-dir "$here" "$@"
}
run "$work/library.script"
run "$work/chat.script" --model "$models/stories260K.gguf"
echo "wrote $here/library.png and $here/chat.png"
