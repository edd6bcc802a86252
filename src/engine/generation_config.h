// The default sampling parameters of requests that leave them out, from a model directory's
// generation_config.json, as vLLM's --generation-config reads them.
#pragma once
#include <string>

#include "types/sampling_params.h"

namespace gs {

// source "auto": the model directory's generation_config.json (when it has one); "vllm": none
// (plain defaults: temperature 1, top_p 1, ...); anything else: a directory holding one.
// Reads temperature, top_p, top_k, min_p and repetition_penalty; logs the values it takes.
// Throws gs::Error naming the file and field when a value is of the wrong type or out of range.
SamplingParams load_sampling_defaults(const std::string& source, const std::string& model_dir);

}  // namespace gs
