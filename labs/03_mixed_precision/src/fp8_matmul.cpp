#include "fp8_matmul.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <iostream>
#include <string>

#include "common/format.h"
#include "common/timer.h"

namespace lab03 {

namespace {

// A square matmul large enough that the fp8 tensor cores' rate, not the launch, sets its time.
constexpr int64_t kSize = 4096;
// e4m3fn keeps 3 fraction bits: each input is off by at most 2^-4 of itself, a product by about 2^-3. Summed
// over K random-sign products the errors mostly cancel, so against the largest output this bound is loose.
constexpr double kMaxRelativeError = 0.125;
constexpr double kE4m3Max = 448;
const speedlabs::TimingOptions kTiming{3, 10, 20, 0.05, 2.0};

const char* const kId = "fp8_scaled_mm_vs_bf16";
const char* const kClaim =
    "on a GPU with fp8 tensor cores, a matmul of e4m3fn inputs with a scale per tensor (at::_scaled_mm) gives "
    "the bf16 matmul's result within fp8's precision, and its time beside bf16's is shown";
const char* const kExpected = "max |fp8 - bf16| / max |bf16| <= 0.125 (3 fraction bits); times reported";

// The dequantising scale of @p x (its amax over e4m3fn's largest value) and x cast with it, on x's device.
std::pair<torch::Tensor, torch::Tensor> to_e4m3(const torch::Tensor& x) {
  const torch::Tensor scale = (x.abs().max() / kE4m3Max).to(torch::kFloat32);
  return {(x / scale).to(at::kFloat8_e4m3fn), scale};
}

}  // namespace

void observe_fp8_scaled_mm(const c10::Device& device, speedlabs::Report& report) {
  if (!device.is_cuda()) {
    report.not_applicable(kId, kClaim, kExpected, "needs a CUDA GPU with fp8 tensor cores (compute capability 8.9+)");
    return;
  }
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().device(device);
  const torch::Tensor a = torch::randn({kSize, kSize}, options), b = torch::randn({kSize, kSize}, options);
  const torch::Tensor a_bf16 = a.to(torch::kBFloat16), b_bf16 = b.to(torch::kBFloat16);
  auto [a_fp8, scale_a] = to_e4m3(a);
  auto [b_fp8, scale_b] = to_e4m3(b);
  b_fp8 = b_fp8.t().contiguous().t();  // _scaled_mm takes its second operand column-major
  const auto fp8_matmul = [&] { return at::_scaled_mm(a_fp8, b_fp8, scale_a, scale_b, {}, {}, torch::kBFloat16); };
  torch::Tensor fp8_out;
  try {
    fp8_out = fp8_matmul();
  } catch (const c10::Error& e) {
    // A GPU before Ada/Hopper: libtorch has no fp8 matmul for it, and says so.
    report.not_applicable(kId, kClaim, kExpected, "at::_scaled_mm refused: " + std::string(e.what_without_backtrace()));
    return;
  }
  const torch::Tensor bf16_out = torch::matmul(a_bf16, b_bf16).to(torch::kFloat32);
  const double error = ((fp8_out.to(torch::kFloat32) - bf16_out).abs().max() / bf16_out.abs().max()).item<double>();
  const auto timings =
      speedlabs::time_interleaved({[&] { torch::matmul(a_bf16, b_bf16); }, [&] { fp8_matmul(); }}, device, kTiming);
  const double bf16_ms = timings.sides.at(0).median_ms, fp8_ms = timings.sides.at(1).median_ms;
  std::cout << "fp8 matmul (" << kSize << "^3, e4m3fn, per-tensor scales): " << speedlabs::fixed(fp8_ms, 3)
            << " ms against bf16's " << speedlabs::fixed(bf16_ms, 3) << " ms; max error "
            << speedlabs::fixed(100 * error, 2) << "% of the largest output\n";
  report.check(kId, kClaim,
               {{"max_relative_error", error},
                {"bf16_ms", bf16_ms},
                {"fp8_ms", fp8_ms},
                {"bf16_over_fp8", timings.ratio(0, 1).median},
                {"size", kSize}},
               kExpected, error <= kMaxRelativeError);
}

}  // namespace lab03
