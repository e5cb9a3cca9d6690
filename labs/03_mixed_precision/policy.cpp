#include "policy.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "common/autocast_guard.h"

namespace lab03 {

namespace F = torch::nn::functional;

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    case c10::kDouble: return "float64";
    default: return c10::toString(dtype);
  }
}

// ---------------------------------------------------------------------------------------------------------
// libtorch's CPU autocast lists, copied from the TORCH_LIBRARY_IMPL(aten, AutocastCPU, m) block of
// aten/src/ATen/autocast_mode.cpp (PyTorch source, the CPU block as of the 2.x series). The header the
// venv ships (torch/include/ATen/autocast_mode.h) only has the CUDA/XPU lists (AT_FORALL_LOWER_PRECISION_FP,
// AT_FORALL_FP32, ...); the CPU block lives in the .cpp. check_cpu_lists_against_dispatcher() asks this
// libtorch binary whether each entry really has an AutocastCPU kernel, so a drift shows up as a failure.
// "fp32_set_opt_dtype" and "fp32" both end in float32; the CPU block uses plain fp32 for all of them.
namespace cpu_lists {

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

/// "lower", "float32", "widest" for a listed op, "inputs" for one without a CPU rule.
std::string policy_of(const std::string& op) {
  if (op.empty()) return "inputs";
  const auto in = [&](const std::vector<std::string>& list) {
    return std::find(list.begin(), list.end(), op) != list.end();
  };
  if (in(lower_precision)) return "lower";
  if (in(fp32)) return "float32";
  if (in(promote)) return "widest";
  return "inputs";
}

}  // namespace cpu_lists

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

// ---------------------------------------------------------------------------------------------------------
// The probes: every op of chapter 9 section 5.

namespace {

/// Makes a probe's floating-point inputs: the first in `first`, the rest in `rest`, values in (0.1, 0.9)
/// so that log, acos, erfinv and friends stay finite.
struct ProbeInputs {
  c10::ScalarType first;
  c10::ScalarType rest;
  c10::Device device;
  int made = 0;

