// Lab 10 exercise stubs: the bucketed, overlapped gradient all-reduce. Check your work with ./lab check 10
// (README.md, "The exercise").
#include "exercise.h"

#include "common/errors.h"

namespace lab10 {

// Why: one all-reduce per gradient after backward pays the start-up cost of every call and leaves the
// network idle while backward computes. Buckets of about --bucket-mb gradients, each sent as soon as it
// is full, make fewer, larger calls and run them while autograd computes the earlier layers' gradients.
void on_gradient_ready(GradientBuckets& /*buckets*/, size_t /*param*/, const torch::Tensor& /*grad*/) {
  // TODO(lab10): find the parameter's bucket (buckets.bucket_of) and copy the gradient into the bucket's
  // flat tensor at buckets.offset_of[param] (hint: flat.narrow(0, offset, grad.numel()) and
  // grad.reshape(-1)). Count it as ready; when the bucket has all its parameters' gradients, start its
  // all-reduce with buckets.comm->start_allreduce_sum(flat) and keep the handle in the bucket.
  // Do not wait here: the point is that backward goes on while the bucket travels.
  speedlabs::not_implemented("10", "10_data_parallel", "on_gradient_ready");
}

// Why: the optimizer may only step once every worker holds the same averaged gradients; this is the one
// place a worker waits for the others.
void wait_for_gradients(GradientBuckets& /*buckets*/) {
  // TODO(lab10): for each bucket: if its all-reduce never started (handle -1), throw
  // speedlabs::RuntimeFailure naming the bucket and how many of its gradients arrived. Otherwise wait
  // for it (buckets.comm->wait), then set each of its parameters' gradient (param.mutable_grad()) to its
  // slice of flat, shaped like the parameter, divided by buckets.comm->size(). Reset ready to 0 and
  // handle to -1 for the next step.
  speedlabs::not_implemented("10", "10_data_parallel", "wait_for_gradients");
}

}  // namespace lab10
