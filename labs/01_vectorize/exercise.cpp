// Lab 01 exercise stubs: replace each body, then run ./lab test (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab01 {

double sum_squares_eigen(const Eigen::Ref<const Eigen::VectorXd>& /*x*/) {
  // TODO(lab01): one Eigen expression, no loop.
  speedlabs::not_implemented("01", "01_vectorize", "sum_squares_eigen");
}

double sum_squares_torch(const torch::Tensor& /*x*/) {
  // TODO(lab01): whole-tensor libtorch ops, then bring the scalar to the host.
  speedlabs::not_implemented("01", "01_vectorize", "sum_squares_torch");
}

}  // namespace lab01
