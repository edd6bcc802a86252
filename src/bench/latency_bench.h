// Latency benchmark of the model runner alone: synthetic batches, no engine, no tokenizer.
// Optionally every prompt begins with a shared, already computed prefix (shared_prefix_len).
//
// One iteration prefills `batch_size` prompts of `input_len` tokens (in chunks of at most
// max_num_batched_tokens), then decodes `output_len` steps of the whole batch with `sampling`
// (greedy by default; every request seeded by its index). With num_speculative_tokens = k (the
// runner built with that speculative config) every decode step is a verification step: each
// request schedules its last token and k synthetic proposals, a uniform batch of 1 + k tokens per
// request, and keeps what the runner accepted.
#pragma once
#include <functional>
#include <vector>

#include "runner/model_runner.h"

namespace gs {

struct LatencyBenchOptions {
  int batch_size = 1;
  int input_len = 32;
  int output_len = 128;
  int num_iters = 3;
  int num_warmup_iters = 1;
  int max_num_batched_tokens = 2048;  // the runner's token budget per step (prefill chunks)
  int num_loras = 0;                  // > 0: request r uses LoRA adapter 1 + r % num_loras (--lora-modules order)
  int num_speculative_tokens = 0;     // > 0: decode steps verify this many proposals per request
  // > 0: every prompt starts with the same shared_prefix_len tokens (a multiple of the block size)
  // in the same KV blocks, computed before the timer starts, as a prefix cache hit would leave them;
  // input_len tokens of each prompt follow it. Prefill then times the requests' own tokens (a
  // cached prompt's time to first token) and decode reads the shared blocks (cascade attention).
  int shared_prefix_len = 0;
  SamplingParams sampling = greedy();
  // The prompts are prefilled in the first iteration only (warm-up or not; its time is prefill_ms),
  // and every later one rewinds each request to what that prefill left (the prompt computed, its
  // first token sampled) and decodes again: decode steps at the prompt's context without a
  // prefill an iteration (bench graphs, where long prompts would otherwise dominate the run).
  bool prefill_once = false;
  // Called around the decode steps, and around the prefill, of each measured iteration (a kernel
  // profiler's start / stop).
  std::function<void()> on_decode_begin{}, on_decode_end{};
  std::function<void()> on_prefill_begin{}, on_prefill_end{};

  static SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }
};

struct LatencyResult {
  double prefill_ms = 0;        // median over iterations, all chunks of one prefill
  double decode_ms_median = 0;  // per decode step, over all iterations
  double decode_ms_p90 = 0;
  std::vector<double> decode_ms;  // every measured decode step
  double d2h_bytes_per_step = 0;  // device-to-host bytes of a decode step (sampled ids, logprobs)
};

// The model as the benchmark drives it: the ModelRunner, or the tensor-parallel worker processes
// (apps/bench_model.h).
struct BenchModel {
  std::function<RunnerOutput(const SchedulerOutput&)> execute;
  std::function<RunnerStats()> stats;
  int max_model_len = 0, block_size = 0, num_kv_blocks = 0, vocab_size = 0;
};

// Throws gs::Error when the runner's limits cannot hold the batch (naming the limit).
LatencyResult run_latency_bench(const BenchModel& model, const LatencyBenchOptions& opts);
LatencyResult run_latency_bench(ModelRunner& runner, const LatencyBenchOptions& opts);

// The q-quantile (0..1) of `v` (nearest rank); 0 for an empty vector.
double quantile(std::vector<double> v, double q);

}  // namespace gs
