#include "buckets.h"

#include <cmath>
#include <sstream>

#include "common/errors.h"
#include "common/format.h"

namespace lab10 {

int64_t bucket_bytes(double mb) {
  if (!std::isfinite(mb) || !(mb * speedlabs::kBytesPerMiB >= 1) || mb > kMaxBucketMb) {
    std::ostringstream given;
    given << mb;
    throw speedlabs::UsageError("--bucket-mb " + given.str() +
                                " is not a bucket size: give MiB from one byte's worth (1e-06) to " +
                                speedlabs::fixed(kMaxBucketMb, 0) + " (1 TiB)");
  }
  return static_cast<int64_t>(mb * speedlabs::kBytesPerMiB);
}

GradientBuckets make_gradient_buckets(const std::vector<torch::Tensor>& params, int64_t bucket_bytes,
                                      Communicator& comm) {
  if (bucket_bytes <= 0) throw speedlabs::UsageError("the bucket size must be positive");
  GradientBuckets layout;
  layout.params = params;
  layout.comm = &comm;
  layout.bucket_of.resize(params.size());
  layout.offset_of.resize(params.size());
  int64_t filled = 0;  // float32 elements in the last bucket
  for (size_t i = params.size(); i-- > 0;) {
    const int64_t n = params[i].numel();
    if (params[i].scalar_type() != torch::kFloat) {
      throw speedlabs::UsageError("bucketed all-reduce expects float32 parameters, parameter " + std::to_string(i) +
                                  " is " + std::string(c10::toString(params[i].scalar_type())));
    }
    if (layout.buckets.empty() || (filled > 0 && (filled + n) * 4 > bucket_bytes)) {
      layout.buckets.emplace_back();
      filled = 0;
    }
    layout.buckets.back().params.push_back(i);
    layout.bucket_of[i] = layout.buckets.size() - 1;
    layout.offset_of[i] = filled;
    filled += n;
  }
  for (Bucket& bucket : layout.buckets) {
    int64_t elements = 0;
    for (size_t i : bucket.params) elements += params[i].numel();
    bucket.flat = torch::zeros({elements}, params[bucket.params.front()].options());  // on the gradients' device
  }
  return layout;
}

void attach_gradient_hooks(GradientBuckets& buckets) {
  GradientBuckets* layout = &buckets;
  for (size_t i = 0; i < buckets.params.size(); ++i) {
    buckets.params[i].register_hook([layout, i](const torch::Tensor& grad) { on_gradient_ready(*layout, i, grad); });
  }
}

}  // namespace lab10
