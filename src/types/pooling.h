// Pooling: how a pooling runner (--runner pooling, vLLM's embedding models) turns a prompt's
// final hidden states into one vector, and what a step hands back for it.
//
// A pooling request is a prompt prefilled through the same runner, batches and graphs as a
// generation; the runner returns, per step, the final (normed) hidden states of the positions
// its pooling reads: the prompt's last token (Last), or the sum of this step's prompt rows (Mean,
// added up over the chunks of a chunked prefill). The engine divides, L2-normalises and returns
// the vector instead of a token.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "types/request_id.h"

namespace gs {

enum class Pooling { None, Last, Mean };

Pooling parse_pooling(const std::string& name);  // "last" | "mean"; throws gs::Error
const char* pooling_name(Pooling p);

// One request's share of a step's hidden states.
struct PooledRows {
  RequestId id = 0;
  std::vector<float> sum;  // [hidden]: the sum of the rows (one row for Last)
  int rows = 0;
  int begin = 0;  // the prompt position of the first row
};

// The final vector from the rows gathered over every step: their mean, L2-normalised when
// `normalize`.
std::vector<float> finish_pooling(std::vector<double> sum, int rows, bool normalize);

}  // namespace gs
