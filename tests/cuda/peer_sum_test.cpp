// The one-token projection that sums its ranks' partials itself (AddRmsNorm::peer_sum,
// ops/peer_sum.h) as rank 0 of two, on one GPU: before each call the peer's partial row is written
// into this rank's exchange buffer, where the peer's projection would push it, and the "peer's"
// buffers are plain device memory that this rank's pushes land in. Eight calls (five eager, three
// replays of a captured graph) rotate the three buffers. Each call's residual must equal the
// host's rank-order sum bit for bit, out its norm within bf16 rounding, the pushed row this rank's
// partial (itself the plain projection's within rounding), and the previous call's buffer must be
// back to the sentinel (-0). On bf16 weights (the GEMV: a warp an output, and split K) and FP8
// weights (the skinny kernel: e4m3 rows and 128x128 blocks). The two-GPU exchange itself:
// tp_collectives_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/cuda/bench_tensors.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/linear_op.h"
#include "ops/peer_sum.h"

namespace gs {
namespace {

TEST(PeerSum, RankZeroOfTwoAddsThePeersRowAndRefillsItsBuffers) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  Backend& be = *gpu;
  struct Case {
    int64_t N, K;
    int fp8_groups;  // 0: bf16 weights; 1: e4m3 rows; K / 128: 128x128 blocks
  };
  for (const Case c : {Case{4096, 2048, 0}, {2048, 1024, 0}, {4096, 2048, 1}, {4096, 2048, 16}}) {
    const int64_t N = c.N, K = c.K;
    const std::string what =
        std::to_string(N) + " x " + std::to_string(K) + ", fp8 groups " + std::to_string(c.fp8_groups);
    const auto device = [&](const std::vector<float>& v, const Shape& s, DType dt) { return bench::on(be, v, s, dt); };
    const auto row = [&](int64_t n, DType dt) { return Tensor::empty({1, n}, dt, be.allocator()); };
    const size_t buffer_bytes = size_t(2 * N) * 2;  // two ranks' rows of bf16
    const std::vector<float> sentinel(size_t(3 * 2 * N), -0.0f);
    const Tensor own = device(sentinel, {3 * 2 * N}, DType::BF16), peer = device(sentinel, {3 * 2 * N}, DType::BF16);
    const Tensor state = device(std::vector<float>(sizeof(PeerSumState) / 4, 0.0f), {sizeof(PeerSumState) / 4},
                                DType::F32);  // all-zero bits
    PeerSum ps;
    ps.world = 2, ps.rank = 0;
    ps.buffers[0] = own.data(), ps.buffers[1] = peer.data();
    ps.buffer_bytes = buffer_bytes;
    ps.state = static_cast<PeerSumState*>(state.data());
    // Region r of buffer b of a rank's three, as bf16 [N].
    const auto region = [&](const Tensor& bufs, int b, int r) {
      return Tensor::wrap(static_cast<char*>(bufs.data()) + size_t(b) * buffer_bytes + size_t(r * N) * 2, {N},
                          DType::BF16, bufs.device());
    };

    const std::vector<float> wv = bench::randn(size_t(N * K), 3, 0.02f);
    Tensor w = device(wv, {N, K}, DType::BF16);
    if (c.fp8_groups > 0) {
      w = Tensor::empty({N, K}, DType::F8E4M3, be.allocator())
              .with_scales(Tensor::empty({N, c.fp8_groups}, DType::F32, be.allocator()));
      be.quantize_fp8(device(wv, {N, K}, DType::F32), c.fp8_groups > 1 ? 128 : 1, c.fp8_groups > 1, w);
    }
    const std::vector<float> norm_wv = bench::randn(size_t(N), 5);
    const Tensor norm_w = device(norm_wv, {N}, DType::BF16);
    std::vector<float> res_h = bench::randn(size_t(N), 7);
    const Tensor x = row(K, DType::BF16), y = row(N, DType::BF16), out = row(N, DType::BF16);
    const Tensor res = device(res_h, {1, N}, DType::F32), y_plain = row(N, DType::BF16);
    const float eps = 1e-5f;
    const LinearOp op{.x = x, .w = w, .y = y, .then = AddRmsNorm{res, norm_w, eps, out, true, ps}};
    ASSERT_TRUE(be.folds_peer_sum(op)) << what;

    std::unique_ptr<Graph> graph;
    for (int call = 0; call < 8; ++call) {
      const int b = call % 3;
      be.copy(x, device(bench::randn(size_t(K), 100 + call), {1, K}, DType::BF16));
      const std::vector<float> y1 = bench::randn(size_t(N), 200 + call);  // the peer's partial
      be.copy(region(own, b, 1), device(y1, {N}, DType::BF16));
      if (call < 5) {
        be.linear(op);
      } else {
        if (!graph) {
          be.stream().begin_capture();
          be.linear(op);
          graph = be.stream().end_capture();
        }
        graph->replay();
      }
      be.linear(x, w, Tensor(), y_plain);
      const std::vector<float> y0 = test::read(be, y), r = test::read(be, res), o = test::read(be, out);
      EXPECT_LT(test::rel_l2(y0, test::read(be, y_plain)), 1e-2) << what << ", call " << call;
      EXPECT_EQ(test::read(be, region(peer, b, 0)), y0) << what << ", call " << call << ": the pushed row";
      // The rank-order sum rounded to bf16, added to the residual; then the norm.
      double ss = 0.0;
      for (size_t i = 0; i < res_h.size(); ++i) {
        res_h[i] += bf16_to_f32(f32_to_bf16(y0[i] + y1[i]));
        ss += double(res_h[i]) * double(res_h[i]);
      }
      const double inv = 1.0 / std::sqrt(ss / double(N) + eps);
      int64_t res_wrong = 0, out_wrong = 0;
      for (size_t i = 0; i < res_h.size(); ++i) {
        res_wrong += r[i] != res_h[i];
        const double o_h = double(res_h[i]) * inv * double(norm_wv[i]);
        out_wrong += std::fabs(o[i] - o_h) > std::fabs(o_h) / 128.0 + 1e-6;
      }
      EXPECT_EQ(res_wrong, 0) << what << ", call " << call;
      EXPECT_EQ(out_wrong, 0) << what << ", call " << call;
      if (call > 0) {  // the previous call's buffer, refilled by this call
        int64_t left = 0;
        for (float v : test::read(be, region(own, (call + 2) % 3, 1))) left += !(v == 0.0f && std::signbit(v));
        EXPECT_EQ(left, 0) << what << ", call " << call << ": elements not back to -0";
      }
    }
  }
}

TEST(PeerSum, RefusesRowsTheLastBlockCannotHold) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  Backend& be = *gpu;
  const auto row = [&](int64_t n, DType dt) { return Tensor::empty({1, n}, dt, be.allocator()); };
  const int64_t N = 8192, K = 1024;  // the GEMV's 128 threads hold rows of at most 4096
  const Tensor w = Tensor::empty({N, K}, DType::BF16, be.allocator()), y = row(N, DType::BF16);
  const LinearOp op{.x = row(K, DType::BF16),
                    .w = w,
                    .y = y,
                    .then = AddRmsNorm{row(N, DType::F32), Tensor::empty({N}, DType::BF16, be.allocator()), 1e-5f, y,
                                       true, PeerSum{}}};
  EXPECT_FALSE(be.folds_peer_sum(op));
  EXPECT_THROW(be.linear(op), Error);
}

}  // namespace
}  // namespace gs
