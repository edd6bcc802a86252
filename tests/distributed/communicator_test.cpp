// The shared-memory communicator: each collective's result on every rank, graph capture and
// replay of collectives, and a clear error (not a hang) when a peer never arrives.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "distributed/communicator.h"

namespace gs {
namespace {

// Runs body(rank, backend, comm) on `world` threads of one group; rethrows the first error.
void run_group(int world, const std::function<void(int, Backend&, Communicator&)>& body, double timeout_s = 30.0) {
  const std::string group = make_shm_group_name();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto be = make_cpu_backend();
        auto comm = make_shm_communicator(group, r, world, *be, timeout_s);
        body(r, *be, *comm);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

Tensor filled(Backend& be, int64_t n, const std::function<float(int64_t)>& f) {
  Tensor t = Tensor::empty({n}, DType::F32, be.allocator());
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = f(i);
  return t;
}

TEST(ShmCommunicator, AllReduceSumsInRankOrderAcrossSlotChunks) {
  // 1.5 M floats: more than one 4 MiB slot, so the chunking is exercised.
  const int64_t n = 1536 * 1024;
  run_group(3, [&](int r, Backend& be, Communicator& c) {
    EXPECT_EQ(c.world_size(), 3);
    EXPECT_EQ(c.rank(), r);
    Tensor t = filled(be, n, [&](int64_t i) { return float(r + 1) * 0.5f + float(i % 7); });
    c.all_reduce(t);
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(t.data_as<float>()[i], 3.0f + 3.0f * float(i % 7)) << i;
    ASSERT_EQ(t.data_as<float>()[n - 1], 3.0f + 3.0f * float((n - 1) % 7));
  });
}

TEST(ShmCommunicator, AllReduceBf16) {
  run_group(2, [](int r, Backend& be, Communicator& c) {
    Tensor t = Tensor::empty({4}, DType::BF16, be.allocator());
    for (int i = 0; i < 4; ++i) t.data_as<uint16_t>()[i] = f32_to_bf16(float(i + r));
    c.all_reduce(t);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bf16_to_f32(t.data_as<uint16_t>()[i]), float(2 * i + 1));
  });
}

TEST(ShmCommunicator, AllGatherBroadcastAndColumnGather) {
  run_group(4, [](int r, Backend& be, Communicator& c) {
    Tensor in = filled(be, 3, [&](int64_t i) { return float(10 * r + i); });
    Tensor out = Tensor::empty({12}, DType::F32, be.allocator());
    c.all_gather(in, out);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(out.data_as<float>()[i], float(10 * (i / 3) + i % 3));

    Tensor b = filled(be, 5, [&](int64_t i) { return float(r * 100 + i); });
    c.broadcast(b, 2);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(b.data_as<float>()[i], float(200 + i));

    // Each rank holds columns [3 r, 3 r + 3) of a [2, 10] matrix (the last rank's third is padding).
    Tensor local = filled(be, 6, [&](int64_t i) { return float((i / 3) * 100 + 3 * r + i % 3); }).reshape({2, 3});
    Tensor scratch = Tensor::empty({24}, DType::F32, be.allocator());
    Tensor cols = Tensor::empty({2, 10}, DType::F32, be.allocator());
    c.gather_columns(local, scratch, cols);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(cols.data_as<float>()[i], float((i / 10) * 100 + i % 10)) << i;
    c.barrier();
  });
}

TEST(ShmCommunicator, CollectivesAreCapturedAndReplayed) {
  run_group(2, [](int r, Backend& be, Communicator& c) {
    Tensor t = filled(be, 8, [&](int64_t) { return float(r + 1); });
    be.stream().begin_capture();
    c.all_reduce(t);  // recorded, not run: nobody waits for the peer here
    auto graph = be.stream().end_capture();
    EXPECT_EQ(t.data_as<float>()[0], float(r + 1));
    for (int rep = 0; rep < 3; ++rep) {
      for (int i = 0; i < 8; ++i) t.data_as<float>()[i] = float(r + 1 + rep);
      graph->replay();
      EXPECT_EQ(t.data_as<float>()[5], float(3 + 2 * rep));
    }
  });
}

TEST(ShmCommunicator, AllReduceAddRmsNormSumsThenAddsTheResidualAndNorms) {
  // Two rows of 8: each rank holds partial sums x; the op leaves residual + sum in the residual
  // and its RMSNorm times w in out (here out aliases x, as in the model), in a replayed graph.
  const int64_t rows = 2, H = 8;
  const float eps = 1e-5f;
  auto x_of = [](int rank, int64_t i) { return float(rank + 1) * 0.25f * float(i % 5) - 0.5f; };
  auto res0 = [](int64_t i) { return 0.125f * float(i) - 1.0f; };
  auto w_of = [](int64_t i) { return 1.0f + 0.0625f * float(i % H); };
  run_group(2, [&](int r, Backend& be, Communicator& c) {
    Tensor x = filled(be, rows * H, [&](int64_t i) { return x_of(r, i); }).reshape({rows, H});
    Tensor res = filled(be, rows * H, res0).reshape({rows, H});
    Tensor w = filled(be, H, w_of);
    be.stream().begin_capture();
    c.all_reduce_add_rms_norm(be, res, x, w, eps, x);
    auto graph = be.stream().end_capture();
    graph->replay();
    for (int64_t row = 0; row < rows; ++row) {
      double ss = 0;
      std::vector<double> want(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        const int64_t i = row * H + j;
        want[size_t(j)] = double(res0(i)) + double(x_of(0, i)) + double(x_of(1, i));
        ss += want[size_t(j)] * want[size_t(j)];
        EXPECT_NEAR(res.data_as<float>()[i], want[size_t(j)], 1e-6) << i;
      }
      const double inv = 1.0 / std::sqrt(ss / double(H) + eps);
      for (int64_t j = 0; j < H; ++j)
        EXPECT_NEAR(x.data_as<float>()[row * H + j], want[size_t(j)] * inv * w_of(j), 1e-5) << row << " " << j;
    }
  });
}

TEST(ShmCommunicator, AMissingPeerIsAnErrorNotAHang) {
  const std::string group = make_shm_group_name();
  auto be = make_cpu_backend();
  auto comm = make_shm_communicator(group, 0, 2, *be, 0.3);  // rank 1 never joins
  Tensor t = filled(*be, 4, [](int64_t) { return 1.0f; });
  try {
    comm->all_reduce(t);
    FAIL() << "all_reduce returned without its peer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("waited"), std::string::npos) << e.what();
  }
}

TEST(ShmCommunicator, APeerThatFailsReleasesTheOthers) {
  EXPECT_THROW(run_group(
                   3,
                   [](int r, Backend& be, Communicator& c) {
                     // Every rank attached first: a rank that arrives after rank 0 has gone would wait for the
                     // group to appear until its timeout instead.
                     c.barrier();
                     if (r == 1) throw Error("rank 1 broke");
                     Tensor t = filled(be, 4, [](int64_t) { return 1.0f; });
                     c.all_reduce(t);
                   },
                   /*timeout_s=*/600.0),
               Error);  // within a second, not after the 600 s timeout
}

}  // namespace
}  // namespace gs
