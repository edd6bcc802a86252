// graphserve worker: tensor-parallel ranks of one host, serving the driver (graphserve serve /
// generate / bench on node 0) at --master-addr:--master-port. The driver starts its own host's
// workers; other hosts run `graphserve worker --nnodes N --node-rank k --tensor-parallel-size T
// --master-addr A --master-port P`. The driver sends the model and engine settings, so the
// worker takes no model flags.
#include <sys/wait.h>

#include "apps/commands.h"
#include "core/error.h"
#include "core/logging.h"
#include "executor/worker.h"

namespace gs {

namespace {

struct WorkerCmd {
  WorkerArgs args;
  int rank = -1;  // set by the driver for the processes it starts
  int nnodes = 1, node_rank = 0, tensor_parallel_size = 1;
};

// This host's ranks: one runs in this process, several as child processes (one GPU each).
int run_node(const WorkerCmd& c) {
  GS_CHECK(c.nnodes >= 1 && c.node_rank >= 0 && c.node_rank < c.nnodes, "--node-rank {} outside [0, --nnodes {})",
           c.node_rank, c.nnodes);
  GS_CHECK(c.tensor_parallel_size % c.nnodes == 0, "--tensor-parallel-size {} must split evenly over --nnodes {}",
           c.tensor_parallel_size, c.nnodes);
  GS_CHECK(c.args.master_port > 0, "graphserve worker needs --master-port (the driver's, on node 0)");
  const int per_node = c.tensor_parallel_size / c.nnodes;
  std::vector<int> ranks;
  for (int i = 0; i < per_node; ++i) ranks.push_back(c.node_rank * per_node + i);
  spdlog::info("worker node {} of {}: ranks {}..{} of {}, driver at {}:{}", c.node_rank, c.nnodes, ranks.front(),
               ranks.back(), c.tensor_parallel_size, c.args.master_addr, c.args.master_port);
  if (ranks.size() == 1) {
    WorkerArgs a = c.args;
    a.rank = ranks[0];
    return run_worker(a);
  }
  const std::vector<int> pids = spawn_workers(worker_executable(), c.args.master_addr, c.args.master_port, ranks);
  int rc = 0;
  for (int pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

}  // namespace

void add_worker_command(CLI::App& app) {
  auto c = std::make_shared<WorkerCmd>();
  auto* cmd = app.add_subcommand("worker", "Tensor-parallel worker ranks of one host, serving the driver on node 0");
  cmd->add_option("--master-addr", c->args.master_addr, "address of node 0 (the driver)")->capture_default_str();
  cmd->add_option("--master-port", c->args.master_port, "the driver's --master-port")->required();
  cmd->add_option("--nnodes", c->nnodes, "hosts in the group")->capture_default_str();
  cmd->add_option("--node-rank", c->node_rank, "this host's index (1..nnodes-1)")->capture_default_str();
  cmd->add_option("--tensor-parallel-size", c->tensor_parallel_size, "ranks over all hosts")->capture_default_str();
  cmd->add_option("--rank", c->rank, "run exactly this rank (set by the driver for the workers it starts)");
  cmd->callback([c] {
    int rc = 0;
    if (c->rank >= 0) {
      WorkerArgs a = c->args;
      a.rank = c->rank;
      rc = run_worker(a);
    } else {
      rc = run_node(*c);
    }
    if (rc != 0) throw Error(fmt::format("worker exited with status {}", rc));
  });
}

}  // namespace gs
