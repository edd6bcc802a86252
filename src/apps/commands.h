// The graphserve subcommands; each lives in its own file and registers itself on the CLI.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include <string>
#include <vector>

#include "executor/engine_config.h"

namespace gs {

// Adds the engine flags (--model, --load-format, --preset, --max-num-seqs, ...,
// --compilation-config, -cc.KEY=VALUE, --enforce-eager) to `cmd`, writing into `cfg`.
// With `served_names`, --served-model-name takes several names (all go there, the first also
// to cfg.served_model_name).
void add_engine_options(CLI::App& cmd, EngineConfig& cfg, std::vector<std::string>* served_names = nullptr);
// Applies what add_engine_options cannot express as plain flags (-cc.* settings) and validates.
void finish_engine_options(EngineConfig& cfg);

// Writes a bench command's --output-json file; throws gs::Error naming the file when it cannot.
void write_output_json(const std::string& path, const nlohmann::json& j);

void add_generate_command(CLI::App& app);    // graphserve generate
void add_info_command(CLI::App& app);        // graphserve info
void add_serve_command(CLI::App& app);       // graphserve serve
void add_worker_command(CLI::App& app);      // graphserve worker (tensor-parallel ranks)
void add_bench_latency(CLI::App& bench);     // graphserve bench latency
void add_bench_graphs(CLI::App& bench);      // graphserve bench graphs
void add_bench_throughput(CLI::App& bench);  // graphserve bench throughput
void add_bench_serve(CLI::App& bench);       // graphserve bench serve
void add_bench_kernels(CLI::App& bench);     // graphserve bench kernels
void add_bench_all_reduce(CLI::App& bench);  // graphserve bench all-reduce
void add_bench_embed(CLI::App& bench);       // graphserve bench embed
void add_bench_structured(CLI::App& bench);  // graphserve bench structured
void add_bench_ops(CLI::App& bench);         // graphserve bench ops

}  // namespace gs
