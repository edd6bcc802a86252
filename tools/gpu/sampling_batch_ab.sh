#!/usr/bin/env bash
# A/B of graphserve builds (.gpu/bin/gs_<tag>, e.g. the sampling kernel's load batch) on sampled and greedy
# decode, llama3.2-1b at bs 1 / 8 / 32 / 128 (build_ab.sh with these defaults).
#   AB_BINS   tags (default "b1 b2 b4")
#   device run, kind nvidia-h200, carry [".gpu-pack"], command:
#   python3 -c "import tarfile; tarfile.open('.gpu-pack/gpu.tar.xz').extractall()" && bash tools/gpu/sampling_batch_ab.sh
AB_BINS=${AB_BINS:-b1 b2 b4} AB_SAMPLING="--temperature 1.0 --top-p 0.95 --top-k 50;--temperature 0" \
  exec bash "$(dirname "$0")/build_ab.sh"
