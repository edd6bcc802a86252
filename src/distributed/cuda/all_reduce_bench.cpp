// Implements distributed/cuda/all_reduce_bench.h.
#include "distributed/cuda/all_reduce_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "distributed/cuda/nccl_communicator.h"

namespace gs {

namespace {

// Rank r's input element i: a multiple of 1/8 in [-1, 1], so every partial sum is exact in bf16.
float input_value(size_t i, int rank) { return float(int((i * 7 + size_t(rank) * 13) % 17) - 8) / 8.0f; }

float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Runs one eager all-reduce of fresh inputs and returns the largest error vs the exact sum.
double check_once(Communicator& comm, Backend& be, const Tensor& x, AllReduceAlgo algo) {
  const size_t n = size_t(x.numel());
  std::vector<float> in(n);
  for (size_t i = 0; i < n; ++i) in[i] = input_value(i, comm.rank());
  be.copy(x, be.upload(in.data(), DType::F32, x.shape(), DType::BF16));
  all_reduce_with(comm, x, algo);
  std::vector<uint16_t> out(n);
  be.stream().synchronize();
  GS_CUDA_CHECK(cudaMemcpy(out.data(), x.data(), n * 2, cudaMemcpyDeviceToHost));
  double err = 0;
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < comm.world_size(); ++r) want += input_value(i, r);
    err = std::max(err, double(std::fabs(bf16_to_float(out[i]) - want)));
  }
  return err;
}

// Average microseconds of one op(): `calls` of them captured in one graph, replayed.
double time_in_graph(Communicator& comm, Backend& be, cudaStream_t s, const std::function<void()>& op, int calls,
                     int replays) {
  be.stream().begin_capture();
  for (int c = 0; c < calls; ++c) op();
  const std::unique_ptr<Graph> graph = be.stream().end_capture();
  for (int w = 0; w < 3; ++w) graph->replay();
  comm.barrier();
  CudaEventTimer timer(s);
  timer.start();
  for (int r = 0; r < replays; ++r) graph->replay();
  timer.stop();
  const double ms = timer.elapsed_ms();
  comm.barrier();
  return ms * 1000.0 / double(calls * replays);
}

// The largest |a - b| of two f32 or bf16 device tensors of one shape.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const size_t n = size_t(a.numel());
  auto host = [n](const Tensor& t) {
    std::vector<float> v(n);
    if (t.dtype() == DType::F32) {
      GS_CUDA_CHECK(cudaMemcpy(v.data(), t.data(), n * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<uint16_t> h(n);
      GS_CUDA_CHECK(cudaMemcpy(h.data(), t.data(), n * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; ++i) v[i] = bf16_to_float(h[i]);
    }
    return v;
  };
  const std::vector<float> va = host(a), vb = host(b);
  double d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, double(std::fabs(va[i] - vb[i])));
  return d;
}

// The operands of one all-reduce + add_rms_norm: bf16 x [rows, hidden] (this rank's partial
// sums), f32 residual, bf16 w.
struct NormOperands {
  Tensor x, residual, w;
};

NormOperands norm_operands(Backend& be, int rank, int rows, int hidden) {
  const size_t n = size_t(rows) * size_t(hidden);
  std::vector<float> x(n), res(n), w(static_cast<size_t>(hidden));
  for (size_t i = 0; i < n; ++i) x[i] = input_value(i, rank), res[i] = float(int(i % 29) - 14) / 16.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f + float(i % 11) / 16.0f;
  const Shape shape{rows, hidden};
  return {be.upload(x.data(), DType::F32, shape, DType::BF16), be.upload(res.data(), DType::F32, shape, DType::F32),
          be.upload(w.data(), DType::F32, {hidden}, DType::BF16)};
}

}  // namespace

std::vector<AllReduceNormTiming> bench_all_reduce_add_rms_norm(Communicator& comm, Backend& backend,
                                                               const std::vector<int>& rows, int hidden, int calls,
                                                               int replays) {
  auto* cs = dynamic_cast<CudaStream*>(&backend.stream());
  GS_CHECK(cs, "the all-reduce benchmark runs on the CUDA backend, not {}", backend.name());
  const AllReducePolicy policy = all_reduce_policy(comm);
  const float eps = 1e-5f;
  std::vector<AllReduceNormTiming> out;
  for (int m : rows) {
    GS_CHECK(m > 0 && hidden > 0, "all-reduce + add_rms_norm of {} x {}: both must be positive", m, hidden);
    AllReduceNormTiming t;
    t.rows = m;
    t.fused_available = fuse_all_reduce_add_rms_norm(policy, m, hidden, 2);
    const AllReduceAlgo algo = choose_all_reduce(policy, size_t(m) * size_t(hidden) * 2);
    const NormOperands a = norm_operands(backend, comm.rank(), m, hidden),
                       b = norm_operands(backend, comm.rank(), m, hidden);
    const Tensor out_a = Tensor::empty({m, hidden}, DType::BF16, backend.allocator());
    const Tensor out_b = Tensor::empty({m, hidden}, DType::BF16, backend.allocator());
    auto fused = [&] { comm.all_reduce_add_rms_norm(backend, a.residual, a.x, a.w, eps, out_a); };
    auto unfused = [&] {
      all_reduce_with(comm, b.x, algo);
      backend.add_rms_norm(b.residual, b.x, b.w, eps, out_b);
    };
    fused();
    unfused();
    backend.stream().synchronize();
    t.max_abs_diff = std::max(max_abs_diff(a.residual, b.residual), max_abs_diff(out_a, out_b));
    t.fused_us = time_in_graph(comm, backend, cs->handle(), fused, calls, replays);
    t.unfused_us = time_in_graph(comm, backend, cs->handle(), unfused, calls, replays);
    out.push_back(t);
  }
  return out;
}

std::vector<AllReduceTiming> bench_all_reduce(Communicator& comm, Backend& backend, const std::vector<size_t>& sizes,
                                              int calls, int replays) {
  auto* cs = dynamic_cast<CudaStream*>(&backend.stream());
  GS_CHECK(cs, "the all-reduce benchmark runs on the CUDA backend, not {}", backend.name());
  const AllReducePolicy policy = all_reduce_policy(comm);
  const int world = comm.world_size();
  std::vector<AllReduceTiming> rows;
  for (size_t bytes : sizes) {
    GS_CHECK(bytes > 0 && bytes % kCustomAllReduceAlign == 0, "all-reduce size {} must be a positive multiple of {}",
             bytes, kCustomAllReduceAlign);
    Tensor x = Tensor::empty({int64_t(bytes / 2)}, DType::BF16, backend.allocator());
    std::vector<AllReduceAlgo> algos{AllReduceAlgo::Nccl};
    if (policy.custom_available && bytes <= policy.custom_max_bytes)
      algos.insert(algos.end(), {AllReduceAlgo::OneShot, AllReduceAlgo::TwoShot});
    for (AllReduceAlgo a : algos) {
      AllReduceTiming t;
      t.bytes = bytes, t.algo = a;
      t.max_abs_err = check_once(comm, backend, x, a);
      t.us = time_in_graph(
          comm, backend, cs->handle(), [&] { all_reduce_with(comm, x, a); }, calls, replays);
      t.bus_gbs = double(bytes) * 2.0 * (world - 1) / world / (t.us * 1e3);
      rows.push_back(t);
    }
  }
  return rows;
}

}  // namespace gs
