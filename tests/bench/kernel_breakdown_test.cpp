// The per-kernel breakdown of `bench kernels`: kernel names made readable, sums per step, the
// busy time as the union of overlapping kernels.
#include <gtest/gtest.h>

#include "bench/kernel_breakdown.h"
#include "core/error.h"

namespace gs {
namespace {

TEST(KernelBreakdown, ShortNamesDropReturnTypeParametersAndOurNamespaces) {
  EXPECT_EQ(short_kernel_name("_ZN2gs4cuda12_GLOBAL__N_111gemv_kernelILi128ELi4EEEvPKfPfi"), "gemv_kernel<128, 4>");
  EXPECT_EQ(short_kernel_name("_ZN2gs4cuda14decode_combineI13__nv_bfloat16Lb1EEEvPKT_Pfi"),
            "decode_combine<__nv_bfloat16, true>");
  const std::string cublas = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1";
  EXPECT_EQ(short_kernel_name(cublas), cublas);
  EXPECT_EQ(short_kernel_name(std::string(120, 'k')), std::string(87, 'k') + "...");
}

TEST(KernelBreakdown, OverlapBelongsToTheEarlierKernel) {
  // Two steps of gemv (10 us) then norm (4 us); in step 2 the norm starts 2 us early (as under
  // programmatic dependent launch), so it adds 2 us of its own.
  const std::string gemv = "_ZN2gs4cuda12_GLOBAL__N_111gemv_kernelILi128ELi4EEEvPKfPfi";
  const std::vector<KernelRecord> recs = {
      {"rms_norm", 108'000, 112'000}, {gemv, 0, 10'000}, {"rms_norm", 11'000, 15'000}, {gemv, 100'000, 110'000}};
  const KernelBreakdown b = summarize_kernels(recs, 2, 0.5);
  EXPECT_DOUBLE_EQ(b.wall_ms_per_step, 0.25);
  ASSERT_EQ(b.rows.size(), 2u);
  EXPECT_EQ(b.rows[0].kernel, "gemv_kernel<128, 4>");
  EXPECT_DOUBLE_EQ(b.rows[0].calls_per_step, 1.0);
  EXPECT_DOUBLE_EQ(b.rows[0].us_per_step, 10.0);
  EXPECT_NEAR(b.rows[0].share, 20.0 / 26.0, 1e-12);
  EXPECT_EQ(b.rows[1].kernel, "rms_norm");
  EXPECT_DOUBLE_EQ(b.rows[1].us_per_step, 3.0);   // 4 us, then 2 us
  EXPECT_DOUBLE_EQ(b.rows[1].us_per_call, 4.0);   // whole durations
  EXPECT_DOUBLE_EQ(b.kernel_ms_per_step, 0.014);  // durations summed
  EXPECT_DOUBLE_EQ(b.busy_ms_per_step, 0.013);    // step 1: 10 + 4 us; step 2: 100..112 us
}

TEST(KernelBreakdown, RejectsNoStepsAndBackwardRecords) {
  EXPECT_THROW(summarize_kernels({}, 0, 1.0), Error);
  EXPECT_THROW(summarize_kernels({{"k", 5, 4}}, 1, 1.0), Error);
  EXPECT_EQ(summarize_kernels({}, 3, 3.0).rows.size(), 0u);
}

}  // namespace
}  // namespace gs
