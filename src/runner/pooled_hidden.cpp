// Implements runner/pooled_hidden.h: copies the pooled rows of the hidden states to the host (in
// their dtype) and sums them in float.
#include "runner/pooled_hidden.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace gs {
namespace {

// Adds rows [begin, begin + count) of `hidden` into `sum`.
void add_rows(Backend& be, const Tensor& hidden, int64_t begin, int64_t count, std::vector<float>& sum) {
  const int64_t width = hidden.dim(1);
  const Tensor src = hidden.rows(begin, count);
  std::vector<uint8_t> host(src.nbytes());
  be.copy(Tensor::wrap(host.data(), src.shape(), src.dtype(), Device::cpu()), src);
  be.stream().synchronize();
  for (int64_t i = 0; i < count * width; ++i) {
    float v = 0.0f;
    switch (src.dtype()) {
      case DType::F32: std::memcpy(&v, host.data() + i * 4, 4); break;
      case DType::BF16: {
        uint16_t b;
        std::memcpy(&b, host.data() + i * 2, 2);
        v = bf16_to_f32(b);
        break;
      }
      case DType::F16: {
        uint16_t h;
        std::memcpy(&h, host.data() + i * 2, 2);
        v = f16_to_f32(h);
        break;
      }
      default: fail("pooling: hidden states of dtype {} are not supported", dtype_name(src.dtype()));
    }
    sum[size_t(i % width)] += v;
  }
}

}  // namespace

std::vector<PooledRows> pool_hidden_rows(Backend& be, const Tensor& hidden, const SchedulerOutput& batch,
                                         const HostBatch& hb) {
  std::vector<PooledRows> out;
  for (size_t r = 0; r < batch.requests.size(); ++r) {
    const ScheduledRequest& s = batch.requests[r];
    if (!s.params || s.params->pooling == Pooling::None) continue;
    GS_CHECK(hidden.defined(), "this model cannot pool: its runner keeps no final hidden states");
    const int first = hb.query_start_loc[r];
    // Prompt positions this step computed: [num_computed, min(end, num_prompt)).
    const int end = std::min(s.num_computed_tokens + s.num_new_tokens, s.num_prompt_tokens);
    const int count = end - s.num_computed_tokens;
    if (count <= 0) continue;
    PooledRows p{s.id, std::vector<float>(size_t(hidden.dim(1)), 0.0f), 0, s.num_computed_tokens};
    if (s.params->pooling == Pooling::Last) {
      if (end != s.num_prompt_tokens) continue;  // the last token is in a later chunk
      add_rows(be, hidden, first + count - 1, 1, p.sum);
      p.rows = 1;
      p.begin = end - 1;
    } else {
      add_rows(be, hidden, first, count, p.sum);
      p.rows = count;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gs