  c10::ScalarType next_dtype() { return made++ == 0 ? first : rest; }
  torch::Tensor operator()(at::IntArrayRef shape) {
    const auto dtype = next_dtype();
    return (torch::rand(shape, torch::dtype(torch::kFloat32).device(device)) * 0.8 + 0.1).to(dtype);
  }
  /// A float tensor of ones (targets of the +-1 losses).
  torch::Tensor ones(at::IntArrayRef shape) { return torch::ones(shape, torch::dtype(next_dtype()).device(device)); }
  /// An integer tensor (class targets, indices); not floating point, so autocast never casts it.
  torch::Tensor longs(std::vector<int64_t> values, at::IntArrayRef shape) {
    return torch::tensor(values, torch::dtype(torch::kLong)).reshape(shape).to(device);
  }
};

struct OpProbe {
  std::string op;
  std::string chapter_policy;
  std::string call;
  std::string cpu_rule;
  std::string note;
  std::function<torch::Tensor(ProbeInputs&)> run;
};

using In = ProbeInputs;

std::vector<OpProbe> chapter_probes() {
  const std::string lower = "lower", fp32 = "float32", widest = "widest";
  const auto first = [](const std::tuple<torch::Tensor, torch::Tensor>& t) { return std::get<0>(t); };
  return {
      // Operations eligible for low precision.
      {"__matmul__", lower, "at::matmul", "matmul", "Python's a @ b is aten::matmul", [](In& in) { return at::matmul(in({4, 4}), in({4, 4})); }},
      {"addbmm", lower, "at::addbmm", "addbmm", "", [](In& in) { return at::addbmm(in({4, 4}), in({2, 4, 4}), in({2, 4, 4})); }},
      {"addmm", lower, "at::addmm", "addmm", "", [](In& in) { return at::addmm(in({4, 4}), in({4, 4}), in({4, 4})); }},
      {"addmv", lower, "at::addmv", "", "", [](In& in) { return at::addmv(in({4}), in({4, 4}), in({4})); }},
      {"addr", lower, "at::addr", "", "", [](In& in) { return at::addr(in({4, 4}), in({4}), in({4})); }},
      {"baddbmm", lower, "at::baddbmm", "baddbmm", "", [](In& in) { return at::baddbmm(in({2, 4, 4}), in({2, 4, 4}), in({2, 4, 4})); }},
      {"bmm", lower, "at::bmm", "bmm", "", [](In& in) { return at::bmm(in({2, 4, 4}), in({2, 4, 4})); }},
      {"chain_matmul", lower, "at::chain_matmul", "mm", "composite: its products are aten::mm", [](In& in) { return at::chain_matmul({in({4, 4}), in({4, 4}), in({4, 4})}); }},
      {"multi_dot", lower, "at::linalg_multi_dot", "mm", "composite: its products are aten::mm", [](In& in) { return at::linalg_multi_dot({in({4, 4}), in({4, 4}), in({4, 4})}); }},
      {"conv1d", lower, "at::conv1d", "conv1d", "", [](In& in) { return at::conv1d(in({1, 2, 8}), in({3, 2, 3})); }},
      {"conv2d", lower, "at::conv2d", "conv2d", "", [](In& in) { return at::conv2d(in({1, 2, 6, 6}), in({3, 2, 3, 3})); }},
      {"conv3d", lower, "at::conv3d", "conv3d", "", [](In& in) { return at::conv3d(in({1, 2, 4, 4, 4}), in({3, 2, 3, 3, 3})); }},
      {"conv_transpose1d", lower, "at::conv_transpose1d", "conv_transpose1d", "", [](In& in) { return at::conv_transpose1d(in({1, 2, 8}), in({2, 3, 3})); }},
      {"conv_transpose2d", lower, "at::conv_transpose2d", "conv_transpose2d.input", "", [](In& in) { return at::conv_transpose2d(in({1, 2, 6, 6}), in({2, 3, 3, 3})); }},
      {"conv_transpose3d", lower, "at::conv_transpose3d", "conv_transpose3d.input", "", [](In& in) { return at::conv_transpose3d(in({1, 2, 4, 4, 4}), in({2, 3, 3, 3, 3})); }},
      {"GRUCell", lower, "at::gru_cell (torch::nn::GRUCell's op)", "", "no CPU rule for the cell: its gates go through linear, but the new state mixes in the float32 h, so type promotion gives float32",
       [](In& in) { return at::gru_cell(in({2, 4}), in({2, 3}), in({9, 4}), in({9, 3})); }},
      {"linear", lower, "at::linear", "linear", "", [](In& in) { return at::linear(in({2, 4}), in({3, 4})); }},
      {"LSTMCell", lower, "at::lstm_cell (torch::nn::LSTMCell's op)", "", "no CPU rule for the cell: its gates go through linear, but the new state mixes in the float32 c, so type promotion gives float32",
       [first](In& in) { const auto x = in({2, 4}); const auto h = in({2, 3}); const auto c = in({2, 3}); return first(at::lstm_cell(x, {h, c}, in({12, 4}), in({12, 3}))); }},
      {"matmul", lower, "at::matmul", "matmul", "", [](In& in) { return at::matmul(in({4, 4}), in({4, 4})); }},
      {"mm", lower, "at::mm", "mm", "", [](In& in) { return at::mm(in({4, 4}), in({4, 4})); }},
      {"mv", lower, "at::mv", "", "", [](In& in) { return at::mv(in({4, 4}), in({4})); }},
      {"prelu", lower, "at::prelu", "prelu", "", [](In& in) { return at::prelu(in({4}), in({1})); }},
      {"RNNCell", lower, "at::rnn_tanh_cell (torch::nn::RNNCell's op)", "linear", "composite: tanh(linear(x) + linear(h))", [](In& in) { return at::rnn_tanh_cell(in({2, 4}), in({2, 3}), in({3, 4}), in({3, 3})); }},
      // Operations that autocast to float32.
      {"__pow__", fp32, "at::pow(x, 2)", "", "Python's x ** 2 is pow.Tensor_Scalar", [](In& in) { return at::pow(in({4}), 2); }},
      {"__rdiv__", fp32, "x.reciprocal() * 2", "", "Python's 2 / x is reciprocal()*2; C++'s 2.0 / x is fill_+div_, a different op", [](In& in) { return in({4}).reciprocal() * 2; }},
      {"__rpow__", fp32, "at::pow(2, x)", "", "Python's 2 ** x is pow.Scalar", [](In& in) { return at::pow(2, in({4})); }},
      {"__rtruediv__", fp32, "x.reciprocal() * 2", "", "same as __rdiv__ in Python 3", [](In& in) { return in({4}).reciprocal() * 2; }},
      {"acos", fp32, "at::acos", "", "", [](In& in) { return at::acos(in({4})); }},
      {"asin", fp32, "at::asin", "", "", [](In& in) { return at::asin(in({4})); }},
      {"binary_cross_entropy_with_logits", fp32, "at::binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits", "", [](In& in) { return at::binary_cross_entropy_with_logits(in({2, 4}), in({2, 4})); }},
      {"cosh", fp32, "at::cosh", "", "", [](In& in) { return at::cosh(in({4})); }},
      {"cosine_embedding_loss", fp32, "at::cosine_embedding_loss", "cosine_embedding_loss", "", [](In& in) { return at::cosine_embedding_loss(in({2, 4}), in({2, 4}), in.ones({2})); }},
      {"cdist", fp32, "at::cdist", "cdist", "", [](In& in) { return at::cdist(in({3, 4}), in({3, 4})); }},
      {"cosine_similarity", fp32, "at::cosine_similarity", "", "", [](In& in) { return at::cosine_similarity(in({2, 4}), in({2, 4})); }},
      {"cross_entropy", fp32, "F::cross_entropy", "cross_entropy_loss", "C++ F::cross_entropy calls aten::cross_entropy_loss", [](In& in) { return F::cross_entropy(in({2, 4}), in.longs({0, 3}, {2})); }},
      {"cumprod", fp32, "at::cumprod", "", "", [](In& in) { return at::cumprod(in({4}), 0); }},
      {"cumsum", fp32, "at::cumsum", "", "", [](In& in) { return at::cumsum(in({4}), 0); }},
      {"dist", fp32, "at::dist", "", "", [](In& in) { return at::dist(in({4}), in({4})); }},
      {"erfinv", fp32, "at::erfinv", "", "", [](In& in) { return at::erfinv(in({4})); }},
      {"exp", fp32, "at::exp", "", "", [](In& in) { return at::exp(in({4})); }},
      {"expm1", fp32, "at::expm1", "", "", [](In& in) { return at::expm1(in({4})); }},
      {"group_norm", fp32, "at::group_norm", "", "", [](In& in) { return at::group_norm(in({2, 4, 3}), 2); }},
      {"hinge_embedding_loss", fp32, "at::hinge_embedding_loss", "hinge_embedding_loss", "", [](In& in) { return at::hinge_embedding_loss(in({2, 4}), in.ones({2, 4})); }},
      {"kl_div", fp32, "at::kl_div", "kl_div", "", [](In& in) { return at::kl_div(in({2, 4}), in({2, 4})); }},
      {"l1_loss", fp32, "at::l1_loss", "l1_loss", "", [](In& in) { return at::l1_loss(in({2, 4}), in({2, 4})); }},
      {"layer_norm", fp32, "at::layer_norm", "", "", [](In& in) { return at::layer_norm(in({2, 4}), {4}); }},
      {"log", fp32, "at::log", "", "", [](In& in) { return at::log(in({4})); }},
      {"log_softmax", fp32, "at::log_softmax", "", "", [](In& in) { return at::log_softmax(in({2, 4}), 1); }},
      {"log10", fp32, "at::log10", "", "", [](In& in) { return at::log10(in({4})); }},
      {"log1p", fp32, "at::log1p", "", "", [](In& in) { return at::log1p(in({4})); }},
      {"log2", fp32, "at::log2", "", "", [](In& in) { return at::log2(in({4})); }},
      {"margin_ranking_loss", fp32, "at::margin_ranking_loss", "margin_ranking_loss", "", [](In& in) { return at::margin_ranking_loss(in({4}), in({4}), in.ones({4})); }},
      {"mse_loss", fp32, "at::mse_loss", "mse_loss", "", [](In& in) { return at::mse_loss(in({2, 4}), in({2, 4})); }},
      {"multilabel_margin_loss", fp32, "at::multilabel_margin_loss", "multilabel_margin_loss", "", [](In& in) { return at::multilabel_margin_loss(in({2, 4}), in.longs({0, 1, -1, 0, 2, -1, 0, 0}, {2, 4})); }},
      {"multi_margin_loss", fp32, "at::multi_margin_loss", "multi_margin_loss", "", [](In& in) { return at::multi_margin_loss(in({2, 4}), in.longs({0, 3}, {2})); }},
      {"nll_loss", fp32, "at::nll_loss", "nll_loss", "", [](In& in) { return at::nll_loss(in({2, 4}), in.longs({0, 3}, {2})); }},
      {"norm", fp32, "at::norm", "", "", [](In& in) { return at::norm(in({4})); }},
      {"normalize", fp32, "F::normalize", "", "C++ F::normalize is x / norm(x) (aten::norm)", [](In& in) { return F::normalize(in({2, 4}), F::NormalizeFuncOptions().dim(1)); }},
      {"pdist", fp32, "at::pdist", "", "", [](In& in) { return at::pdist(in({3, 4})); }},
      {"poisson_nll_loss", fp32, "at::poisson_nll_loss", "poisson_nll_loss", "", [](In& in) { return at::poisson_nll_loss(in({2, 4}), in({2, 4}), true, false, 1e-8, at::Reduction::Mean); }},
      {"pow", fp32, "at::pow(x, y)", "", "", [](In& in) { return at::pow(in({4}), in({4})); }},
      {"prod", fp32, "at::prod", "prod", "", [](In& in) { return at::prod(in({4})); }},
      {"reciprocal", fp32, "at::reciprocal", "", "", [](In& in) { return at::reciprocal(in({4})); }},
      {"rsqrt", fp32, "at::rsqrt", "", "", [](In& in) { return at::rsqrt(in({4})); }},
      {"sinh", fp32, "at::sinh", "", "", [](In& in) { return at::sinh(in({4})); }},
      {"smooth_l1_loss", fp32, "at::smooth_l1_loss", "smooth_l1_loss", "", [](In& in) { return at::smooth_l1_loss(in({2, 4}), in({2, 4})); }},
      {"soft_margin_loss", fp32, "at::soft_margin_loss", "soft_margin_loss", "", [](In& in) { return at::soft_margin_loss(in({2, 4}), in.ones({2, 4})); }},
      {"softmax", fp32, "at::softmax", "", "", [](In& in) { return at::softmax(in({2, 4}), 1); }},
      {"softmin", fp32, "F::softmin", "", "C++ F::softmin is softmax(-x)", [](In& in) { return F::softmin(in({2, 4}), F::SoftminFuncOptions(1)); }},
      {"softplus", fp32, "at::softplus", "", "", [](In& in) { return at::softplus(in({4})); }},
      {"sum", fp32, "at::sum", "", "", [](In& in) { return at::sum(in({4})); }},
      {"renorm", fp32, "at::renorm", "", "", [](In& in) { return at::renorm(in({2, 4}), 2, 0, 1.0); }},
      {"tan", fp32, "at::tan", "", "", [](In& in) { return at::tan(in({4})); }},
      {"triplet_margin_loss", fp32, "at::triplet_margin_loss", "triplet_margin_loss", "", [](In& in) { return at::triplet_margin_loss(in({2, 4}), in({2, 4}), in({2, 4})); }},
      // Operations that promote to the widest input type.
      {"addcdiv", widest, "at::addcdiv", "", "", [](In& in) { return at::addcdiv(in({4}), in({4}), in({4})); }},
      {"addcmul", widest, "at::addcmul", "", "", [](In& in) { return at::addcmul(in({4}), in({4}), in({4})); }},
      {"atan2", widest, "at::atan2", "", "", [](In& in) { return at::atan2(in({4}), in({4})); }},
      {"bilinear", widest, "at::bilinear", "", "", [](In& in) { return at::bilinear(in({2, 3}), in({2, 3}), in({5, 3, 3}), {}); }},
      {"cross", widest, "at::cross", "", "", [](In& in) { return at::cross(in({3}), in({3}), 0); }},
      {"dot", widest, "at::dot", "", "", [](In& in) { return at::dot(in({4}), in({4})); }},
      {"grid_sample", widest, "at::grid_sampler (F::grid_sample's op)", "grid_sampler", "", [](In& in) { return at::grid_sampler(in({1, 1, 4, 4}), in({1, 2, 2, 2}), 0, 0, false); }},
      {"index_put", widest, "at::index_put", "", "", [](In& in) {
         const auto self = in({4});
         c10::List<std::optional<at::Tensor>> indices;
         indices.push_back(in.longs({0, 2}, {2}));
         return at::index_put(self, indices, in({2}));
       }},
      {"scatter_add", widest, "at::scatter_add", "", "", [](In& in) { const auto self = in({4}); return at::scatter_add(self, 0, in.longs({0, 1, 2, 3}, {4}), in({4})); }},
      {"tensordot", widest, "at::tensordot", "", "", [](In& in) { return at::tensordot(in({4}), in({4}), {0}, {0}); }},
  };
}

/// Swallows libtorch warnings (chain_matmul's deprecation) while the table is measured.
struct SilentWarnings : c10::WarningHandler {
  void process(const c10::Warning& /*warning*/) override {}
};

std::string output_dtype(const OpProbe& probe, const c10::Device& device, c10::ScalarType autocast_dtype,
                         c10::ScalarType first, c10::ScalarType rest) {
  ProbeInputs inputs{first, rest, device};
  try {
    speedlabs::AutocastGuard autocast(device.type(), autocast_dtype);
    return dtype_name(probe.run(inputs).scalar_type());
  } catch (const c10::Error&) {
    return "error";  // e.g. no kernel for the low-precision dtype, or mixed dtypes rejected
  }
}

}  // namespace

