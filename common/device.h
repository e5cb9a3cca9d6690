/// @file device.h
/// @brief Choosing the device a lab runs on, describing it, and waiting for it.
#pragma once
#include <c10/core/Device.h>
#include <string>

namespace speedlabs {

/// Resolves a --device value. "auto" picks cuda, then mps, then cpu (the lessons' order);
/// "cpu", "cuda" and "mps" ask for that device and throw UsageError when it is not there.
c10::Device select_device(const std::string& request);

/// True when libtorch can see a CUDA GPU on this machine.
bool cuda_available();

/// Blocks until all work queued on @p device has finished (a no-op on the CPU).
/// GPU work is asynchronous: reading a clock without this times the queuing, not the work.
void synchronize(const c10::Device& device);

/// A one-line human description: "cpu (2 threads)" or "cuda:0 (NVIDIA H200, 139 GiB)".
std::string describe(const c10::Device& device);

/// The libtorch version this program was built against, e.g. "2.13.0".
std::string libtorch_version();

}  // namespace speedlabs
