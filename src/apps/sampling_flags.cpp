// Implements apps/sampling_flags.h.
#include "apps/sampling_flags.h"

#include <fmt/format.h>

namespace gs {

SamplingParams SamplingFlags::over(SamplingParams p) const {
  if (temperature) p.temperature = *temperature;
  if (top_p) p.top_p = *top_p;
  if (top_k) p.top_k = *top_k;
  if (min_p) p.min_p = *min_p;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (presence_penalty) p.presence_penalty = *presence_penalty;
  if (frequency_penalty) p.frequency_penalty = *frequency_penalty;
  return p;
}

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f, const std::string& base_help) {
  const std::string d = " (default: " + base_help + ")";
  cmd.add_option("--temperature", f.temperature, "sampling temperature, 0 = greedy" + d);
  cmd.add_option("--top-p", f.top_p, "nucleus sampling, (0, 1]" + d);
  cmd.add_option("--top-k", f.top_k, "keep the k most likely tokens, 0 = off" + d);
  cmd.add_option("--min-p", f.min_p, "keep tokens at least min_p times the top one's probability, [0, 1]" + d);
  cmd.add_option("--repetition-penalty", f.repetition_penalty, "> 0, 1 = off" + d);
  cmd.add_option("--presence-penalty", f.presence_penalty, "[-2, 2]" + d);
  cmd.add_option("--frequency-penalty", f.frequency_penalty, "[-2, 2]" + d);
}

std::string describe_sampling(const SamplingParams& p) {
  if (p.greedy()) return "greedy";
  std::string s = fmt::format("temperature {}", p.temperature);
  if (p.top_p < 1.0f) s += fmt::format(", top_p {}", p.top_p);
  if (p.top_k > 0) s += fmt::format(", top_k {}", p.top_k);
  if (p.min_p > 0.0f) s += fmt::format(", min_p {}", p.min_p);
  if (p.repetition_penalty != 1.0f) s += fmt::format(", repetition_penalty {}", p.repetition_penalty);
  if (p.presence_penalty != 0.0f) s += fmt::format(", presence_penalty {}", p.presence_penalty);
  if (p.frequency_penalty != 0.0f) s += fmt::format(", frequency_penalty {}", p.frequency_penalty);
  return s;
}

}  // namespace gs
