// Lab 01 exercise: three sums of squares that do not add one value at a time.
// Replace each body, then check your work with ./lab check 01.
#include "exercise.h"

#include "common/errors.h"

namespace lab01 {

// Why: the per-element tensor loop in experiment.cpp pays three dispatched libtorch operators per
// value. One Eigen expression compiles to a single tight loop over the data, with SIMD partial sums.
//
// Hints:
//  - Eigen vectors have reductions built in: look for the one that squares and sums (the squared
//    Euclidean norm), or combine a coefficient-wise square with .sum().
//  - No for loop: the whole point is that the library runs the loop.
//  - An empty vector must give 0.
double sum_squares_eigen(const Eigen::Ref<const Eigen::VectorXd>& /*x*/) {
  // TODO(lab01): one Eigen expression, no loop.
  speedlabs::not_implemented("01", "01_vectorize", "sum_squares_eigen");
}

// Why: the same sum in libtorch, the way a PyTorch user writes it: a couple of kernels for the whole
// tensor instead of three per element.
//
// Hints:
//  - Square the tensor with one whole-tensor operation, then reduce it with another.
//  - The result is a 0-d tensor; bring it to the host as a double with .item<double>().
double sum_squares_torch(const torch::Tensor& /*x*/) {
  // TODO(lab01): whole-tensor libtorch ops, then bring the scalar to the host.
  speedlabs::not_implemented("01", "01_vectorize", "sum_squares_torch");
}

// Why: the plain loop `total += data[i] * data[i]` (sum_squares_scalar_loop in experiment.cpp) is one
// chain of additions, each waiting for the previous one. The compiler may not split it for you:
// floating-point addition is not associative, so a different order is a different result, and
// without -ffast-math it keeps the order you wrote. Write a different order yourself.
//
// Hints:
//  - Keep k partial sums (4 or 8 are good: a modern core has two adders, each about 4 cycles deep),
//    a local array or k variables. Element i goes into partial sum i % k, so the k chains are
//    independent and the CPU (and the compiler's SIMD lanes) can work on them at the same time.
//  - Step the main loop by k; n need not be a multiple of k, so finish the last n % k values after it.
//    Never read data[n] or beyond.
//  - Add the partial sums together at the end.
//  - Plain C++ only: no intrinsics, no pragmas, no compiler flags.
double sum_squares_unrolled(const double* /*data*/, int64_t /*n*/) {
  // TODO(lab01): several independent partial sums, combined at the end.
  speedlabs::not_implemented("01", "01_vectorize", "sum_squares_unrolled");
}

}  // namespace lab01
