/// @file labs/01_vectorize/experiment.h
/// @brief Lab 01: the same sum of squares five ways, checked equal, then timed.
#pragma once
#include <torch/torch.h>

#include <cstdint>

#include "common/observations.h"
#include "common/timer.h"

namespace lab01 {

/// (a) One libtorch op per element: the C++ picture of an interpreted loop.
double sum_squares_tensor_loop(const torch::Tensor& x);

/// (b) A plain compiled scalar loop over the raw doubles.
double sum_squares_scalar_loop(const double* data, int64_t n);

/// The experiment's knobs.
struct Config {
  int64_t n = 1'000'000;                                ///< how many N(0,1) doubles
  uint64_t seed = 0;                                    ///< the generator seed
  speedlabs::TimingOptions fast{3, 20, 60, 0.05, 2.0};  ///< for (b), (c), (d), (e): rounds added while scattered
  speedlabs::TimingOptions element_loop{1, 3};          ///< for (a), thousands of times slower
};

/// The settings --quick uses: 100,000 values, so the whole run takes well under a second.
Config quick_config();

/// Runs the five variants on the CPU and records same_result, vectorised_3x_faster,
/// scalar_loop_vs_eigen, unrolled_vs_scalar_loop, unrolled_vs_eigen and torch_vs_eigen.
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab01
