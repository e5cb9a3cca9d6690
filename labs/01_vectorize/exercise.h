/// @file labs/01_vectorize/exercise.h
/// @brief Lab 01 exercise: the two vectorised sums of squares.
///
/// Stubs live in labs/01_vectorize/exercise.cpp, the reference in solutions/01_vectorize/exercise.cpp.
#pragma once
#include <Eigen/Core>
#include <torch/torch.h>

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

}  // namespace lab01
