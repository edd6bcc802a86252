// The sampling flags of generate and the benchmarks (--temperature --top-p --top-k --min-p and
// the penalties): each one given overrides a base, the model's defaults or greedy decoding.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "types/sampling_params.h"

namespace gs {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int> top_k;

  // `base` with every flag given put in.
  SamplingParams over(SamplingParams base) const;
};

// `base_help` names what a flag left out falls back to ("the model's default", "greedy").
void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags, const std::string& base_help);

// "greedy" or "temperature 1, top_p 0.95, top_k 50" (only what is on), for result tables.
std::string describe_sampling(const SamplingParams& p);

}  // namespace gs
