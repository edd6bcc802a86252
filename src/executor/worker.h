// The tensor-parallel worker process: one per rank (GPU). It connects to the driver (the
// process running the engine: graphserve serve / generate / bench), receives the runner config,
// joins its rank's group, builds its ModelRunner, then executes every batch the driver sends and
// answers with the sampled tokens (rank 0) or an acknowledgement (the others), until the driver
// says stop or goes away.
#pragma once
#include <string>
#include <vector>

namespace gs {

struct WorkerArgs {
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int rank = 0;
  double connect_timeout_s = 600.0;
};

// Serves one rank until the driver shuts it down (returns 0) or fails (throws gs::Error).
int run_worker(const WorkerArgs& args);

// The processes of this host's ranks: `exe worker --master-addr A --master-port P --rank r`, each
// with CUDA_VISIBLE_DEVICES of its own GPU (the local_index-th of this process's visible GPUs),
// killed when this process dies. Returns their pids.
std::vector<int> spawn_workers(const std::string& exe, const std::string& master_addr, int master_port,
                               const std::vector<int>& ranks);
// Set in a worker's environment, rank 0 records the kernels of every decode step (CUPTI) and,
// when shut down, writes per batch size the tables of `graphserve bench kernels` to this file,
// listing the top $GRAPHSERVE_KERNEL_PROFILE_TOP (default 20) kernels.
inline constexpr const char* kWorkerKernelProfileEnv = "GRAPHSERVE_KERNEL_PROFILE";
inline constexpr const char* kWorkerKernelProfileTopEnv = "GRAPHSERVE_KERNEL_PROFILE_TOP";

// SIGKILLs and reaps the processes (those still alive).
void kill_workers(const std::vector<int>& pids);
// "rank process 1234 exited with status 1" for a pid that has exited, else "".
std::string reap_worker(int pid);
// The graphserve executable to start workers from: $GRAPHSERVE_EXE, else this process's own.
std::string worker_executable();

}  // namespace gs
