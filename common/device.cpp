#include "common/device.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>
#include <torch/mps.h>
#include <torch/version.h>

#include "common/errors.h"

namespace speedlabs {

bool cuda_available() { return torch::cuda::is_available(); }

c10::Device select_device(const std::string& request) {
  if (request == "auto") {
    if (cuda_available()) return c10::Device(c10::kCUDA, 0);
    if (torch::mps::is_available()) return c10::Device(c10::kMPS);
    return c10::Device(c10::kCPU);
  }
  if (request == "cpu") return c10::Device(c10::kCPU);
  if (request == "cuda") {
    if (!cuda_available()) {
      throw UsageError(
          "--device cuda was asked for, but libtorch sees no CUDA GPU here (no GPU, no driver, or a CPU-only "
          "libtorch). Use --device cpu or --device auto.");
    }
    return c10::Device(c10::kCUDA, 0);
  }
  if (request == "mps") {
    if (!torch::mps::is_available()) {
      throw UsageError("--device mps was asked for, but this machine or libtorch has no MPS. Use --device auto.");
    }
    return c10::Device(c10::kMPS);
  }
  throw UsageError("unknown device '" + request + "': choose auto, cpu, cuda or mps");
}

void synchronize(const c10::Device& device) {
  if (device.is_cpu()) return;
  // The device-generic guard keeps this file free of CUDA headers, so it builds with any libtorch.
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  impl->synchronizeDevice(device.index() < 0 ? 0 : device.index());
}

std::string describe(const c10::Device& device) {
  if (device.is_cpu()) {
    return "cpu (" + std::to_string(at::get_num_threads()) + " threads)";
  }
  return device.str();
}

std::string libtorch_version() { return TORCH_VERSION; }

}  // namespace speedlabs
