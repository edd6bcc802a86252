// graphserve bench structured: structured output's host cost on this CPU: JSON schema compile
// time (grammar and token-mask cache, as the server compiles a request's schema) and the time of
// each token mask over a tokenizer's vocabulary (structured/structured_bench.h).
#include <fmt/format.h>

#include <fstream>

#include "apps/commands.h"
#include "core/error.h"
#include "structured/structured_bench.h"
#include "tokenizer/tokenizer.h"

namespace gs {

namespace {

struct StructuredArgs {
  std::string tokenizer;
  std::string schemas;
  std::string output_json;
};

nlohmann::json to_json(const structured::Percentiles& p) {
  return {{"count", p.count}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}};
}

void run(const StructuredArgs& a) {
  const Tokenizer tok = Tokenizer::from_dir(a.tokenizer);
  std::vector<int32_t> ends;
  if (tok.eos_id()) ends.push_back(*tok.eos_id());
  auto vocab = std::make_shared<const structured::TokenVocab>(tok, tok.size(), ends);
  std::ifstream in(a.schemas);
  GS_CHECK(in.good(), "cannot read --schemas {}", a.schemas);
  nlohmann::json list = nlohmann::json::parse(in, nullptr, false);
  GS_CHECK(list.is_array(), "--schemas {}: expected a JSON array of schemas", a.schemas);
  std::vector<std::string> schemas;
  for (const auto& s : list) schemas.push_back(s.dump());
  const auto r = structured::bench_structured(vocab, schemas);
  fmt::print("vocabulary {} tokens, {} schemas ({} not compiled)\n", vocab->size(), r.schemas, r.failures.size());
  for (const auto& f : r.failures) fmt::print("  not compiled: {}\n", f);
  auto line = [](const char* what, const structured::Percentiles& p, const char* unit) {
    fmt::print("{:<28} n {:>6}  p50 {:>9.2f}  p90 {:>9.2f}  p99 {:>9.2f}  mean {:>9.2f}  max {:>9.2f} {}\n", what,
               p.count, p.p50, p.p90, p.p99, p.mean, p.max, unit);
  };
  line("compile (grammar + cache)", r.compile_ms, "ms");
  line("  grammar and automaton", r.grammar_ms, "ms");
  line("  mask cache, all entries", r.cache_ms, "ms");
  line("mask per token", r.mask_us, "us");
  line("mask per token, lazy cache", r.lazy_mask_us, "us");
  if (!a.output_json.empty())
    write_output_json(a.output_json, {{"vocab", vocab->size()},
                                      {"schemas", r.schemas},
                                      {"compile_ms", to_json(r.compile_ms)},
                                      {"grammar_ms", to_json(r.grammar_ms)},
                                      {"mask_cache_ms", to_json(r.cache_ms)},
                                      {"mask_us", to_json(r.mask_us)},
                                      {"mask_lazy_cache_us", to_json(r.lazy_mask_us)}});
}

}  // namespace

void add_bench_structured(CLI::App& bench) {
  auto args = std::make_shared<StructuredArgs>();
  CLI::App* cmd =
      bench.add_subcommand("structured", "structured output's host cost: schema compile and token-mask times");
  cmd->add_option("--tokenizer", args->tokenizer, "a Hugging Face tokenizer directory (tokenizer.json)")->required();
  cmd->add_option("--schemas", args->schemas,
                  "a JSON file holding an array of JSON schemas (e.g. tests/data/structured/schemas.json)")
      ->required();
  cmd->add_option("--output-json", args->output_json, "also write the results here");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
