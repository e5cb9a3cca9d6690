#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <string>
#include <vector>

#include "policy.h"

namespace lab03 {

// libtorch's CPU autocast lists, copied from the TORCH_LIBRARY_IMPL(aten, AutocastCPU, m) block of
// aten/src/ATen/autocast_mode.cpp (PyTorch source, the CPU block as of the 2.x series). The header the
// venv ships (torch/include/ATen/autocast_mode.h) only has the CUDA/XPU lists (AT_FORALL_LOWER_PRECISION_FP,
// AT_FORALL_FP32, ...); the CPU block lives in the .cpp. check_cpu_lists_against_dispatcher() asks this
// libtorch binary whether each entry really has an AutocastCPU kernel, so a drift shows up as a failure.
// "fp32_set_opt_dtype" and "fp32" both end in float32; the CPU block uses plain fp32 for all of them.
namespace cpu_lists {

// One entry after another as in autocast_mode.cpp, so the lists read (and diff) like the source.
// clang-format off
const std::vector<std::string> lower_precision = {
    "conv1d", "conv1d.padding", "conv2d", "conv2d.padding", "conv3d", "conv3d.padding", "bmm", "mm",
    "linalg_vecdot", "baddbmm", "addmm", "_addmm_activation", "addbmm", "linear", "_convolution.deprecated",
    "matmul", "conv_tbc", "mkldnn_rnn_layer", "conv_transpose1d", "conv_transpose2d.input",
    "conv_transpose3d.input", "prelu", "scaled_dot_product_attention", "_native_multi_head_attention"};

const std::vector<std::string> fp32 = {
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "prod.dim_int", "prod.dim_Dimname",
    "quantile", "quantile.scalar", "nanquantile", "nanquantile.scalar", "stft", "stft.center", "cdist",
    "grid_sampler_2d", "_grid_sampler_2d_cpu_fallback", "grid_sampler_3d", "trace", "view_as_complex",
    "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr", "pinverse",
    "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d",
    "replication_pad1d", "replication_pad2d", "replication_pad3d", "mse_loss", "cosine_embedding_loss",
    "nll_loss", "nll_loss2d", "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss",
    "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "ctc_loss.IntList", "ctc_loss.Tensor", "kl_div", "multilabel_margin_loss",
    "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn",
    "fft_rfft", "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft",
    "linalg_cond", "linalg_cond.p_str", "linalg_matrix_rank", "linalg_matrix_rank.tol_tensor",
    "linalg_matrix_rank.atol_rtol_tensor", "linalg_matrix_rank.atol_rtol_float", "linalg_solve",
    "linalg_cholesky", "linalg_svdvals", "linalg_eigvals", "linalg_eigvalsh", "linalg_inv",
    "linalg_householder_product", "linalg_tensorinv", "linalg_tensorsolve", "fake_quantize_per_tensor_affine",
    "geqrf", "_lu_with_info", "qr", "svd", "triangular_solve", "fractional_max_pool2d", "fractional_max_pool3d",
    "adaptive_max_pool3d", "multilabel_margin_loss_forward", "linalg_qr", "linalg_cholesky_ex", "linalg_svd",
    "linalg_eig", "linalg_eigh", "linalg_lstsq", "linalg_inv_ex"};

const std::vector<std::string> promote = {"stack", "cat", "index_copy", "index_copy.dimname"};
// clang-format on

}  // namespace cpu_lists

std::string cpu_list_policy(const std::string& op) {
  if (op.empty()) return "inputs";
  const auto in = [&](const std::vector<std::string>& list) {
    return std::find(list.begin(), list.end(), op) != list.end();
  };
  if (in(cpu_lists::lower_precision)) return "lower";
  if (in(cpu_lists::fp32)) return "float32";
  if (in(cpu_lists::promote)) return "widest";
  return "inputs";
}

bool has_autocast_cpu_kernel(const std::string& op) {
  const auto dot = op.find('.');
  const std::string name = "aten::" + op.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  const auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(name, overload));
  return handle.has_value() && handle->hasKernelForDispatchKey(c10::DispatchKey::AutocastCPU);
}

CpuListCheck check_cpu_lists_against_dispatcher() {
  CpuListCheck check;
  for (const auto* list : {&cpu_lists::lower_precision, &cpu_lists::fp32, &cpu_lists::promote}) {
    for (const auto& op : *list) {
      ++check.entries;
      if (has_autocast_cpu_kernel(op)) {
        ++check.registered;
      } else {
        check.unregistered.push_back(op);
      }
    }
  }
  return check;
}

}  // namespace lab03
