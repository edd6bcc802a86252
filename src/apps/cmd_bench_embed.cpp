// graphserve bench embed: embeddings throughput of a pooling runner (--runner pooling is implied):
// --batch-size prompts of --input-len random tokens submitted together, prefilled in batches of
// --max-num-batched-tokens through the engine, pooled and L2-normalised; the wall time from
// submission to the last embedding, median over --num-iters.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/commands.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/llm_engine.h"

namespace gs {
namespace {

struct EmbedArgs {
  EngineConfig cfg;
  int batch_size = 64;
  int input_len = 512;
  int num_iters = 10;
  int num_warmup = 2;
  std::string output_json;
};

// One batch of embeddings; returns the seconds it took.
double embed_batch(LLMEngine& engine, const std::vector<std::vector<int32_t>>& prompts, Pooling pooling) {
  SamplingParams p;
  p.pooling = pooling;
  p.max_tokens = 1;
  p.temperature = 0.0f;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& ids : prompts) engine.add_request(ids, p);
  size_t done = 0;
  while (engine.has_unfinished_requests())
    for (const RequestOutput& o : engine.step()) {
      GS_CHECK(o.error.empty(), "embedding failed: {}", o.error);
      if (o.finished) {
        GS_CHECK(!o.embedding.empty(), "request {} finished without an embedding", o.id);
        ++done;
      }
    }
  GS_CHECK(done == prompts.size(), "{} embeddings for {} prompts", done, prompts.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(EmbedArgs& a) {
  a.cfg.runner = "pooling";
  finish_engine_options(a.cfg);
  LLMEngine engine(a.cfg);
  const int vocab = engine.model_config().vocab_size;
  std::mt19937 rng(1234);
  std::vector<std::vector<int32_t>> prompts(size_t(a.batch_size), std::vector<int32_t>(size_t(a.input_len)));
  for (auto& ids : prompts)
    for (int32_t& t : ids) t = static_cast<int32_t>(rng() % uint32_t(vocab));
  const Pooling pooling = a.cfg.pooling_type.empty() ? Pooling::Last : parse_pooling(a.cfg.pooling_type);
  for (int i = 0; i < a.num_warmup; ++i) embed_batch(engine, prompts, pooling);
  std::vector<double> secs;
  for (int i = 0; i < a.num_iters; ++i) secs.push_back(embed_batch(engine, prompts, pooling));
  std::sort(secs.begin(), secs.end());
  const double med = secs[secs.size() / 2];
  const double seqs = a.batch_size / med, toks = double(a.batch_size) * a.input_len / med;
  fmt::print("embed {}: batch {} x {} tokens, {} pooling, max_num_batched_tokens {}\n",
             a.cfg.model.empty() ? a.cfg.preset : a.cfg.model, a.batch_size, a.input_len, pooling_name(pooling),
             a.cfg.max_num_batched_tokens);
  fmt::print("batch time {:.2f} ms median ({:.2f} min, {:.2f} max over {}): {:.1f} sequences/s, {:.0f} tokens/s\n",
             med * 1e3, secs.front() * 1e3, secs.back() * 1e3, secs.size(), seqs, toks);
  if (a.output_json.empty()) return;
  write_output_json(a.output_json, {{"model", a.cfg.model.empty() ? a.cfg.preset : a.cfg.model},
                                    {"batch_size", a.batch_size},
                                    {"input_len", a.input_len},
                                    {"pooling", pooling_name(pooling)},
                                    {"max_num_batched_tokens", a.cfg.max_num_batched_tokens},
                                    {"batch_ms_median", med * 1e3},
                                    {"sequences_per_s", seqs},
                                    {"tokens_per_s", toks}});
}

}  // namespace

void add_bench_embed(CLI::App& bench) {
  auto args = std::make_shared<EmbedArgs>();
  auto* cmd = bench.add_subcommand("embed", "Embeddings throughput of a pooling runner (batched prefill)");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--batch-size", args->batch_size, "Prompts per batch")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", args->input_len, "Tokens per prompt")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters", args->num_iters, "Measured batches")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters-warmup", args->num_warmup, "Unmeasured batches first")->check(CLI::NonNegativeNumber);
  cmd->add_option("--output-json", args->output_json, "Write the results as JSON to this file");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
