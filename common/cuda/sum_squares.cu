// The sum of squares by one GPU thread, and the harness that times any sum-of-squares launch with CUDA
// events (lab 04's parallel reduction is the exercise in labs/04_measure/reduction.cu).
#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "common/cuda/check.h"
#include "common/cuda/kernels.h"

namespace speedlabs::cuda {
namespace {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<double, DeviceFree>;

DeviceBuffer device_alloc(int64_t count) {
  void* p = nullptr;
  SPEEDLABS_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(count) * sizeof(double)));
  return DeviceBuffer(static_cast<double*>(p));
}

struct EventDestroy {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

Event make_event() {
  cudaEvent_t e = nullptr;
  SPEEDLABS_CUDA_CHECK(cudaEventCreate(&e));
  return Event(e);
}

__global__ void sum_squares_one_thread(const double* x, int64_t n, double* out) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += x[i] * x[i];
  *out = total;
}

}  // namespace

GpuPresence find_gpus() {
  GpuPresence presence;
  const cudaError_t status = cudaGetDeviceCount(&presence.count);
  if (status != cudaSuccess) {
    presence.count = 0;
    // With no NVIDIA driver at all the runtime says "driver insufficient"; say what that means here.
    presence.reason = status == cudaErrorInsufficientDriver
                          ? "no CUDA GPU: no NVIDIA driver, or one older than this CUDA runtime (cudaGetDeviceCount)"
                          : std::string("no CUDA GPU: cudaGetDeviceCount: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later calls start clean
  } else if (presence.count == 0) {
    presence.reason = "the CUDA runtime sees no GPU";
  }
  return presence;
}

void launch_sum_squares_one_thread(const double* x, int64_t n, double* /*partials*/, double* out) {
  sum_squares_one_thread<<<1, 1>>>(x, n, out);
}

KernelRun sum_squares(const double* x, int64_t n, SumSquaresLaunch launch, int warmup, int repeats) {
  if (n < 1) throw std::invalid_argument("sum_squares: n must be at least 1");
  if (launch == nullptr) throw std::invalid_argument("sum_squares: no kernel to launch");
  if (warmup < 0 || repeats < 1) throw std::invalid_argument("sum_squares: warmup >= 0 and repeats >= 1 needed");
  const GpuPresence gpus = find_gpus();
  if (gpus.count == 0) throw std::runtime_error("sum_squares: " + gpus.reason);
  SPEEDLABS_CUDA_CHECK(cudaSetDevice(0));

  DeviceBuffer data = device_alloc(n);
  DeviceBuffer partials = device_alloc(kMaxPartials);
  DeviceBuffer out = device_alloc(1);
  SPEEDLABS_CUDA_CHECK(cudaMemcpy(data.get(), x, static_cast<size_t>(n) * sizeof(double), cudaMemcpyHostToDevice));

  const Event start = make_event();
  const Event end = make_event();
  KernelRun run;
  for (int i = 0; i < warmup + repeats; ++i) {
    SPEEDLABS_CUDA_CHECK(cudaEventRecord(start.get()));
    launch(data.get(), n, partials.get(), out.get());
    SPEEDLABS_CUDA_CHECK(cudaGetLastError());  // a bad launch configuration shows here
    SPEEDLABS_CUDA_CHECK(cudaEventRecord(end.get()));
    SPEEDLABS_CUDA_CHECK(cudaEventSynchronize(end.get()));
    float ms = 0;
    SPEEDLABS_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
    if (i == 0) run.first_ms = ms;
    if (i >= warmup) run.times_ms.push_back(ms);
  }
  SPEEDLABS_CUDA_CHECK(cudaMemcpy(&run.sum, out.get(), sizeof(double), cudaMemcpyDeviceToHost));
  return run;
}

}  // namespace speedlabs::cuda
