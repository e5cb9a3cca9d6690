#include "fused_gelu.h"

#include <ATen/Parallel.h>
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#ifdef SPEEDLABS_LAB12_CUDA_KERNEL
#include "fused_bias_gelu.h"
#endif

namespace lab12 {

namespace {

constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kKappa = 0.044715f;
constexpr double kFloatBytes = 4;
// Floats per block of a row: evaluated into a buffer that stays in L1, then streamed out.
constexpr int64_t kBlockFloats = 512;

#if defined(__AVX512F__)
constexpr int64_t kStreamLanes = 16;
void stream_lanes(float* aligned_dst, const float* src) { _mm512_stream_ps(aligned_dst, _mm512_loadu_ps(src)); }
#elif defined(__AVX__)
constexpr int64_t kStreamLanes = 8;
void stream_lanes(float* aligned_dst, const float* src) { _mm256_stream_ps(aligned_dst, _mm256_loadu_ps(src)); }
#elif defined(__SSE__)
constexpr int64_t kStreamLanes = 4;
void stream_lanes(float* aligned_dst, const float* src) { _mm_stream_ps(aligned_dst, _mm_loadu_ps(src)); }
#else
constexpr int64_t kStreamLanes = 0;  // no streaming store here: plain stores
void stream_lanes(float*, const float*) {}
#endif

// Writes n floats with streaming (non-temporal) stores where the CPU has them, as memcpy writes a large copy:
// a cache line written whole is not read from memory first, so the output costs its bytes once, not twice.
void write_streaming(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  if constexpr (kStreamLanes > 0) {
    const auto aligned = [&](int64_t at) {
      return reinterpret_cast<std::uintptr_t>(dst + at) % (kStreamLanes * sizeof(float)) == 0;
    };
    for (; i < n && !aligned(i); ++i) dst[i] = src[i];
    for (; i + kStreamLanes <= n; i += kStreamLanes) stream_lanes(dst + i, src + i);
  }
  std::copy(src + i, src + n, dst + i);
}

// Streaming stores are weakly ordered: fence them before another thread may read the output.
void fence_streaming_stores() {
#if defined(__SSE__)
  _mm_sfence();
#endif
}

void check_inputs(const torch::Tensor& x, const torch::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "lab12: fused_bias_gelu takes a contiguous (rows, cols) float32 tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1) && bias.scalar_type() == torch::kFloat &&
                  bias.is_contiguous() && bias.device() == x.device(),
              "lab12: the bias must be (cols,) float32 on x's device");
}

}  // namespace

bool fused_kernel_built() {
#ifdef SPEEDLABS_LAB12_CUDA_KERNEL
  return true;
#else
  return false;
#endif
}

torch::Tensor fused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias) {
  auto out = torch::empty_like(x);
  fused_bias_gelu_out(x, bias, out);
  return out;
}

void fused_bias_gelu_out(const torch::Tensor& x, const torch::Tensor& bias, torch::Tensor& out) {
  check_inputs(x, bias);
  TORCH_CHECK(out.sizes() == x.sizes() && out.scalar_type() == torch::kFloat && out.is_contiguous() &&
                  out.device() == x.device(),
              "lab12: out must be a contiguous float32 tensor of x's shape on x's device");
  const int64_t rows = x.size(0), cols = x.size(1);
  if (x.is_cuda()) {
#ifdef SPEEDLABS_LAB12_CUDA_KERNEL
    cuda::fused_bias_gelu(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return;
#else
    throw std::runtime_error("lab12: the bias + GELU kernel was not built (no nvcc at configure time)");
#endif
  }
  TORCH_CHECK(x.is_cpu(), "lab12: fused_bias_gelu runs on the CPU or a CUDA device");
  const float* in = x.data_ptr<float>();
  const float* b_data = bias.data_ptr<float>();
  float* o_data = out.data_ptr<float>();
  // Rows over libtorch's threads, about 32K elements per task so each thread streams long stretches; each row in
  // blocks that stay in L1, written out with streaming stores.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(cols, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    alignas(64) float block[kBlockFloats];
    for (int64_t row = begin; row < end; ++row) {
      for (int64_t start = 0; start < cols; start += kBlockFloats) {
        const int64_t n = std::min(kBlockFloats, cols - start);
        const Eigen::Map<const Eigen::ArrayXf> x_part(in + row * cols + start, n), b(b_data + start, n);
        // One expression, evaluated packet by packet in one loop: x + bias lives in registers, never in memory.
        const auto v = x_part + b;
        Eigen::Map<Eigen::ArrayXf>(block, n) = 0.5f * v * (1.0f + (kBeta * (v + kKappa * v.cube())).tanh());
        write_streaming(o_data + row * cols + start, block, n);
      }
    }
    fence_streaming_stores();
  });
}

torch::Tensor unfused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias) {
  return torch::gelu(x + bias, "tanh");
}

void unfused_bias_gelu_out(const torch::Tensor& x, const torch::Tensor& bias, torch::Tensor& biased,
                           torch::Tensor& out) {
  at::add_out(biased, x, bias);
  at::gelu_out(out, biased, "tanh");
}

double fused_bytes(int64_t rows, int64_t cols) {
  const double elements = static_cast<double>(rows) * static_cast<double>(cols);
  return kFloatBytes * (2 * elements + static_cast<double>(cols));
}

double unfused_bytes(int64_t rows, int64_t cols) {
  const double elements = static_cast<double>(rows) * static_cast<double>(cols);
  return kFloatBytes * (4 * elements + static_cast<double>(cols));
}

}  // namespace lab12
