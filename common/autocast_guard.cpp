#include "common/autocast_guard.h"

#include <ATen/autocast_mode.h>
#include <torch/types.h>

#include "common/errors.h"

namespace speedlabs {

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled)
    : device_type_(device_type) {
  if (!at::autocast::is_autocast_available(device_type)) {
    throw UsageError("autocast is not available for device type '" + c10::DeviceTypeName(device_type, true) +
                     "' in this libtorch");
  }
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type);
  at::autocast::set_autocast_enabled(device_type, enabled);
  at::autocast::set_autocast_dtype(device_type, dtype);
  at::autocast::increment_nesting();  // Python's __enter__ counts disabled regions too
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

bool autocast_supported(const c10::Device& device, c10::ScalarType dtype) {
  if (dtype != c10::kHalf && dtype != c10::kBFloat16) return false;  // autocast is for 16-bit types
  if (!at::autocast::is_autocast_available(device.type())) return false;
  try {
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    const auto input = torch::ones({2, 4}, options);
    const auto weight = torch::ones({3, 4}, options);
    AutocastGuard guard(device.type(), dtype);
    return torch::linear(input, weight).scalar_type() == dtype;
  } catch (const c10::Error&) {
    return false;  // no kernel for this dtype on this device
  }
}

}  // namespace speedlabs
