// The GPU communicator: NCCL collectives on the CUDA backend's stream (captured into graphs), and
// the custom all-reduce over NVLink peer memory where every rank can map its peers' buffers.
#pragma once
#include <memory>
#include <string>

#include "distributed/all_reduce_policy.h"
#include "distributed/communicator.h"
#include "ops/kernel_options.h"

namespace gs {

// A fresh NCCL unique id, hex-encoded (the group id rank 0 hands to the others).
std::string make_nccl_group_id();
// Joins the NCCL group `group` (make_nccl_group_id's text) as `rank` of `world` on the CUDA
// backend's device. Blocks until every rank has joined. Unless disable_custom_all_reduce, the
// ranks then set up the custom all-reduce (distributed/cuda/custom_all_reduce.h) when every
// rank is on one host and maps every peer's memory; start-up logs which all-reduce each size uses.
// `options`: the custom all-reduce's fused kernel variants.
std::unique_ptr<Communicator> make_nccl_communicator(const std::string& group, int rank, int world, Backend& backend,
                                                     bool disable_custom_all_reduce = false,
                                                     const AllReduceKernelOptions& options = {});

// One all-reduce of t on `comm` (made by make_nccl_communicator) with `algo`, whatever the policy
// would pick: how the all-reduce benchmark times each path. A custom algo needs the custom path.
void all_reduce_with(Communicator& comm, const Tensor& t, AllReduceAlgo algo);
// The all-reduce policy `comm` (made by make_nccl_communicator) runs with.
AllReducePolicy all_reduce_policy(const Communicator& comm);

}  // namespace gs
