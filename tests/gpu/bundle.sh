#!/usr/bin/env bash
# Prepares tests/gpu/check.sh to run on a GPU machine that cannot build kvdesk: the device tool's
# machines have CUDA but none of kvdesk's Debian -dev packages, and no network. Builds
# kvdesk_gpu_tests and kvdesk-cli here (in build-gpu) for one architecture and copies into one
# folder: the two programs, lib/ (every shared library they load that is not glibc's or the
# NVIDIA driver's), models/ (stories260K.gguf, tokenizer.model) and a PREBUILT marker that tells
# check.sh to use them instead of building. The folder stays under the device tool's 64 MiB.
#   tests/gpu/bundle.sh [bundle-dir] [cuda-arch]     (defaults build-gpu-bundle, 90: H100/H200)
# then, with the device tool: carry ["build-gpu-bundle"], command "tests/gpu/check.sh build-gpu-bundle".
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-build-gpu-bundle}
arch=${2:-90}
build=build-gpu
models=${KVDESK_MODELS_DIR:-$(cd .. && pwd)/shared/models}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVDESK_BUILD_APP=OFF -DKVDESK_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$build" -j"$(nproc)" --target kvdesk_gpu_tests kvdesk-cli

rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/models"
cp "$build/kvdesk_gpu_tests" "$build/kvdesk-cli" "$bundle/"
strip "$bundle/kvdesk_gpu_tests" "$bundle/kvdesk-cli"
# glibc's own libraries and the driver's libcuda come from the GPU machine (its C library must
# be as new as this one's: the device tool's H200 machines have 2.39); everything else
# (libstdc++, ICU, sentencepiece, protobuf, the CUDA runtime, ...) travels.
ldd "$bundle/kvdesk_gpu_tests" "$bundle/kvdesk-cli" | awk '/=> \// { print $3 }' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
cp "$models/stories260K.gguf" "$models/tokenizer.model" "$bundle/models/"
touch "$bundle/PREBUILT"
du -sh "$bundle"/* | sort -h
du -sh "$bundle"
