// Implements distributed/all_reduce_policy.h.
#include "distributed/all_reduce_policy.h"

#include <fmt/format.h>

#include <algorithm>

namespace gs {

namespace {

std::string human_bytes(size_t b) {
  if (b >= (size_t(1) << 20) && b % (size_t(1) << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

}  // namespace

const char* all_reduce_algo_name(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::OneShot: return "one-shot";
    case AllReduceAlgo::TwoShot: return "two-shot";
    case AllReduceAlgo::Nccl: return "nccl";
  }
  return "?";
}

AllReducePolicy default_all_reduce_policy(int world) {
  AllReducePolicy p;
  p.custom_available = true;
  p.custom_max_bytes = 8 << 20;
  p.one_shot_max_bytes = world <= 2 ? p.custom_max_bytes : 256 * 1024;
  return p;
}

AllReducePolicy choose_all_reduce_policy(const AllReduceGroupFacts& f, std::string* why_not) {
  std::string why;
  if (f.world < 2)
    why = "a single rank";
  else if (f.disabled)
    why = "disabled (--disable-custom-all-reduce, or the ranks span several hosts)";
  else if (!f.cuda)
    why = "not a CUDA group";
  else if (f.world != 2 && f.world != 4 && f.world != kCustomAllReduceMaxRanks)
    why = fmt::format("{} ranks (the custom kernels are built for 2, 4 or {})", f.world, kCustomAllReduceMaxRanks);
  else if (!f.same_host)
    why = "the ranks are on different hosts";
  else if (!f.peers_reachable)
    why = "some rank cannot map a peer's memory (no CUDA IPC / peer access between the GPUs)";
  else if (!f.supported_dtype)
    why = "the activations are neither bf16 nor f32";
  if (why_not) *why_not = why;
  return why.empty() ? default_all_reduce_policy(f.world) : AllReducePolicy{};
}

AllReduceAlgo choose_all_reduce(const AllReducePolicy& p, size_t bytes) {
  if (!p.custom_available || bytes == 0 || bytes % kCustomAllReduceAlign != 0 || bytes > p.custom_max_bytes)
    return AllReduceAlgo::Nccl;
  return bytes <= p.one_shot_max_bytes ? AllReduceAlgo::OneShot : AllReduceAlgo::TwoShot;
}

bool fuse_all_reduce_add_rms_norm(const AllReducePolicy& p, int64_t rows, int64_t hidden, size_t elem_bytes) {
  if (rows <= 0 || hidden <= 0 || hidden % 8 != 0 || hidden > kFusedNormMaxHidden) return false;
  const size_t bytes = size_t(rows * hidden) * elem_bytes;
  return bytes <= kFusedNormMaxBytes && choose_all_reduce(p, bytes) == AllReduceAlgo::OneShot;
}

int64_t custom_gather_rows(const AllReducePolicy& p, int world, int64_t rows, size_t row_bytes) {
  if (!p.custom_available || world < 2 || rows <= 0 || row_bytes == 0 || row_bytes % kCustomAllReduceAlign != 0)
    return 0;
  const int64_t per_call = int64_t(p.custom_max_bytes / (size_t(world) * row_bytes));
  if (per_call == 0 || (rows + per_call - 1) / per_call > kCustomGatherMaxCalls) return 0;
  return std::min(rows, per_call);
}

std::string describe_all_reduce_policy(const AllReducePolicy& p, const std::string& why_not) {
  if (!p.custom_available) return fmt::format("NCCL for every size (custom all-reduce off: {})", why_not);
  std::string custom = fmt::format("custom one-shot up to {}", human_bytes(p.one_shot_max_bytes));
  if (p.one_shot_max_bytes < p.custom_max_bytes)
    custom += fmt::format(", custom two-shot up to {}", human_bytes(p.custom_max_bytes));
  return fmt::format(
      "{}, NCCL above (and for sizes not a multiple of {} bytes); one-shot sizes up to {} fuse the residual add "
      "+ RMSNorm after o_proj and down; the logits' column gather is custom up to {} calls of {}",
      custom, kCustomAllReduceAlign, human_bytes(kFusedNormMaxBytes), kCustomGatherMaxCalls,
      human_bytes(p.custom_max_bytes));
}

}  // namespace gs
