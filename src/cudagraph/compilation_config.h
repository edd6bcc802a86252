// CompilationConfig: the graph and tuning settings (`--compilation-config`, `-cc.KEY=VALUE`).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cudagraph/cudagraph_mode.h"

namespace gs {

struct CompilationConfig {
  // Unset: the device's default (mode_for). On the CPU a graph replays the closures an eager
  // step runs, so it saves nothing and capturing every size costs start-up time: NONE there.
  std::optional<CUDAGraphMode> cudagraph_mode;
  std::vector<int> cudagraph_capture_sizes;  // empty: defaults up to max_cudagraph_capture_size
  int max_cudagraph_capture_size = 0;        // 0: min(max_num_seqs * 2, 256)
  // Token counts to autotune GEMMs for (docs/CUDA_GRAPHS.md §9); empty: none (the heuristic's
  // choices; a tuned algorithm can round differently from the untuned one a size padded from).
  std::vector<int> compile_sizes;
  std::string cache_dir;               // the tuning cache root; empty: ~/.cache/graphserve
  bool disable_compile_cache = false;  // tune at every start, read and write no cache

  // Applies a JSON object (`--compilation-config '{...}'`); unknown keys and bad values are
  // errors that name the key and list the valid keys or values.
  void apply_json(const std::string& json_text);
  // Applies one `-cc.KEY=VALUE` setting (VALUE as JSON, or a bare upper-case mode name).
  void apply_setting(const std::string& key, const std::string& value);

  // The mode to run: NONE with enforce_eager; else the one set; else FULL_AND_PIECEWISE on a GPU
  // and NONE on the CPU. The one place these defaults are decided.
  CUDAGraphMode mode_for(bool on_gpu, bool enforce_eager) const {
    if (enforce_eager) return CUDAGraphMode::NONE;
    return cudagraph_mode.value_or(on_gpu ? CUDAGraphMode::FULL_AND_PIECEWISE : CUDAGraphMode::NONE);
  }
};

}  // namespace gs
