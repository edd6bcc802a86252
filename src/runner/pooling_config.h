// PoolingConfig: how an embedding model pools its hidden states, from its sentence-transformers
// files as vLLM reads them: modules.json names a Pooling module (e.g. 1_Pooling/config.json
// with pooling_mode_lasttoken or pooling_mode_mean_tokens) and maybe a Normalize module;
// config.json's matryoshka_dimensions / is_matryoshka say which output sizes (`dimensions`)
// the model was trained for. Without those files: last-token pooling, normalised (vLLM's
// default for decoder-only models converted to embedding).
#pragma once
#include <string>
#include <vector>

#include "types/pooling.h"

namespace gs {

struct PoolingConfig {
  Pooling type = Pooling::Last;
  bool matryoshka = false;           // `dimensions` may shorten the embedding
  std::vector<int> matryoshka_dims;  // the sizes allowed (empty with matryoshka: any)
};

// Reads `model_dir` ("" for a built-in preset: the defaults). Throws gs::Error naming the file
// when one is malformed or asks for a pooling mode other than last-token or mean.
PoolingConfig load_pooling_config(const std::string& model_dir);

}  // namespace gs
