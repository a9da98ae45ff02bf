#!/usr/bin/env bash
# Packs what a CUDA 13 GPU host needs to run bgcut's GPU benchmarks when it cannot reach a package
# registry: this machine's node binary, the runtime part of node_modules with onnxruntime-node 1.29
# and ONNX Runtime 1.29's CUDA provider (com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9, see
# docs/inference-server.md, "CUDA 13 hosts") beside its libonnxruntime.so, and the prepared `isnet`
# model, as one xz tarball split into parts small enough to carry one per call.
#   bash bench/gpu-host/pack.sh [out-folder (default .gpuparts)] [part size MiB (default 55)]
# Run after `npm install && npm run build`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-$root/.gpuparts}")
part_mib=${2:-55}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9 onnxruntime-node@1.29.0 onnxruntime-common@1.29.0 >/dev/null
mkdir -p stage/node_modules stage/bin x
cp "$(command -v node)" stage/bin/node
# Development-only packages stay behind (the benches run from dist/ with the runtime packages).
tar -C "$root/node_modules" -cf - --exclude=./onnxruntime-web --exclude=./onnxruntime-node --exclude=./onnxruntime-common \
  --exclude=./@imgly --exclude=./typescript --exclude=./@stryker-mutator --exclude=./playwright-core --exclude=./@rolldown \
  --exclude='./lightningcss*' --exclude=./@babel --exclude=./kubernetes-models --exclude=./@kubernetes-models --exclude=./vite \
  --exclude=./vitest --exclude=./@vitest --exclude=./swagger-ui-dist --exclude=./s3rver --exclude=./rxjs --exclude=./@types \
  --exclude=./.cache . | tar -xf - -C stage/node_modules
mkdir -p stage/node_modules/onnxruntime-node stage/node_modules/onnxruntime-common
tar -xzf onnxruntime-common-1.29.0.tgz -C stage/node_modules/onnxruntime-common --strip-components=1
tar -xzf onnxruntime-node-1.29.0.tgz -C stage/node_modules/onnxruntime-node --strip-components=1
napi=stage/node_modules/onnxruntime-node/bin/napi-v6
rm -rf "$napi/darwin" "$napi/win32" "$napi/linux/arm64"
tar -xzf com.github.asus4.onnxruntime.linux-x64-gpu-0.4.9.tgz -C x
# ONNX Runtime loads execution providers from the folder of its own libonnxruntime.so.
cp x/package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so x/package/Plugins/Linux/x64/libonnxruntime_providers_shared.so "$napi/linux/x64/"
# The prepared `isnet` (8-bit pixels in, 8-bit mask out), as the server makes it from the data package.
model=$(cd "$root" && node -e "import('./dist/src/inference-server/model-source.js').then((m) => m.resolveModelFile('isnet')).then((f) => console.log(f))")
cp "$model" stage/isnet.onnx
mkdir -p "$out"
rm -f "$out"/p*
tar -C stage -cf - . | xz -T0 -9 | split -b "${part_mib}M" -d -a 1 - "$out/p"
ls -la "$out"
