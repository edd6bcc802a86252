#!/usr/bin/env bash
# Packs the model-family GPU checks: tools/gpu/pack.sh's pack (graphserve and gs_test_cuda from a
# CUDA build, their non-CUDA shared libraries) into `dest` (default /work/main/.gpu, a folder of
# the checkout the device tool sends), plus the fixtures and make_family_fixtures.py. Then, on the
# device: cd .gpu && ./run_gpu.sh      (bf16 checks of ours and HF's, decode latency)
# Usage: tools/hf_fixtures/pack_gpu.sh [build_dir] [dest]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build/release}
dest=${2:-/work/main/.gpu}
GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=$dest bash "$root/tools/gpu/pack.sh" "$build"
rm -rf "$dest/families" && cp -r "$root/tests/data/families" "$dest/families"
cp "$root/tools/hf_fixtures/make_family_fixtures.py" "$root/tools/hf_fixtures/run_gpu.sh" "$dest/"
du -sh "$dest"
