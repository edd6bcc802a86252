// The GPU communicator: NCCL collectives on the CUDA backend's stream (captured into graphs).
#pragma once
#include <memory>
#include <string>

#include "distributed/communicator.h"

namespace gs {

// A fresh NCCL unique id, hex-encoded (the group id rank 0 hands to the others).
std::string make_nccl_group_id();
// Joins the NCCL group `group` (make_nccl_group_id's text) as `rank` of `world` on the CUDA
// backend's device. Blocks until every rank has joined.
std::unique_ptr<Communicator> make_nccl_communicator(const std::string& group, int rank, int world, Backend& backend);

}  // namespace gs
