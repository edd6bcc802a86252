// RequestId: the engine's number for a request, unique for the engine's lifetime; every layer
// that names a request (scheduler, runner, executor, pooling) uses it.
#pragma once
#include <cstdint>

namespace gs {

using RequestId = uint64_t;

}  // namespace gs
