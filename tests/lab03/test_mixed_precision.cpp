// Lab 03: the lab's observations and the scaler's given parts (the exercise is graded in graded.cpp).
#include <gtest/gtest.h>
#include <torch/types.h>

#include <iostream>
#include <map>

#include "common/errors.h"
#include "exercise.h"
#include "experiment.h"
#include "tests/support/smoke_run.h"

namespace {

// --- the scaler's given parts (the exercise's methods are graded in graded.cpp) ------------------------

TEST(Lab03GradScaler, DefaultsAreTorchAmpGradScalers) {
  const lab03::GradScalerOptions options;
  EXPECT_EQ(options.init_scale, 65536.0);
  EXPECT_EQ(options.growth_factor, 2.0);
  EXPECT_EQ(options.backoff_factor, 0.5);
  EXPECT_EQ(options.growth_interval, 2000);
  EXPECT_TRUE(options.enabled);
  lab03::GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_TRUE(scaler.is_enabled());
}

// --- the lab's observations ------------------------------------------------------------------------------

// The --quick run on the CPU: the smoke run's (ctest -R lab03.smoke runs `lab03 --quick`, as lab03::run of
// lab03::quick_config(), on the CPU where there is no GPU), read back from its report; CTest runs it first (the
// fixture lab03_json). Where the smoke run ran on a GPU, its claims are the GPU's, so the CPU run is made here.
speedlabs::Report quick_cpu_report() {
  speedlabs::Report report = speedlabs::testing::smoke_report("03");
  if (speedlabs::testing::observed_on_cpu(report)) return report;
  std::cout << "the smoke run ran on " << report.device() << ": the --quick run on the CPU is made here\n";
  speedlabs::Report cpu("03_mixed_precision", "cpu");
  lab03::run(lab03::quick_config(), cpu);
  return cpu;
}

TEST(Lab03Observations, FromTheSmokeRunOnCpuEveryClaimHolds) {
  const speedlabs::Report report = quick_cpu_report();
  using speedlabs::Verdict;
  for (const char* id :
       {"autocast_linear_output_dtype", "master_weights_dtype", "grads_are_fp32", "policy_matches_libtorch_cpu_lists",
        "fp16_grads_underflow_without_scaler", "scaler_preserves_small_grads", "scaler_on_inf_step",
        "scaler_grows_after_interval", "amp_matches_fp32", "unlisted_ops_keep_input_dtype"}) {
    EXPECT_EQ(report.at(id).verdict, Verdict::holds) << id << ": " << report.at(id).measured.dump();
  }
  EXPECT_EQ(report.at("autocast_linear_output_dtype").measured, "bfloat16");
  // On the CPU the chapter's CUDA lists do not hold; the differences are listed in the reason.
  const auto& chapter = report.at("policy_matches_chapter");
  EXPECT_EQ(chapter.verdict, Verdict::not_applicable);
  EXPECT_NE(chapter.reason.find("softmax (chapter float32, measured inputs)"), std::string::npos) << chapter.reason;
  EXPECT_NE(chapter.reason.find("layer_norm"), std::string::npos);
  EXPECT_GE(report.at("fp16_grads_underflow_without_scaler").measured.get<double>(), 0.5);
  // The overflowing step is skipped (no optimizer step, parameters untouched) and the scale backs off by half.
  const auto& skipped = report.at("scaler_on_inf_step").measured;
  EXPECT_EQ(skipped["stepped"], false);
  EXPECT_EQ(skipped["parameters_unchanged"], true);
  EXPECT_EQ(skipped["scale_before"], 65536.0);
  EXPECT_EQ(skipped["scale_after"], 32768.0);
  EXPECT_EQ(report.exit_code(), 0);
}

TEST(Lab03Observations, UnlistedOpsKeepTheirInputsDtypeInBothAutocastDtypes) {
  // Ops on no list: a float32 input stays float32 and a 16-bit one stays 16-bit, under either autocast dtype.
  for (const auto dtype : {c10::kBFloat16, c10::kHalf}) {
    const auto rows = lab03::measure_unlisted_policy(c10::Device(c10::kCPU), dtype);
    ASSERT_GE(rows.size(), 7u);
    for (const auto& r : rows) {
      EXPECT_EQ(r.fp32_in, "float32") << r.op;
      EXPECT_EQ(r.low_in, lab03::dtype_name(dtype)) << r.op;
      EXPECT_EQ(r.measured_policy, "inputs") << r.op;
      EXPECT_FALSE(lab03::has_autocast_cpu_kernel(r.cpu_rule)) << r.cpu_rule;
    }
  }
  // The dispatcher check can see a rule: linear has one, so a listed op would not pass for an unlisted one.
  EXPECT_TRUE(lab03::has_autocast_cpu_kernel("linear"));
}

TEST(Lab03Observations, CpuPolicyExamples) {
  // Spot checks of the CPU table, bfloat16: matmuls go low, losses go float32, softmax keeps its input type.
  const auto rows = lab03::measure_policy(c10::Device(c10::kCPU), c10::kBFloat16);
  std::map<std::string, lab03::PolicyRow> by_op;
  for (const auto& r : rows) by_op[r.op] = r;
  EXPECT_EQ(rows.size(), 23u + 51u + 10u);  // the chapter's three lists
  EXPECT_EQ(by_op.at("linear").fp32_in, "bfloat16");
  EXPECT_EQ(by_op.at("mse_loss").low_in, "float32");
  EXPECT_EQ(by_op.at("softmax").low_in, "bfloat16");
  EXPECT_EQ(by_op.at("softmax").measured_policy, "inputs");
  EXPECT_EQ(by_op.at("dot").mixed_in, "error");      // no CPU promote rule and dot refuses mixed dtypes
  EXPECT_EQ(by_op.at("atan2").mixed_in, "float32");  // its own type promotion
  EXPECT_TRUE(lab03::has_autocast_cpu_kernel("mm"));
  EXPECT_FALSE(lab03::has_autocast_cpu_kernel("softmax.int"));
}

TEST(Lab03Observations, Fp16IsAcceptedOnCpuAndStepsAreRespected) {
  // CPU autocast computes float16 in libtorch 2.13, so --dtype fp16 is not a usage error here.
  EXPECT_NO_THROW(lab03::require_autocast_dtype(c10::Device(c10::kCPU), c10::kHalf));
  EXPECT_THROW(lab03::require_autocast_dtype(c10::Device(c10::kCPU), c10::kDouble), speedlabs::UsageError);
}

}  // namespace
