/// @file labs/04_measure/reduction.h
/// @brief Lab 04's GPU exercise: the sum of squares as a parallel reduction (a CUDA kernel).
///
/// Built only where nvcc is found (the lab's CUDA_KERNEL in cmake/SpeedLab.cmake); everything that links it
/// then sees SPEEDLABS_LAB04_CUDA_KERNEL. The stub is labs/04_measure/reduction.cu, the reference
/// solutions/04_measure/reduction.cu. This header needs no CUDA headers.
#pragma once
#include <cstdint>

namespace lab04 {

/// Launches the sum of squares of @p n device doubles as a parallel reduction, on the current stream;
/// a speedlabs::cuda::SumSquaresLaunch (common/cuda/kernels.h), timed by speedlabs::cuda::sum_squares().
///
/// The shape of the reduction: a first kernel with up to speedlabs::cuda::kMaxPartials blocks, where
/// each thread squares and adds the elements of a grid-stride loop, and the threads of a block add up
/// their values in shared memory as a tree, one partial sum per block into @p partials; then a second
/// launch of one block adds up the partials into @p out. Thousands of threads work at once, where the
/// serial kernel walks the elements one after another.
/// @param x         n doubles in device memory
/// @param n         how many (at least 1, any size: not a multiple of the block size in general)
/// @param partials  device scratch space for speedlabs::cuda::kMaxPartials doubles
/// @param out       one double in device memory, overwritten with the sum
void launch_sum_squares_reduction(const double* x, int64_t n, double* partials, double* out);

}  // namespace lab04
