// GEMM autotuning at start-up (docs/CUDA_GRAPHS.md §9): what the runner asks a backend to tune,
// and the on-disk cache of the winners.
//
// The cache is one JSON file per tuning key under <cache_dir>/gemm_tuning/<hash>.json. The key
// is a canonical text of everything the winners depend on (GPU name, driver, CUDA runtime and
// cuBLASLt versions, compute dtype, the GEMM shapes and token counts); its FNV-1a 64 hash names
// the file and the file repeats the whole text, so a file of another key (a hash collision, a
// hand-copied file) is never trusted. An unreadable, corrupt or stale file is ignored with a
// warning and rewritten after tuning.
#pragma once
#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gs {

// What the runner asks for: the token counts (M) to tune (compile_sizes), and the cache.
struct GemmTuningOptions {
  std::vector<int> sizes;  // token counts; those where no cuBLASLt GEMM runs are skipped
  bool use_cache = true;   // false: tune, and neither read nor write the cache
  std::string cache_dir;   // the cache root (default_cache_dir() when empty)
  // For a size, the smaller token counts whose batches the graphs pad to it: their GEMMs run the
  // size's winner too (none listed: only the size itself).
  std::map<int, std::vector<int>> padded_from;
};

// What a backend did, for the log and the tests.
struct GemmTuningReport {
  int tuned = 0;       // (shape, M) pairs timed now
  int from_cache = 0;  // pairs read from the cache (and accepted by the library)
  int changed = 0;     // pairs whose winner is not the heuristic's first choice
  double seconds = 0.0;
  std::string cache_file;  // empty when the cache is off
};

// One GEMM y[M, N] = x[M, K] w[N, K]^T of the given input/output types.
struct GemmShape {
  int m = 0, n = 0, k = 0;
  bool in_f32 = false, y_f32 = false;
  auto operator<=>(const GemmShape&) const = default;
};

// A tuned algorithm: the library's opaque algorithm bytes (cuBLASLt's cublasLtMatmulAlgo_t is
// 8 x uint64) and the time measured for it.
struct GemmAlgoRecord {
  std::array<uint64_t, 8> algo{};
  float us = 0.0f;
  bool operator==(const GemmAlgoRecord&) const = default;
};

using GemmTuningTable = std::map<GemmShape, GemmAlgoRecord>;

// $XDG_CACHE_HOME/graphserve, else $HOME/.cache/graphserve; empty when neither is set.
std::string default_cache_dir();

// The canonical key text and its hash (16 hex digits).
std::string gemm_tuning_key_hash(const std::string& key_text);
// <cache_dir>/gemm_tuning/<hash>.json
std::string gemm_tuning_file(const std::string& cache_dir, const std::string& key_text);

// The table in `path` when it is a well-formed cache file of `key_text`; nullopt otherwise, with
// a warning naming the file and the reason (no warning when the file does not exist).
std::optional<GemmTuningTable> load_gemm_tuning(const std::string& path, const std::string& key_text);
// Writes the table (a temporary file, then a rename, so a reader never sees half a file).
// Returns false (with a warning) when it cannot.
bool save_gemm_tuning(const std::string& path, const std::string& key_text, const GemmTuningTable& table);

}  // namespace gs