std::vector<PolicyRow> measure_policy(const c10::Device& device, c10::ScalarType dtype) {
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard warnings(&silent);
  torch::NoGradGuard no_grad;
  const std::string low = dtype_name(dtype);
  std::vector<PolicyRow> rows;
  for (const auto& probe : chapter_probes()) {
    PolicyRow row;
    row.op = probe.op;
    row.call = probe.call;
    row.chapter_policy = probe.chapter_policy;
    row.note = probe.note;
    row.fp32_in = output_dtype(probe, device, dtype, c10::kFloat, c10::kFloat);
    row.low_in = output_dtype(probe, device, dtype, dtype, dtype);
    const bool probe_mixed = probe.chapter_policy == "widest";
    if (probe_mixed) row.mixed_in = output_dtype(probe, device, dtype, c10::kFloat, dtype);
    // The classification uses only what came out. An error with low inputs means autocast left them low.
    if (row.fp32_in == low) {
      row.measured_policy = "lower";
    } else if (row.low_in == "float32") {
      row.measured_policy = "float32";
    } else if (probe_mixed && row.mixed_in == "float32" && row.low_in != "float32") {
      row.measured_policy = "widest";
    } else {
      row.measured_policy = "inputs";
    }
    row.cpu_rule = probe.cpu_rule;
    row.cpu_policy = cpu_lists::policy_of(probe.cpu_rule);
    row.matches_chapter = row.measured_policy == row.chapter_policy;
    // Without a CPU promote rule, how mixed inputs come out is the op's own type promotion (or an error), not
    // autocast, so only the uniform probes are held against the lists.
    const std::string uniform_policy = row.measured_policy == "widest" ? "inputs" : row.measured_policy;
    row.matches_cpu_lists =
        row.cpu_policy == "widest" ? row.measured_policy == "widest" : uniform_policy == row.cpu_policy;
    rows.push_back(std::move(row));
  }
  return rows;
}

