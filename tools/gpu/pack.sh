#!/usr/bin/env bash
# Packs what a GPU run needs into the ignored folder .gpu/: the graphserve binary and the test
# executables, the non-CUDA shared libraries they load (the GPU machine has CUDA 13 in
# /usr/local/cuda/lib64 but no Debian packages), and the small shared data (stories260K).
# Then carry it: device run with carry [".gpu"] and command `tools/gpu/run.sh`.
#
# Usage: tools/gpu/pack.sh [build_dir]          (default build/gpu, configured Release + CUDA)
#   GS_GPU_TARGETS="graphserve gs_test_cuda"     targets to build and pack (gs_test_* allowed)
#   GS_GPU_NO_BUILD=1                            pack what build_dir already holds
#   GS_GPU_GOLDEN=1                              also pack ../shared/golden (25 MB)
#   GS_JOBS=2                                    parallel build jobs
#   GS_GPU_PACK=dir                              pack into dir instead of .gpu (e.g. a folder
#                                                of the checkout the device tool sends)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build/gpu}
targets=${GS_GPU_TARGETS:-graphserve gs_test_cuda}
shared=${GRAPHSERVE_SHARED:-$root/../shared}

if [[ -z "${GS_GPU_NO_BUILD:-}" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGS_CUDA=ON -DGS_BUILD_BENCH=OFF
  # shellcheck disable=SC2086
  cmake --build "$build" --target $targets -j"${GS_JOBS:-2}"
fi

pack=${GS_GPU_PACK:-$root/.gpu}
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib" "$pack/shared/models"
for t in $targets; do
  if [[ $t == graphserve ]]; then src=$build/graphserve; else src=$build/tests/$t; fi
  [[ -x $src ]] || { echo "pack: $src was not built" >&2; exit 1; }
  cp "$src" "$pack/bin/"
done

# Shared libraries from ldd, except glibc's own and CUDA's (the GPU machine has both).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libcuda|libcudart|libcublas|libnccl|libnvrtc|libnvJitLink)'
for b in "$pack"/bin/*; do
  ldd "$b" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -nL "$path" "$pack/lib/$name"
  done
done

# CUPTI (for `bench kernels`) is loaded at run time, so ldd does not list it.
cupti=$(ls /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 2>/dev/null | head -n 1 || true)
[[ -n $cupti ]] && cp -L "$cupti" "$pack/lib/" || echo "pack: no libcupti.so.13 (bench kernels will not run)" >&2

cp -r "$shared/models/stories260K" "$pack/shared/models/" 2>/dev/null || echo "pack: no stories260K in $shared" >&2
[[ -n "${GS_GPU_GOLDEN:-}" ]] && cp -r "$shared/golden" "$pack/shared/"
du -sh "$pack"
ls "$pack/bin" "$pack/lib"
