/// @file labs/10_data_parallel/src/buckets.h
/// @brief Which gradients share a bucket, and the hooks that hand each gradient to the exercise.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/workers/communicator.h"
#include "exercise.h"

namespace lab10 {

/// Lays @p params out in buckets of at most @p bucket_bytes of float32 gradients, in reverse order of
/// @p params (the order of a model's parameters follows the forward pass, and backward produces their
/// gradients roughly the other way round). A parameter larger than a bucket gets a bucket of its own.
/// @param params       the model's parameters (float32)
/// @param bucket_bytes the most bytes of gradients per bucket (PyTorch DDP's default: 25 MiB)
/// @param comm         who the buckets are all-reduced with; must outlive the result
GradientBuckets make_gradient_buckets(const std::vector<torch::Tensor>& params, int64_t bucket_bytes,
                                      Communicator& comm);

/// The largest bucket, in MiB, that --bucket-mb accepts: 1 TiB, far beyond any model here, and its bytes
/// stay well within int64.
inline constexpr double kMaxBucketMb = 1 << 20;

/// The bytes of a bucket of @p mb MiB. Throws speedlabs::UsageError, naming --bucket-mb, unless @p mb is a
/// finite size of at least one byte and at most kMaxBucketMb.
/// @param mb the bucket size in MiB (--bucket-mb)
int64_t bucket_bytes(double mb);

/// Registers on every parameter a gradient hook that calls on_gradient_ready(buckets, index, grad).
/// The hooks keep a pointer to @p buckets, which must stay where it is for as long as the parameters
/// take part in backward.
/// @param buckets the layout built by make_gradient_buckets()
void attach_gradient_hooks(GradientBuckets& buckets);

}  // namespace lab10
