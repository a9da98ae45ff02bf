#!/usr/bin/env bash
# One A/B run on a GPU host: this checkout's dist/ against another build's dist (BASE, default
# .gpubase), on the same warm machine, one after the other. Needs the parts unpacked by setup.inc,
# a 1 MP photo (IMG) and the photo's real mask for the replay model (MASK, request-timeline.js's
# --mask file), e.g. in a carried folder .gpu-run/. Logs go to $OUT (the device tool's folder).
#   IMG=.gpu-run/photo-1mp.jpg MASK=.gpu-run/mask-1mp.bin [E2E="dist dist:BGCUT_PNG_BANDS=3 .gpubase"] bash bench/gpu-host/ab.sh [sections]
# sections: any of timeline,e2e,host (default all three).
source "$(dirname "$0")/setup.inc"
BASE=${BASE:-.gpubase}
export IMG=${IMG:-.gpu-run/photo-1mp.jpg}
MASK=${MASK:-.gpu-run/mask-1mp.bin}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
sections=${1:-timeline,e2e,host}
gpu() { node "$1/bench/gpu.js" --providers cuda --model "isnet=$MODEL" --image "$IMG" "${@:2}"; }
if [[ $sections == *timeline* ]]; then
  echo "== timeline (replay model), this build against $BASE"
  node dist/bench/request-timeline.js --image "$IMG" --mask "$MASK" --runs 20 --compare "$BASE" 2>&1 | tee "$OUT/timeline.log" | grep -v '^\s*$' | tail -40
fi
# E2E: the variants, each `build[:VAR=value,VAR=value]` (an environment for that build's API), in turn.
E2E=${E2E:-"dist $BASE"}
if [[ $sections == *e2e* ]]; then
  for round in 1 2 3; do
    for variant in $E2E; do
      build=${variant%%:*}
      vars=$([[ $variant == *:* ]] && echo "${variant#*:}" | tr ',' ' ')
      echo "== e2e round $round: $variant"
      env $vars bash -c 'node "$1/bench/gpu.js" --providers cuda --model "isnet=$MODEL" --image "$IMG" --only e2e --clients 1 --runs 40' _ "$build" 2>&1 \
        | tee -a "$OUT/e2e-$(echo "$variant" | tr -c 'A-Za-z0-9._\n-' '_').log" | grep -E '^\| (p50Ms|p99Ms|apiCpuMsPerImage) '
    done
  done
fi
if [[ $sections == *host* ]]; then
  for build in dist "$BASE"; do
    echo "== host: $build"
    gpu "$build" --only host --servers 2 --api-processes 6,14 --seconds 10 2>&1 | tee -a "$OUT/host-$(basename "$build").log" | grep -i -E 'images|api' | head -12
  done
fi
