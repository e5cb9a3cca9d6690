// Lab 10 reference solution: the bucketed, overlapped gradient all-reduce.
#include "exercise.h"

#include <string>

#include "common/errors.h"

namespace lab10 {

void on_gradient_ready(GradientBuckets& buckets, size_t param, const torch::Tensor& grad) {
  Bucket& bucket = buckets.buckets[buckets.bucket_of[param]];
  bucket.flat.narrow(0, buckets.offset_of[param], grad.numel()).copy_(grad.reshape(-1));
  if (++bucket.ready == bucket.params.size()) bucket.handle = buckets.comm->start_allreduce_sum(bucket.flat);
}

void wait_for_gradients(GradientBuckets& buckets) {
  const double workers = buckets.comm->size();
  for (size_t b = 0; b < buckets.buckets.size(); ++b) {
    Bucket& bucket = buckets.buckets[b];
    if (bucket.handle < 0) {
      throw speedlabs::RuntimeFailure("bucket " + std::to_string(b) + " got " + std::to_string(bucket.ready) +
                                      " of its " + std::to_string(bucket.params.size()) +
                                      " gradients in this step, so its all-reduce never started");
    }
    buckets.comm->wait(bucket.handle);
    for (size_t p : bucket.params) {
      torch::Tensor& param = buckets.params[p];
      param.mutable_grad() = bucket.flat.narrow(0, buckets.offset_of[p], param.numel()).view(param.sizes()) / workers;
    }
    bucket.ready = 0;
    bucket.handle = -1;
  }
}

}  // namespace lab10
