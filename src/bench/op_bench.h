// `graphserve bench ops`: per-op GPU timings on random weights, outside any model: copy
// bandwidth, the linear paths against cuBLASLt, an estimated decode step, prefill attention per
// kernel, chunked prefill attention and prefill GEMMs (bench/cuda/op_timings.h says what each
// case measures). Each case prints its table to stdout.
#pragma once
#include <string>
#include <vector>

namespace gs {

struct OpBenchCase {
  std::string name;         // as `--cases` names it
  std::string description;  // one line for --help
};

// Every case, in the order `bench ops` runs them.
const std::vector<OpBenchCase>& op_bench_cases();

// Runs the case `name` on GPU 0. Throws gs::Error naming the problem for an unknown case, a build
// without CUDA or a machine without a CUDA GPU.
void run_op_bench(const std::string& name);

}  // namespace gs
