// Implements cudagraph/forward_context.h (ForwardContext).
#include "cudagraph/forward_context.h"

#include "core/error.h"

namespace gs {

namespace {
thread_local const ForwardContext* g_current = nullptr;
}  // namespace

const ForwardContext* current_forward_context() { return g_current; }

ForwardContextScope::ForwardContextScope(const ForwardContext& ctx) : ctx_(ctx), previous_(g_current) {
  GS_CHECK(ctx.runtime_mode == CUDAGraphMode::NONE || ctx.runtime_mode == CUDAGraphMode::PIECEWISE ||
               ctx.runtime_mode == CUDAGraphMode::FULL,
           "a forward context's runtime mode must be NONE, PIECEWISE or FULL, not {}", mode_name(ctx.runtime_mode));
  g_current = &ctx_;
}

ForwardContextScope::~ForwardContextScope() { g_current = previous_; }

}  // namespace gs
