// graphserve generate: runs prompts through the engine; streams the text of a single prompt
// as it is produced, prints every completion otherwise; tokens/s on stderr at the end.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/sampling_flags.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/llm_engine.h"

namespace gs {
namespace {

struct GenerateArgs {
  EngineConfig cfg;
  SamplingParams params;  // what no sampling flag sets (max_tokens, stop, ...)
  SamplingFlags flags;    // sampling flags given; the rest from the model's defaults
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::vector<int> stop_token_ids;
  std::string output_json;  // token ids (and --logprobs) per prompt
  int logprobs = -1;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<std::string> read_prompts(const GenerateArgs& a) {
  std::vector<std::string> prompts = a.prompts;
  if (!a.prompts_file.empty()) {
    std::ifstream in(a.prompts_file);
    GS_CHECK(in.good(), "--prompts-file: cannot open '{}'", a.prompts_file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
  }
  GS_CHECK(!prompts.empty(), "no prompt: give --prompt TEXT (repeatable) or --prompts-file FILE");
  return prompts;
}

void run(GenerateArgs& a) {
  finish_engine_options(a.cfg);
  const auto prompts = read_prompts(a);
  a.params.stop_token_ids = a.stop_token_ids;
  for (const auto& p : prompts) GS_CHECK(!p.empty(), "the prompt is empty: give some text");
  a.flags.over(a.params).validate(std::numeric_limits<int>::max());  // fail fast, before loading the model
  LLMEngine engine(a.cfg);
  SamplingParams params = a.flags.over(engine.default_sampling_params());
  params.max_tokens = a.params.max_tokens;
  params.min_tokens = a.params.min_tokens;
  params.stop = a.params.stop;
  params.stop_token_ids = a.params.stop_token_ids;
  params.ignore_eos = a.params.ignore_eos;
  params.seed = a.params.seed;
  params.logprobs = a.logprobs;
  spdlog::info("sampling: {}", describe_sampling(params));
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(engine.add_request(p, params));
  const bool stream = prompts.size() == 1;

  std::map<RequestId, std::string> texts;
  std::map<RequestId, std::string> reasons;
  std::map<RequestId, nlohmann::json> tokens, logprobs;
  const double t0 = now_s();
  double first_token_done = 0.0;  // when every request had its first token (end of prefill)
  size_t with_first_token = 0;
  uint64_t generated = 0, prompt_tokens = 0;
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& o : engine.step()) {
      generated += o.new_token_ids.size();
      if (o.num_output_tokens == static_cast<int>(o.new_token_ids.size()) && !o.new_token_ids.empty()) {
        prompt_tokens += o.num_prompt_tokens;
        if (++with_first_token == prompts.size()) first_token_done = now_s();
      }
      if (stream) {
        std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
        std::fflush(stdout);
      }
      texts[o.id] += o.new_text;
      for (int32_t t : o.new_token_ids) tokens[o.id].push_back(t);
      for (const TokenLogprob& lp : o.logprobs) {
        nlohmann::json row = {lp.logprob};
        for (const auto& [tok, v] : lp.top) row.push_back(v);
        logprobs[o.id].push_back(row);
      }
      if (o.finished) reasons[o.id] = std::string(finish_reason_name(o.finish_reason));
    }
  }
  const double t1 = now_s();
  if (stream) {
    std::fputc('\n', stdout);
  } else {
    for (size_t i = 0; i < ids.size(); ++i)
      fmt::print("--- [{}] {} ({})\n{}\n", i, prompts[i], reasons[ids[i]], texts[ids[i]]);
  }
  std::fflush(stdout);  // the text, ended by its newline, before the stats on stderr
  if (!a.output_json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < ids.size(); ++i)
      out.push_back({{"prompt", prompts[i]},
                     {"token_ids", tokens[ids[i]]},
                     {"logprobs", logprobs[ids[i]]},  // per token: its logprob, then the top ones
                     {"finish_reason", reasons[ids[i]]}});
    write_output_json(a.output_json, {{"outputs", out}});
  }
  if (first_token_done == 0.0) first_token_done = t1;
  const double prefill_s = first_token_done - t0, decode_s = t1 - first_token_done;
  const uint64_t decode_tokens = generated - with_first_token;
  fmt::print(stderr,
             "prefill: {} tokens in {:.3f} s ({:.1f} tokens/s); decode: {} tokens in {:.3f} s "
             "({:.1f} tokens/s); {} requests, {} tokens generated in {:.3f} s\n",
             prompt_tokens, prefill_s, prefill_s > 0 ? prompt_tokens / prefill_s : 0.0, decode_tokens, decode_s,
             decode_s > 0 ? decode_tokens / decode_s : 0.0, prompts.size(), generated, t1 - t0);
  if (a.cfg.speculative.enabled()) fmt::print(stderr, "{}\n", engine.stats().spec.summary());
}

void add_sampling_options(CLI::App& cmd, GenerateArgs& a) {
  SamplingParams& p = a.params;
  add_sampling_flags(cmd, a.flags, "the model's generation_config.json, else temperature 1 and no truncation");
  cmd.add_option("--max-tokens", p.max_tokens, "tokens to generate at most")->capture_default_str();
  cmd.add_option("--min-tokens", p.min_tokens, "tokens to generate before eos may end")->capture_default_str();
  cmd.add_option("--stop", p.stop, "stop string (repeatable; not printed)");
  cmd.add_option("--stop-token-id", a.stop_token_ids, "stop token id (repeatable)");
  cmd.add_flag("--ignore-eos", p.ignore_eos, "keep generating after eos");
  cmd.add_option_function<uint64_t>(
      "--sampling-seed", [&p](uint64_t s) { p.seed = s; },
      "seed of every request's sampling (default: drawn from --seed and the request number)");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  args->params.max_tokens = 64;
  auto* cmd = app.add_subcommand("generate", "generate text for prompts (model dir or dummy preset)");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--prompt,-p", args->prompts, "prompt text (repeatable)");
  cmd->add_option("--prompts-file", args->prompts_file, "file with one prompt per line");
  cmd->add_option("--logprobs", args->logprobs, "with --output-json: each token's logprob and this many top ones")
      ->check(CLI::Range(-1, 20));
  cmd->add_option("--output-json", args->output_json, "write each prompt's token ids (and --logprobs) to this file");
  add_sampling_options(*cmd, *args);
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
