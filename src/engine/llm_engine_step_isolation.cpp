// Isolation of a failing request: when the executor throws on a step (a numerical edge, a
// parameter that slipped through validation), the step's requests are run again one by one.
// Those that fail alone are aborted with the error; the others take their step as usual, so
// one request can no longer end every other request of the engine.
#include <chrono>

#include "core/error.h"
#include "core/logging.h"
#include "engine/llm_engine_impl.h"

namespace gs {

void LLMEngine::Impl::run_alone(const SchedulerOutput& batch, const std::string& error,
                                std::vector<RequestOutput>& outs) {
  if (batch.requests.size() > 1)
    spdlog::warn("a step of {} requests failed ({}); running each alone to find the cause", batch.requests.size(),
                 error);
  std::vector<std::pair<RequestId, std::string>> failed;
  std::vector<std::pair<const ScheduledRequest*, std::vector<SampledToken>>> sampled;
  for (const ScheduledRequest& s : batch.requests) {
    try {
      if (batch.requests.size() == 1) throw Error(error);
      SchedulerOutput one;
      one.requests.push_back(s);
      RunnerOutput r = exec->execute(one);
      if (!s.sample) continue;
      GS_CHECK(!r.sampled.empty() && r.sampled[0].id == s.id,
               "internal error: the runner returned no token for request {}", s.id);
      sampled.emplace_back(&s, std::move(r.sampled));
    } catch (const std::exception& e) {
      failed.emplace_back(s.id, e.what());
      // Its KV for this step is not trustworthy: nothing of it may become a cached prefix.
      requests.at(s.id)->request().num_computed_tokens = s.num_computed_tokens;
    }
  }
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  for (auto& [s, tokens] : sampled) take_tokens(*s, tokens, now, outs);
  sched.on_step_executed();
  for (auto& [id, why] : failed) {
    spdlog::error("request {} made the engine step fail and is aborted: {}", id, why);
    auto it = requests.find(id);
    if (it == requests.end()) continue;
    RequestOutput o = it->second->aborted();
    o.error = why;
    sched.finish(&it->second->request());
    requests.erase(it);
    outs.push_back(std::move(o));
  }
}

}  // namespace gs
