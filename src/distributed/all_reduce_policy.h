// Which all-reduce a tensor-parallel group uses for a message: the custom one-shot or two-shot
// all-reduce over NVLink peer memory (distributed/cuda/custom_all_reduce.h) for small and
// medium messages, NCCL for large ones and wherever the ranks cannot reach each other's memory.
// Pure functions of the group's facts, so the choice and its thresholds are tested on the CPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gs {

enum class AllReduceAlgo {
  OneShot,  // every rank reads every peer's whole buffer and sums (one barrier round trip)
  TwoShot,  // reduce-scatter then all-gather over peer memory (each rank reads 2 (N-1)/N of it)
  Nccl,     // ncclAllReduce
};
const char* all_reduce_algo_name(AllReduceAlgo a);  // "one-shot", "two-shot", "nccl"

// The custom kernels move 16-byte packs: a message must be a multiple of this many bytes.
inline constexpr size_t kCustomAllReduceAlign = 16;
// At most this many ranks share the custom all-reduce's signal area.
inline constexpr int kCustomAllReduceMaxRanks = 8;

// Message-size thresholds (bytes, inclusive) of one group; custom_max_bytes is also the size of
// each rank's registered buffer. custom_available false: NCCL for every size.
struct AllReducePolicy {
  bool custom_available = false;
  size_t one_shot_max_bytes = 0;
  size_t custom_max_bytes = 0;
};

// What one rank knows of the group before choosing (gathered from every rank at start-up).
struct AllReduceGroupFacts {
  int world = 1;
  bool disabled = false;        // --disable-custom-all-reduce, or the ranks span several hosts (--nnodes > 1)
  bool cuda = true;             // a CUDA group (the CPU group has no peer memory)
  bool same_host = true;        // every rank reported the same host name
  bool peers_reachable = true;  // every rank mapped every peer's buffer (CUDA IPC, peer access)
  bool supported_dtype = true;  // the activations are bf16 or f32
};

// The thresholds: custom up to 8 MiB, NCCL above. On 2 ranks one-shot for every custom size (there
// two-shot reads as many bytes of the peer and adds a second phase; docs/PERF.md, "Tensor
// parallelism"); on more ranks one-shot up to 256 KiB, two-shot above (each rank then reads 2/N of
// the data).
AllReducePolicy default_all_reduce_policy(int world);
// The policy of a group with `facts`, and in *why_not (when not null) why the custom path is
// off ("" when it is on).
AllReducePolicy choose_all_reduce_policy(const AllReduceGroupFacts& facts, std::string* why_not = nullptr);
// The algorithm for one all-reduce of `bytes` bytes.
AllReduceAlgo choose_all_reduce(const AllReducePolicy& p, size_t bytes);

// The fused all-reduce + residual add + RMSNorm kernel keeps each thread's 8-element chunks of a
// row in registers: a row has at most this many elements.
inline constexpr int64_t kFusedNormMaxHidden = 8 * 4 * 1024;
// It serves messages up to this size (decode batches: 32 rows of 4096 bf16). One block reduces
// each row, so larger messages run fewer rows in parallel than the plain one-shot kernel and the
// two unfused ops are faster there (docs/PERF.md, "Tensor parallelism"). Each rank's buffer takes
// every rank's message: 8 x 256 KiB fits custom_max_bytes.
inline constexpr size_t kFusedNormMaxBytes = 256 * 1024;
// Whether Communicator::all_reduce_add_rms_norm of `rows` x `hidden` elements of `elem_bytes`
// bytes runs as the one fused custom kernel: the message takes the one-shot path and is at most
// kFusedNormMaxBytes, and its rows are whole 8-element chunks (hidden % 8 == 0, hidden <=
// kFusedNormMaxHidden). Else the all-reduce and the norm run one after the other.
bool fuse_all_reduce_add_rms_norm(const AllReducePolicy& p, int64_t rows, int64_t hidden, size_t elem_bytes);
// The column gather of vocab-parallel logits (Communicator::gather_columns) of `rows` rows of
// row_bytes bytes a rank runs on the custom kernel, in calls of as many rows as every rank's
// region fits in custom_max_bytes, where row_bytes is a multiple of 16 and at most
// kCustomGatherMaxCalls calls take the rows; else on NCCL (docs/PERF.md, "Tensor parallelism").
inline constexpr int64_t kCustomGatherMaxCalls = 4;
// The rows of one custom gather call, or 0 where the gather runs on NCCL.
int64_t custom_gather_rows(const AllReducePolicy& p, int world, int64_t rows, size_t row_bytes);
// One start-up log line: which all-reduce each size uses.
std::string describe_all_reduce_policy(const AllReducePolicy& p, const std::string& why_not);

}  // namespace gs
