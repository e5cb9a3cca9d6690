// Lab 03: the exercise against common::GradScaler and Python's numbers, and the lab's observations.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "common/errors.h"
#include "common/grad_scaler.h"
#include "exercise.h"
#include "experiment.h"

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// --- unscale_and_check -----------------------------------------------------------------------------------

TEST(Lab03Exercise, UnscaleMatchesTheFusedKernel) {
  torch::manual_seed(3);
  for (const bool poison : {false, true}) {
    std::vector<torch::Tensor> mine{torch::randn({5, 7}) * 1024, torch::randn({13}) * 1024};
    if (poison) mine[1][4] = kNaN;
    std::vector<torch::Tensor> fused{mine[0].clone(), mine[1].clone()};
    const double inv_scale = 1.0 / 1024;
    const auto found = lab03::unscale_and_check(mine, inv_scale);
    auto fused_found = torch::zeros({});
    at::_amp_foreach_non_finite_check_and_unscale_(fused, fused_found, torch::full({}, inv_scale));
    EXPECT_EQ(found.dim(), 0);
    EXPECT_EQ(found.scalar_type(), torch::kFloat32);
    EXPECT_EQ(found.item<float>(), fused_found.item<float>()) << "poison " << poison;
    // Multiplying by a power of two is exact, so the two must agree bit for bit (NaN where NaN).
    for (size_t i = 0; i < mine.size(); ++i) EXPECT_TRUE(torch::equal(torch::nan_to_num(mine[i]), torch::nan_to_num(fused[i])));
  }
}

TEST(Lab03Exercise, UnscaleSeesInfAndNaNAndEmptyLists) {
  // Python's GradScaler facts (tests/reference/grad_scaler_reference.py, step 2): scaled grads [inf, 1024]
  // at scale 1024 unscale to [inf, 1] with found_inf = 1.
  std::vector<torch::Tensor> grads{torch::tensor({kInf, 1024.0f})};
  EXPECT_EQ(lab03::unscale_and_check(grads, 1.0 / 1024).item<float>(), 1.0f);
  EXPECT_EQ(grads[0][1].item<float>(), 1.0f);
  EXPECT_TRUE(std::isinf(grads[0][0].item<float>()));
  std::vector<torch::Tensor> clean{torch::tensor({512.0f, 256.0f})};
  EXPECT_EQ(lab03::unscale_and_check(clean, 1.0 / 1024).item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(clean[0], torch::tensor({0.5f, 0.25f})));
  EXPECT_EQ(lab03::unscale_and_check({}, 0.5).item<float>(), 0.0f);
}

// --- next_scale_state ------------------------------------------------------------------------------------

TEST(Lab03Exercise, NextScaleFollowsPythonsSequence) {
  // Python's torch.amp.GradScaler("cpu", init_scale=1024, growth_interval=3) for the steps clean, inf, nan,
  // clean, clean, clean, clean gave (scale, tracker): (1024,1) (512,0) (256,0) (256,1) (256,2) (512,0) (512,1).
  const std::vector<bool> found{false, true, true, false, false, false, false};
  const std::vector<std::pair<double, int64_t>> python{{1024, 1}, {512, 0}, {256, 0}, {256, 1}, {256, 2}, {512, 0}, {512, 1}};
  lab03::ScaleState state{1024, 0};
  const lab03::ScaleRule rule{2.0, 0.5, 3};
  for (size_t i = 0; i < found.size(); ++i) {
    state = lab03::next_scale_state(state, found[i], rule);
    EXPECT_EQ(state.scale, python[i].first) << "step " << i;
    EXPECT_EQ(state.growth_tracker, python[i].second) << "step " << i;
  }
}

TEST(Lab03Exercise, NextScaleMatchesAmpUpdateScaleOnRandomSequences) {
  std::mt19937 random(7);
  const lab03::ScaleRule rule{2.0, 0.5, 4};
  auto scale = torch::full({}, 65536.0f);
  auto tracker = torch::zeros({}, torch::kInt32);
  lab03::ScaleState state{65536.0, 0};
  for (int i = 0; i < 200; ++i) {
    const bool inf = random() % 5 == 0;
    at::_amp_update_scale_(scale, tracker, torch::full({}, inf ? 1.0f : 0.0f), rule.growth_factor,
                           rule.backoff_factor, rule.growth_interval);
    state = lab03::next_scale_state(state, inf, rule);
    ASSERT_EQ(state.scale, scale.item<double>()) << "iteration " << i;
    ASSERT_EQ(state.growth_tracker, tracker.item<int64_t>()) << "iteration " << i;
  }
}

