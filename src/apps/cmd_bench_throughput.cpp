// graphserve bench throughput: offline throughput of the whole engine on random prompts
// (all requests queued at once, ignore_eos, fixed input and output lengths).
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/commands.h"
#include "apps/sampling_flags.h"
#include "core/error.h"
#include "engine/llm_engine.h"
#include "model/model_config.h"

namespace gs {
namespace {

struct ThroughputArgs {
  EngineConfig cfg;
  int num_prompts = 64;
  int input_len = 128;
  int output_len = 128;
  SamplingFlags sampling;
  std::string output_json;
};

void run(ThroughputArgs& a) {
  finish_engine_options(a.cfg);
  GS_CHECK(a.num_prompts >= 1, "--num-prompts must be >= 1, got {}", a.num_prompts);
  GS_CHECK(a.input_len >= 1 && a.output_len >= 1, "--input-len and --output-len must be >= 1");
  LLMEngine engine(a.cfg);
  GS_CHECK(a.input_len + a.output_len <= engine.max_model_len(),
           "--input-len + --output-len = {} exceeds max_model_len {}", a.input_len + a.output_len,
           engine.max_model_len());
  std::mt19937_64 rng(a.cfg.seed);
  const int vocab = engine.model_config().vocab_size;
  SamplingParams p = a.sampling.over(SamplingParams{});
  p.max_tokens = a.output_len;
  p.ignore_eos = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.num_prompts; ++i) {
    std::vector<int32_t> prompt(a.input_len);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % vocab);
    engine.add_request(std::move(prompt), p);
  }
  uint64_t out_tokens = 0;
  while (engine.has_unfinished_requests())
    for (const auto& o : engine.step()) out_tokens += o.new_token_ids.size();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t total = out_tokens + uint64_t(a.num_prompts) * a.input_len;
  const EngineStats st = engine.stats();
  fmt::print("model {}, {} prompts, input {}, output {}, sampling: {}\n", engine.model_name(), a.num_prompts,
             a.input_len, a.output_len, describe_sampling(p));
  fmt::print(
      "elapsed {:.3f} s: {:.2f} requests/s, {:.1f} total tokens/s, {:.1f} output tokens/s, "
      "{} preemptions\n",
      s, a.num_prompts / s, total / s, out_tokens / s, st.num_preemptions);
  if (a.cfg.speculative.enabled()) fmt::print("{}\n", st.spec.summary());
  if (a.output_json.empty()) return;
  nlohmann::json j = {
      {"model", engine.model_name()},
      {"num_prompts", a.num_prompts},
      {"input_len", a.input_len},
      {"output_len", a.output_len},
      {"sampling", describe_sampling(p)},
      {"elapsed_time", s},
      {"requests_per_second", a.num_prompts / s},
      {"tokens_per_second", total / s},
      {"output_tokens_per_second", out_tokens / s},
      {"total_num_tokens", total},
      {"num_preemptions", st.num_preemptions},
      {"spec_decode",
       {{"num_drafts", st.spec.num_drafts},
        {"num_draft_tokens", st.spec.num_draft_tokens},
        {"num_accepted_tokens", st.spec.num_accepted_tokens},
        {"mean_acceptance_length", st.spec.mean_accepted_length()}}},
      {"steps",
       {{"NONE", st.graphs.steps_none}, {"PIECEWISE", st.graphs.steps_piecewise}, {"FULL", st.graphs.steps_full}}}};
  write_output_json(a.output_json, j);
}

}  // namespace

void add_bench_throughput(CLI::App& bench) {
  auto args = std::make_shared<ThroughputArgs>();
  auto* cmd = bench.add_subcommand("throughput", "offline engine throughput on random prompts");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--num-prompts", args->num_prompts, "requests")->capture_default_str();
  cmd->add_option("--input-len", args->input_len, "prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", args->output_len, "generated tokens per request")->capture_default_str();
  add_sampling_flags(*cmd, args->sampling, "temperature 1, no truncation");
  cmd->add_option("--output-json", args->output_json, "write the results here");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
