#!/usr/bin/env bash
# Packs the model-family GPU checks into one ignored folder of the checkout the device tool
# sends (default /work/main/.gpu-families): graphserve and gs_test_cuda from a CUDA build, their
# non-CUDA shared libraries, the fixtures and make_family_fixtures.py. Then, on the device:
#   cd .gpu-families && ./run_gpu.sh      (bf16 checks of ours and HF's, decode latency)
# Usage: tools/hf_fixtures/pack_gpu.sh [build_dir] [dest]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build/release}
dest=${2:-/work/main/.gpu-families}
mkdir -p "$dest/bin" "$dest/lib"
cp "$build/graphserve" "$build/tests/gs_test_cuda" "$dest/bin/"
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libcuda|libcudart|libcublas|libnccl|libnvrtc|libnvJitLink)'
for b in "$dest"/bin/*; do
  ldd "$b" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] || cp -nL "$path" "$dest/lib/$name"
  done
done
rm -rf "$dest/families" && cp -r "$root/tests/data/families" "$dest/families"
cp "$root/tools/hf_fixtures/make_family_fixtures.py" "$root/tools/hf_fixtures/run_gpu.sh" "$dest/"
du -sh "$dest"