void print_policy_table(const std::vector<PolicyRow>& rows, const c10::Device& device, c10::ScalarType dtype) {
  const bool cpu = device.is_cpu();
  std::cout << "\nAutocast policy measured on " << device.str() << " with dtype " << dtype_name(dtype)
            << " (inputs: all float32 / all " << dtype_name(dtype) << " / first float32, rest "
            << dtype_name(dtype) << ")\n";
  std::cout << std::left << std::setw(34) << "op" << std::setw(9) << "chapter" << std::setw(10) << "fp32 in"
            << std::setw(10) << "low in" << std::setw(10) << "mixed in" << std::setw(10) << "measured"
            << std::setw(6) << "=ch?";
  if (cpu) std::cout << std::setw(45) << "libtorch CPU rule -> policy" << "=lib?";
  std::cout << "\n" << std::string(cpu ? 139 : 89, '-') << "\n";
  const auto short_name = [](const std::string& d) {
    if (d == "float32") return std::string("fp32");
    if (d == "bfloat16") return std::string("bf16");
    if (d == "float16") return std::string("fp16");
    return d;
  };
  for (const auto& r : rows) {
    std::cout << std::left << std::setw(34) << r.op << std::setw(9) << r.chapter_policy << std::setw(10)
              << short_name(r.fp32_in) << std::setw(10) << short_name(r.low_in) << std::setw(10)
              << (r.mixed_in.empty() ? "-" : short_name(r.mixed_in)) << std::setw(10) << r.measured_policy
              << std::setw(6) << (r.matches_chapter ? "yes" : "NO");
    if (cpu) {
      std::cout << std::setw(45) << ((r.cpu_rule.empty() ? "none" : r.cpu_rule) + " -> " + r.cpu_policy)
                << (r.matches_cpu_lists ? "yes" : "NO");
    }
    std::cout << "\n";
  }
  std::cout << "lower: fp32 inputs come out low; float32: low inputs come out float32; widest: mixed inputs come "
               "out float32; inputs: autocast left the dtype alone.\n";
}

nlohmann::json policy_rows_to_json(const std::vector<PolicyRow>& rows) {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& r : rows) {
    table.push_back({{"op", r.op}, {"call", r.call}, {"chapter", r.chapter_policy}, {"fp32_in", r.fp32_in},
                     {"low_in", r.low_in}, {"mixed_in", r.mixed_in}, {"measured", r.measured_policy},
                     {"cpu_rule", r.cpu_rule}, {"cpu_policy", r.cpu_policy}, {"note", r.note}});
  }
  return table;
}

}  // namespace lab03
