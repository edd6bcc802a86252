// Tensor parallelism on the CPU in one process: N ModelRunners, one per thread, joined by a
// shared-memory group, fed the same batches (every rank samples the same tokens). Returns
// rank 0's results after checking every rank's equal them.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <thread>

#include "distributed/communicator.h"
#include "runner/serving_sim.h"

namespace gs::test {

inline SimResult simulate_tp(RunnerConfig cfg, int tp, const std::vector<SimRequest>& reqs, int token_budget,
                             RunnerStats* stats = nullptr) {
  cfg.tensor_parallel_size = tp;
  cfg.tp_group = tp > 1 ? make_shm_group_name() : "";
  std::vector<SimResult> res(static_cast<size_t>(tp));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(tp));
  std::vector<std::thread> ranks;
  for (int r = 0; r < tp; ++r) {
    ranks.emplace_back([&, r] {
      try {
        RunnerConfig c = cfg;
        c.tp_rank = r;
        ModelRunner runner(c);
        res[size_t(r)] = simulate(runner, reqs, token_budget);
        if (r == 0 && stats) *stats = runner.stats();
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (int r = 1; r < tp; ++r) EXPECT_EQ(res[size_t(r)].outputs, res[0].outputs) << "rank " << r;
  return res[0];
}

}  // namespace gs::test
