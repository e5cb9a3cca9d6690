#include "tf32_probe.h"

#include <torch/types.h>

#include <cmath>

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/precision.h"

namespace lab05 {

namespace {

constexpr const char* kClaim =
    "TF32 keeps float32's 8-bit exponent and 10 of its fraction bits: a matmul under \"high\" precision rounds "
    "1 + 2^-12 to 1 and keeps 1 + 2^-10, while \"highest\" keeps both";
constexpr const char* kExpected = "high: 1 + 2^-12 -> 1, 1 + 2^-10 kept; highest: both kept";
// A matrix big enough for cuBLAS to pick a tensor-core kernel.
constexpr int64_t kSide = 256;

// Entry (0, 0) of (x everywhere) @ identity under @p precision: x itself, as the matmul's inputs keep it.
double through_matmul(double x, const std::string& precision, const c10::Device& device) {
  const speedlabs::MatmulPrecisionScope scope(precision);
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const torch::Tensor product = torch::full({kSide, kSide}, x, options).matmul(torch::eye(kSide, options));
  return product[0][0].item<double>();
}

// Why this device has no TF32 to probe ("" when it has).
std::string why_no_tf32(const c10::Device& device) {
  if (!device.is_cuda()) return "TF32 is a mode of NVIDIA's tensor cores; this run is on " + device.str();
#ifdef SPEEDLABS_TORCH_HAS_CUDA
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device.has_index() ? device.index() : 0) != 0) {
    return "the GPU's properties could not be read";
  }
  if (properties.major < 8) return std::string(properties.name) + " predates TF32 (compute capability 8.0)";
  return "";
#else
  return "this libtorch was built without CUDA";
#endif
}

}  // namespace

void observe_tf32_layout(const c10::Device& device, speedlabs::Report& report) {
  const std::string why_not = why_no_tf32(device);
  if (!why_not.empty()) {
    report.not_applicable("tf32_keeps_10_fraction_bits", kClaim, kExpected, why_not);
    return;
  }
  const double below = 1 + std::ldexp(1.0, -12), kept = 1 + std::ldexp(1.0, -10);
  const double high_below = through_matmul(below, "high", device), high_kept = through_matmul(kept, "high", device);
  const double highest_below = through_matmul(below, "highest", device);
  report.check(
      "tf32_keeps_10_fraction_bits", kClaim,
      {{"high_1_plus_2^-12", high_below}, {"high_1_plus_2^-10", high_kept}, {"highest_1_plus_2^-12", highest_below}},
      kExpected, high_below == 1.0 && high_kept == kept && highest_below == below);
}

}  // namespace lab05
