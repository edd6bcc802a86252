#include "bench/op_bench.h"

#include "core/error.h"

#ifdef GS_HAVE_CUDA
#include "bench/cuda/op_timings.h"
#include "core/cuda/cuda_device.h"
#endif

namespace gs {

const std::vector<OpBenchCase>& op_bench_cases() {
  static const std::vector<OpBenchCase> cases{
      {"copy", "device-to-device copy of 1 GiB: ms and TB/s"},
      {"linear", "Backend::linear against cuBLASLt on 1B / 8B projection shapes, 1..128 tokens"},
      {"fp8-linear", "Backend::linear on FP8 weights per FP8 path beside bf16, 1B / 8B shapes, 1..128 tokens"},
      {"fp8-epilogue", "FP8 projections + epilogue op above the skinny kernel: scales in the op vs a pass, 8B shapes"},
      {"decode-step", "the ops of a Llama-3.2-1B decode step in one graph, bs 1..128"},
      {"prefill-attention", "one attention layer's prefill per kernel, head dim 64 / 128, 2k / 8k tokens"},
      {"chunked-prefill", "an 8k prompt's attention layer in chunks of 1k..8k tokens"},
      {"prefill-gemms", "a layer's cuBLASLt GEMMs at 2k / 8k tokens"},
      {"cascade", "8B-shape decode attention over a shared prefix, with and without cascade attention"},
      {"decode-attention",
       "decode attention, 32 / 8 heads at D 128 and 64, 2k / 8k tokens, bf16 and e4m3 (fp8) KV caches"},
      {"decode-kernels", "decode attention per kernel at D 128, GQA 2 / 4, 1..192 requests over 128..8k tokens"},
      {"sampling", "the sampler at 1 / 32 / 128 rows per sampling kind, on flat and on peaked logits"},
  };
  return cases;
}

void run_op_bench(const std::string& name) {
  bool known = false;
  for (const auto& c : op_bench_cases()) known = known || c.name == name;
  GS_CHECK(known, "bench ops: unknown case '{}' (graphserve bench ops --help lists them)", name);
#ifdef GS_HAVE_CUDA
  GS_CHECK(cuda_device_count() > 0, "bench ops times GPU kernels, but this machine has no CUDA device");
  if (name == "copy") bench::time_copy_bandwidth();
  if (name == "linear") bench::time_linear();
  if (name == "fp8-linear") bench::time_fp8_linear();
  if (name == "fp8-epilogue") bench::time_fp8_epilogues();
  if (name == "decode-step") bench::time_decode_step();
  if (name == "prefill-attention") bench::time_prefill_attention();
  if (name == "chunked-prefill") bench::time_chunked_prefill_attention();
  if (name == "prefill-gemms") bench::time_prefill_gemms();
  if (name == "cascade") bench::time_cascade_attention();
  if (name == "decode-attention") bench::time_decode_attention();
  if (name == "decode-kernels") bench::time_decode_kernels();
  if (name == "sampling") bench::time_sampling();
#else
  throw Unsupported(
      "bench ops times GPU kernels, but graphserve was built without CUDA (configure with a CUDA toolkit)");
#endif
}

}  // namespace gs
