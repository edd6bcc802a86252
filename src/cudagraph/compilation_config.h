// CompilationConfig: the graph and tuning settings (`--compilation-config`, `-cc.KEY=VALUE`).
#pragma once
#include <string>
#include <vector>

#include "cudagraph/cudagraph_mode.h"

namespace gs {

struct CompilationConfig {
  CUDAGraphMode cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  bool cudagraph_mode_explicit = false;      // set by apply_json/apply_setting (a user's choice)
  std::vector<int> cudagraph_capture_sizes;  // empty: defaults up to max_cudagraph_capture_size
  int max_cudagraph_capture_size = 0;        // 0: min(max_num_seqs * 2, 256)
  std::vector<int> compile_sizes;            // token counts to autotune GEMMs for

  // Applies a JSON object (`--compilation-config '{...}'`); unknown keys and bad values are
  // errors that name the key and list the valid keys or values.
  void apply_json(const std::string& json_text);
  // Applies one `-cc.KEY=VALUE` setting (VALUE as JSON, or a bare upper-case mode name).
  void apply_setting(const std::string& key, const std::string& value);
};

}  // namespace gs
