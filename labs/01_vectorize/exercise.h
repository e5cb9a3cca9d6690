/// @file labs/01_vectorize/exercise.h
/// @brief Lab 01 exercise: three sums of squares that do not add one value at a time.
///
/// Stubs live in labs/01_vectorize/exercise.cpp, the reference in solutions/01_vectorize/exercise.cpp.
#pragma once
#include <torch/types.h>
#include <Eigen/Core>

#include <cstdint>

namespace lab01 {

/// Sum of x[i]^2 over a vector, written as one Eigen expression.
///
/// Eigen turns the expression into a SIMD loop with several partial sums, so it is both
/// vectorised and a different order of additions than a scalar loop.
/// @param x  the values (any length, may be empty)
/// @return   the sum of their squares
double sum_squares_eigen(const Eigen::Ref<const Eigen::VectorXd>& x);

/// Sum of x[i]^2 over a 1-D float64 tensor, written as whole-tensor libtorch operations.
///
/// One call dispatches a couple of kernels for the whole tensor instead of one per element.
/// @param x  a 1-D tensor of dtype float64 on any device
/// @return   the sum of its squares, as a host double
double sum_squares_torch(const torch::Tensor& x);

/// Sum of data[i]^2 in plain C++, with several independent partial sums instead of one running total.
///
/// A loop `total += data[i] * data[i]` is one chain of dependent additions: each waits for the one
/// before it (about 4 cycles each), and the compiler may not reorder them, because floating-point
/// addition is not associative (without -ffast-math it must keep your order). Keeping several partial
/// sums (element i goes to partial sum i % k) gives the CPU k independent chains to overlap, and lets
/// the compiler use SIMD lanes; the partial sums are added together at the end. No intrinsics and no
/// compiler flags: the reordering is written in the source, so it is allowed.
/// @param data  the values; not read beyond data[n - 1]
/// @param n     how many values (0 or more; need not be a multiple of the number of partial sums)
/// @return      the sum of their squares (rounded differently than the one-chain loop, within n * eps)
double sum_squares_unrolled(const double* data, int64_t n);

}  // namespace lab01
