// The CPU communicator: collectives through a shared-memory segment, run as closures on the
// CPU stream (so CPU graphs capture and replay them). Each collective moves data in chunks of
// one slot: every rank writes its chunk into its own slot, a barrier, every rank reads what it
// needs from all slots, a barrier (so no slot is overwritten while a peer still reads it).
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>

#include "core/cpu_stream.h"
#include "core/error.h"
#include "distributed/communicator.h"
#include "distributed/shm_segment.h"

namespace gs {

namespace {

constexpr size_t kSlotBytes = size_t(4) << 20;

float load_elem(const uint8_t* p, DType dt, size_t i) {
  if (dt == DType::F32) return reinterpret_cast<const float*>(p)[i];
  return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
}

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(const std::string& group, int rank, int world, Backend& backend, double timeout_s)
      : rank_(rank), world_(world), stream_(cpu_stream(backend)), seg_(group, rank, world, kSlotBytes, timeout_s) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string name() const override { return "shm"; }

  void all_reduce(const Tensor& t) override {
    const DType dt = t.dtype();
    GS_CHECK(dt == DType::F32 || dt == DType::BF16, "all_reduce: {} must be f32 or bf16", t.str());
    auto* p = static_cast<uint8_t*>(t.data());
    const size_t es = dtype_size(dt), n = size_t(t.numel());
    stream_.launch([this, p, es, n, dt] {
      exchange(
          "all_reduce", n * es, es, [&](size_t off, size_t len) { std::memcpy(seg_.slot(rank_), p + off, len); },
          [&](size_t off, size_t len) { reduce_into(p + off, len / es, dt); });
    });
  }

  void all_gather(const Tensor& in, const Tensor& out) override {
    GS_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * world_, "all_gather: out {} must hold {} x in {}",
             out.str(), world_, in.str());
    const auto* src = static_cast<const uint8_t*>(in.data());
    auto* dst = static_cast<uint8_t*>(out.data());
    const size_t bytes = in.nbytes();
    stream_.launch([this, src, dst, bytes] {
      exchange(
          "all_gather", bytes, 1, [&](size_t off, size_t len) { std::memcpy(seg_.slot(rank_), src + off, len); },
          [&](size_t off, size_t len) {
            for (int r = 0; r < world_; ++r) std::memcpy(dst + size_t(r) * bytes + off, seg_.slot(r), len);
          });
    });
  }

  void broadcast(const Tensor& t, int root) override {
    GS_CHECK(root >= 0 && root < world_, "broadcast: root {} outside [0, {})", root, world_);
    auto* p = static_cast<uint8_t*>(t.data());
    const size_t bytes = t.nbytes();
    stream_.launch([this, p, bytes, root] {
      exchange(
          "broadcast", bytes, 1,
          [&](size_t off, size_t len) {
            if (rank_ == root) std::memcpy(seg_.slot(root), p + off, len);
          },
          [&](size_t off, size_t len) {
            if (rank_ != root) std::memcpy(p + off, seg_.slot(root), len);
          });
    });
  }

  void gather_columns(const Tensor& local, const Tensor& scratch, const Tensor& out) override {
    check_gather_columns(local, scratch, out, world_);
    all_gather(local, scratch.prefix({world_ * local.numel()}));
    const auto* s = static_cast<const uint8_t*>(scratch.data());
    auto* o = static_cast<uint8_t*>(out.data());
    const size_t es = dtype_size(out.dtype()), n = size_t(local.dim(0)), c = size_t(local.dim(1)),
                 w = size_t(out.dim(1));
    stream_.launch([=, world = world_] {
      for (int r = 0; r < world; ++r) {
        const size_t col = size_t(r) * c;
        if (col >= w) break;
        const size_t cols = std::min(c, w - col);
        for (size_t i = 0; i < n; ++i)
          std::memcpy(o + (i * w + col) * es, s + ((size_t(r) * n + i) * c) * es, cols * es);
      }
    });
  }

  void barrier() override { seg_.barrier("barrier"); }

 private:
  static CpuStream& cpu_stream(Backend& backend) {
    auto* s = dynamic_cast<CpuStream*>(&backend.stream());
    GS_CHECK(s, "the shared-memory communicator runs on the CPU backend, not on {}", backend.name());
    return *s;
  }

  // Moves `bytes` per rank in slot-sized chunks (multiples of `align`): put(off, len) fills this
  // rank's slot, take(off, len) reads the peers' slots after everyone has put.
  void exchange(const char* what, size_t bytes, size_t align, const std::function<void(size_t, size_t)>& put,
                const std::function<void(size_t, size_t)>& take) {
    const size_t chunk = seg_.slot_bytes() / align * align;
    for (size_t off = 0; off < bytes; off += chunk) {
      const size_t len = std::min(chunk, bytes - off);
      put(off, len);
      seg_.barrier(what);
      take(off, len);
      seg_.barrier(what);
    }
  }

  // dst[i] = sum over ranks r = 0..N-1 of slot r's element i, summed in f32 in that order.
  void reduce_into(uint8_t* dst, size_t n, DType dt) {
    for (size_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int r = 0; r < world_; ++r) acc += load_elem(seg_.slot(r), dt, i);
      if (dt == DType::F32)
        reinterpret_cast<float*>(dst)[i] = acc;
      else
        reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(acc);
    }
  }

  int rank_, world_;
  CpuStream& stream_;
  ShmSegment seg_;
};

}  // namespace

std::unique_ptr<Communicator> make_shm_communicator(const std::string& group, int rank, int world, Backend& backend,
                                                    double timeout_s) {
  return std::make_unique<ShmCommunicator>(group, rank, world, backend, timeout_s);
}

std::string make_shm_group_name() {
  std::random_device rd;
  return "/graphserve-tp-" + std::to_string(getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
}

}  // namespace gs