TEST(Lab03Exercise, NextScaleDoesNotGrowPastFloat32) {
  const auto state = lab03::next_scale_state({std::ldexp(1.0, 127), 1}, false, {2.0, 0.5, 2});
  EXPECT_EQ(state.scale, std::ldexp(1.0, 127));
  EXPECT_EQ(state.growth_tracker, 0);
}

// --- mixed_precision_step --------------------------------------------------------------------------------

TEST(Lab03Exercise, StepMatchesPythonAndRestoresAutocast) {
  // The first two rows of the Python reference: a clean step moves w to [0.9375, -2.03125], an inf step
  // is skipped and halves the scale 1024 -> 512. float16 autocast does not touch an elementwise mul+sum.
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  speedlabs::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 3;
  speedlabs::GradScaler scaler(options);
  auto x = torch::tensor({0.5f, 0.25f});
  bool autocast_was_on = false;
  const auto loss_fn = [&] {
    autocast_was_on = at::autocast::is_autocast_enabled(c10::kCPU);
    return (w * x).sum();
  };
  auto result = lab03::mixed_precision_step(loss_fn, optimizer, scaler, c10::kCPU, c10::kHalf);
  EXPECT_TRUE(autocast_was_on);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
  EXPECT_TRUE(result.stepped);
  EXPECT_EQ(result.loss, 0.0);  // 1*0.5 + (-2)*0.25
  EXPECT_TRUE(torch::equal(w.detach(), torch::tensor({0.9375f, -2.03125f})));
  x = torch::tensor({kInf, 1.0f});
  result = lab03::mixed_precision_step(loss_fn, optimizer, scaler, c10::kCPU, c10::kHalf);
  EXPECT_FALSE(result.stepped);
  EXPECT_TRUE(torch::equal(w.detach(), torch::tensor({0.9375f, -2.03125f})));
  EXPECT_EQ(scaler.get_scale(), 512.0);
}

TEST(Lab03Exercise, StepRunsTheForwardInTheAutocastDtype) {
  torch::manual_seed(0);
  torch::nn::Linear layer(4, 2);
  torch::optim::SGD optimizer(layer->parameters(), torch::optim::SGDOptions(0.1));
  speedlabs::GradScalerOptions disabled;
  disabled.enabled = false;
  speedlabs::GradScaler scaler(disabled);
  c10::ScalarType seen = c10::kFloat;
  lab03::mixed_precision_step([&] {
    const auto out = layer->forward(torch::ones({3, 4}));
    seen = out.scalar_type();
    return out.to(torch::kFloat).pow(2).mean();
  }, optimizer, scaler, c10::kCPU, c10::kBFloat16);
  EXPECT_EQ(seen, c10::kBFloat16);
  EXPECT_EQ(layer->weight.scalar_type(), c10::kFloat);
  EXPECT_EQ(layer->weight.grad().scalar_type(), c10::kFloat);
}

// --- the lab's observations ------------------------------------------------------------------------------

TEST(Lab03Observations, QuickRunOnCpuHoldsItsClaims) {
  speedlabs::Report report("03_mixed_precision", "cpu");
  auto config = lab03::quick_config(c10::Device(c10::kCPU));
  lab03::run(config, report);
  using speedlabs::Verdict;
  for (const char* id : {"autocast_linear_output_dtype", "weights_stay_fp32", "grads_are_fp32",
                         "policy_matches_libtorch_cpu_lists", "fp16_grads_underflow_without_scaler",
                         "scaler_preserves_small_grads", "scaler_skips_inf_step_and_backs_off",
                         "scaler_grows_after_interval", "amp_matches_fp32"}) {
    EXPECT_EQ(report.at(id).verdict, Verdict::holds) << id << ": " << report.at(id).measured.dump();
  }
  EXPECT_EQ(report.at("autocast_linear_output_dtype").measured, "bfloat16");
  // On the CPU the chapter's CUDA lists do not hold; the differences are listed in the reason.
  const auto& chapter = report.at("policy_matches_chapter");
  EXPECT_EQ(chapter.verdict, Verdict::not_applicable);
  EXPECT_NE(chapter.reason.find("softmax (chapter float32, measured inputs)"), std::string::npos) << chapter.reason;
  EXPECT_NE(chapter.reason.find("layer_norm"), std::string::npos);
  EXPECT_GE(report.at("fp16_grads_underflow_without_scaler").measured.get<double>(), 0.5);
  EXPECT_EQ(report.at("scaler_skips_inf_step_and_backs_off").measured["scale_after"], 32768.0);
  EXPECT_EQ(report.exit_code(), 0);
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
  EXPECT_EQ(by_op.at("dot").mixed_in, "error");  // no CPU promote rule and dot refuses mixed dtypes
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
