/// @file autocast_guard.h
/// @brief torch.autocast for C++: an RAII guard that turns autocast on for one device type and restores it.
///
/// libtorch has the per-device switches (at::autocast::set_autocast_enabled / set_autocast_dtype) but no
/// scoped guard. This one does what Python's `with torch.autocast(device_type, dtype):` does on entry and
/// exit, including the nesting count and the clearing of the cast cache when the outermost guard exits.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace speedlabs {

/// Enables (or disables) autocast for one device type with one low-precision dtype while it lives.
///
/// On construction it remembers the device type's current enabled flag and dtype, sets the new ones and
/// increments autocast's nesting count. On destruction (also while an exception unwinds) it decrements the
/// count, clears the cast cache when the count reaches zero (the cached low-precision copies of float32
/// weights would otherwise go stale after the optimizer updates the weights) and restores the flag and dtype.
class AutocastGuard {
 public:
  /// @param device_type  the device type whose autocast state changes (kCPU, kCUDA, kMPS, ...)
  /// @param dtype        the low-precision dtype autocast casts eligible ops to (kBFloat16 or kHalf)
  /// @param enabled      false makes a guard that disables autocast in its scope (like enabled=False)
  /// @throws UsageError  when this libtorch has no autocast for @p device_type
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

/// True when autocast on @p device really computes a linear layer in @p dtype: measured with a tiny
/// float32 linear under an AutocastGuard, so it reflects this libtorch and device, not a list.
/// @param device  the device to probe
/// @param dtype   the autocast dtype wanted; anything but kBFloat16 or kHalf gives false
bool autocast_supported(const c10::Device& device, c10::ScalarType dtype);

}  // namespace speedlabs
