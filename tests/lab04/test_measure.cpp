// Lab 04 on the CPU: the CPU-feature helper and the lab's observations at a small size, through the
// same experiment the program runs. The timing exercise is graded in graded.cpp.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "experiment.h"
#include "tests/support/timed.h"
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
#include "common/cuda/kernels.h"
#endif

namespace {

const c10::Device kCpu(c10::kCPU);
using speedlabs::testing::timed_holds_unless_undecided;
using speedlabs::testing::timed_with_evidence;

TEST(Lab04Helpers, ParsesCpuFlags) {
  const auto features = lab04::parse_cpuinfo(
      "processor\t: 0\nmodel name\t: Example CPU @ 2.0GHz\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n"
      "processor\t: 1\nflags\t\t: fpu avx512_bf16\n");
  EXPECT_TRUE(features.known);
  EXPECT_EQ(features.model, "Example CPU @ 2.0GHz");
  EXPECT_TRUE(features.avx512f);
  EXPECT_TRUE(features.amx_bf16);
  EXPECT_FALSE(features.avx512_bf16);  // only the first processor's flags are read
  EXPECT_FALSE(lab04::parse_cpuinfo("").known);
}

#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
TEST(Lab04Kernels, RejectsBadArgumentsWithoutAGpu) {
  const double x[] = {1.0};
  const auto serial = speedlabs::cuda::launch_sum_squares_one_thread;
  EXPECT_THROW(speedlabs::cuda::sum_squares(x, 0, serial, 0, 1), std::invalid_argument);
  EXPECT_THROW(speedlabs::cuda::sum_squares(x, 1, serial, 0, 0), std::invalid_argument);
  EXPECT_THROW(speedlabs::cuda::sum_squares(x, 1, nullptr, 0, 1), std::invalid_argument);
  const auto gpus = speedlabs::cuda::find_gpus();
  EXPECT_EQ(gpus.count == 0, !gpus.reason.empty());
  if (gpus.count == 0) {
    EXPECT_THROW(speedlabs::cuda::sum_squares(x, 1, serial, 0, 1), std::runtime_error);
  }
}
#endif

TEST(Lab04Observations, CpuRunRecordsEveryObservation) {
  lab04::Config config = lab04::quick_config();
  config.batch = 64;
  config.timing = {1, 3};
  config.cpu_only = true;
  speedlabs::Report report("04_measure", "cpu");
  lab04::run(config, kCpu, report);

  EXPECT_EQ(report.at("autocast_bf16_output_dtype").verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(report.at("autocast_bf16_output_dtype").measured.at("dtype"), "BFloat16");
  for (const char* id : {"cpu_fp32_ms", "cpu_bf16_ms"}) {
    EXPECT_TRUE(timed_holds_unless_undecided(report.at(id)));
    EXPECT_GT(report.at(id).measured.at("median_ms").get<double>(), 0.0) << id;
    EXPECT_EQ(report.at(id).measured.at("batch"), 64) << id;
  }
  const auto& ratio = report.at("cpu_bf16_vs_fp32");
  // The lesson's 2x must hold only on a CPU without bfloat16 instructions; on one with them it is reported.
  const auto& seen = ratio.measured;
  EXPECT_EQ(ratio.must_hold, seen.at("cpu_features_known").get<bool>() && !seen.at("avx512_bf16").get<bool>() &&
                                 !seen.at("amx_bf16").get<bool>());
  EXPECT_TRUE(timed_with_evidence(ratio));
  EXPECT_GT(ratio.measured.at("ratio_bf16_over_fp32").get<double>(), 0.0);
  // fp32 and bf16 ran in the same rounds: one ratio per round.
  EXPECT_EQ(ratio.evidence["value"]["count"], 3);
  // On a CPU with bfloat16 instructions the lesson's claim is not this CPU's: not applicable, the ratio still shown.
  const bool bf16_units = seen.at("avx512_bf16").get<bool>() || seen.at("amx_bf16").get<bool>();
  if (seen.at("cpu_features_known").get<bool>() && bf16_units) {
    EXPECT_EQ(ratio.verdict, speedlabs::Verdict::not_applicable);
    EXPECT_NE(ratio.reason.find("bfloat16 instructions"), std::string::npos) << ratio.reason;
  } else if (ratio.verdict != speedlabs::Verdict::inconclusive) {
    EXPECT_EQ(ratio.verdict == speedlabs::Verdict::holds,
              ratio.measured.at("ratio_bf16_over_fp32").get<double>() >= 2.0);
  }
  EXPECT_TRUE(report.at("first_call_slower_than_median").measured.contains("cpu"));
  EXPECT_TRUE(timed_with_evidence(report.at("first_call_slower_than_median")));
  // The changing-load demonstration: a neighbour skews the one-after-the-other ratio, not the interleaved one.
  const auto& interleaving = report.at("interleaving_resists_a_changing_load");
  EXPECT_TRUE(timed_holds_unless_undecided(interleaving));
  // The contention reading sees the neighbour as preemptions of the measuring thread; on a machine that other
  // programs keep busy the "quiet" half is preempted too, so the comparison means something only on a quiet one.
  if (!interleaving.evidence["contention"]["busy"].get<bool>()) {
    EXPECT_GT(interleaving.measured.at("preemptions_per_s_with_neighbour").get<double>(),
              interleaving.measured.at("preemptions_per_s_quiet").get<double>())
        << "the contention reading sees the neighbour: " << interleaving.measured.dump();
  }
  for (const char* id : {"gpu_unsynced_time_is_misleading", "gpu_bf16_vs_fp32", "gpu_parallel_kernel_vs_serial",
                         "gpu_kernel_matches_cpu"}) {
    EXPECT_EQ(report.at(id).verdict, speedlabs::Verdict::not_applicable) << id;
    EXPECT_FALSE(report.at(id).reason.empty()) << id;
  }
  // Whether bf16 reaches the lesson's 2x on this CPU is what the program's exit code reports; here the rest must
  // not fail.
  for (const auto& o : report.observations()) {
    if (o.id != "cpu_bf16_vs_fp32") EXPECT_FALSE(o.must_hold && o.verdict == speedlabs::Verdict::fails) << o.id;
  }
}

}  // namespace
