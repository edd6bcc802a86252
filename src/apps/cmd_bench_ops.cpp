// graphserve bench ops: per-op GPU timings on random weights, outside any model
// (bench/op_bench.h): copy bandwidth, linear, an estimated decode step, prefill attention per
// kernel, chunked prefill attention, prefill GEMMs.
#include <fmt/format.h>

#include "apps/commands.h"
#include "bench/op_bench.h"

namespace gs {

void add_bench_ops(CLI::App& bench) {
  auto cases = std::make_shared<std::vector<std::string>>();
  std::vector<std::string> names;
  std::string help = "Cases to run, comma-separated (default: all):";
  for (const auto& c : op_bench_cases()) {
    names.push_back(c.name);
    help += fmt::format("\n  {}: {}", c.name, c.description);
  }
  *cases = names;
  CLI::App* cmd = bench.add_subcommand("ops", "Per-op GPU timings on random weights (copy, linear, attention, GEMMs)");
  cmd->add_option("--cases", *cases, help)->delimiter(',')->check(CLI::IsMember(names));
  cmd->callback([cases] {
    for (const auto& name : *cases) run_op_bench(name);
  });
}

}  // namespace gs
