#include "probes.h"

#include <torch/torch.h>

#include <tuple>

namespace lab03 {

namespace {

namespace F = torch::nn::functional;
using In = ProbeInputs;
const std::string lower = "lower", fp32 = "float32", widest = "widest";

/// Operations eligible for low precision.
void add_lower_precision_probes(std::vector<OpProbe>& out) {
  const auto first = [](const std::tuple<torch::Tensor, torch::Tensor>& t) { return std::get<0>(t); };
  out.push_back({"__matmul__", lower, "at::matmul", "matmul", "Python's a @ b is aten::matmul", [](In& in) {
                   return at::matmul(in({4, 4}), in({4, 4}));
                 }});
  out.push_back({"addbmm", lower, "at::addbmm", "addbmm", "", [](In& in) {
                   return at::addbmm(in({4, 4}), in({2, 4, 4}), in({2, 4, 4}));
                 }});
  out.push_back({"addmm", lower, "at::addmm", "addmm", "", [](In& in) {
                   return at::addmm(in({4, 4}), in({4, 4}), in({4, 4}));
                 }});
  out.push_back({"addmv", lower, "at::addmv", "", "", [](In& in) { return at::addmv(in({4}), in({4, 4}), in({4})); }});
  out.push_back({"addr", lower, "at::addr", "", "", [](In& in) { return at::addr(in({4, 4}), in({4}), in({4})); }});
  out.push_back({"baddbmm", lower, "at::baddbmm", "baddbmm", "", [](In& in) {
                   return at::baddbmm(in({2, 4, 4}), in({2, 4, 4}), in({2, 4, 4}));
                 }});
  out.push_back({"bmm", lower, "at::bmm", "bmm", "", [](In& in) { return at::bmm(in({2, 4, 4}), in({2, 4, 4})); }});
  out.push_back({"chain_matmul", lower, "at::chain_matmul", "mm", "composite: its products are aten::mm", [](In& in) {
                   return at::chain_matmul({in({4, 4}), in({4, 4}), in({4, 4})});
                 }});
  out.push_back({"multi_dot", lower, "at::linalg_multi_dot", "mm", "composite: its products are aten::mm", [](In& in) {
                   return at::linalg_multi_dot({in({4, 4}), in({4, 4}), in({4, 4})});
                 }});
  out.push_back({"conv1d", lower, "at::conv1d", "conv1d", "", [](In& in) {
                   return at::conv1d(in({1, 2, 8}), in({3, 2, 3}));
                 }});
  out.push_back({"conv2d", lower, "at::conv2d", "conv2d", "", [](In& in) {
                   return at::conv2d(in({1, 2, 6, 6}), in({3, 2, 3, 3}));
                 }});
  out.push_back({"conv3d", lower, "at::conv3d", "conv3d", "", [](In& in) {
                   return at::conv3d(in({1, 2, 4, 4, 4}), in({3, 2, 3, 3, 3}));
                 }});
  out.push_back({"conv_transpose1d", lower, "at::conv_transpose1d", "conv_transpose1d", "", [](In& in) {
                   return at::conv_transpose1d(in({1, 2, 8}), in({2, 3, 3}));
                 }});
  out.push_back({"conv_transpose2d", lower, "at::conv_transpose2d", "conv_transpose2d.input", "", [](In& in) {
                   return at::conv_transpose2d(in({1, 2, 6, 6}), in({2, 3, 3, 3}));
                 }});
  out.push_back({"conv_transpose3d", lower, "at::conv_transpose3d", "conv_transpose3d.input", "", [](In& in) {
                   return at::conv_transpose3d(in({1, 2, 4, 4, 4}), in({2, 3, 3, 3, 3}));
                 }});
  out.push_back({"GRUCell", lower, "at::gru_cell (torch::nn::GRUCell's op)", "",
                 "no CPU rule for the cell: its gates go through linear, but the new state mixes in the float32 h, so "
                 "type promotion gives float32",
                 [](In& in) {
                   return at::gru_cell(in({2, 4}), in({2, 3}), in({9, 4}), in({9, 3}));
                 }});
  out.push_back({"linear", lower, "at::linear", "linear", "", [](In& in) {
                   return at::linear(in({2, 4}), in({3, 4}));
                 }});
  out.push_back({"LSTMCell", lower, "at::lstm_cell (torch::nn::LSTMCell's op)", "",
                 "no CPU rule for the cell: its gates go through linear, but the new state mixes in the float32 c, so "
                 "type promotion gives float32",
                 [first](In& in) {
                   const auto x = in({2, 4});
                   const auto h = in({2, 3});
                   const auto c = in({2, 3});
                   return first(at::lstm_cell(x, {h, c}, in({12, 4}), in({12, 3})));
                 }});
  out.push_back({"matmul", lower, "at::matmul", "matmul", "", [](In& in) {
                   return at::matmul(in({4, 4}), in({4, 4}));
                 }});
  out.push_back({"mm", lower, "at::mm", "mm", "", [](In& in) { return at::mm(in({4, 4}), in({4, 4})); }});
  out.push_back({"mv", lower, "at::mv", "", "", [](In& in) { return at::mv(in({4, 4}), in({4})); }});
  out.push_back({"prelu", lower, "at::prelu", "prelu", "", [](In& in) { return at::prelu(in({4}), in({1})); }});
  out.push_back({"RNNCell", lower, "at::rnn_tanh_cell (torch::nn::RNNCell's op)", "linear",
                 "composite: tanh(linear(x) + linear(h))", [](In& in) {
                   return at::rnn_tanh_cell(in({2, 4}), in({2, 3}), in({3, 4}), in({3, 3}));
                 }});
}

/// Operations that autocast to float32, `__pow__` to `log2`.
void add_float32_probes_to_log2(std::vector<OpProbe>& out) {
  out.push_back({"__pow__", fp32, "at::pow(x, 2)", "", "Python's x ** 2 is pow.Tensor_Scalar",
                 [](In& in) { return at::pow(in({4}), 2); }});
  out.push_back({"__rdiv__", fp32, "x.reciprocal() * 2", "",
                 "Python's 2 / x is reciprocal()*2; C++'s 2.0 / x is fill_+div_, a different op",
                 [](In& in) { return in({4}).reciprocal() * 2; }});
  out.push_back({"__rpow__", fp32, "at::pow(2, x)", "", "Python's 2 ** x is pow.Scalar",
                 [](In& in) { return at::pow(2, in({4})); }});
  out.push_back({"__rtruediv__", fp32, "x.reciprocal() * 2", "", "same as __rdiv__ in Python 3",
                 [](In& in) { return in({4}).reciprocal() * 2; }});
  out.push_back({"acos", fp32, "at::acos", "", "", [](In& in) { return at::acos(in({4})); }});
  out.push_back({"asin", fp32, "at::asin", "", "", [](In& in) { return at::asin(in({4})); }});
  out.push_back({"binary_cross_entropy_with_logits", fp32, "at::binary_cross_entropy_with_logits",
                 "binary_cross_entropy_with_logits", "", [](In& in) {
                   return at::binary_cross_entropy_with_logits(in({2, 4}), in({2, 4}));
                 }});
  out.push_back({"cosh", fp32, "at::cosh", "", "", [](In& in) { return at::cosh(in({4})); }});
  out.push_back({"cosine_embedding_loss", fp32, "at::cosine_embedding_loss", "cosine_embedding_loss", "", [](In& in) {
                   return at::cosine_embedding_loss(in({2, 4}), in({2, 4}), in.ones({2}));
                 }});
  out.push_back({"cdist", fp32, "at::cdist", "cdist", "", [](In& in) { return at::cdist(in({3, 4}), in({3, 4})); }});
  out.push_back({"cosine_similarity", fp32, "at::cosine_similarity", "", "", [](In& in) {
                   return at::cosine_similarity(in({2, 4}), in({2, 4}));
                 }});
  out.push_back({"cross_entropy", fp32, "F::cross_entropy", "cross_entropy_loss",
                 "C++ F::cross_entropy calls aten::cross_entropy_loss", [](In& in) {
                   return F::cross_entropy(in({2, 4}), in.longs({0, 3}, {2}));
                 }});
  out.push_back({"cumprod", fp32, "at::cumprod", "", "", [](In& in) { return at::cumprod(in({4}), 0); }});
  out.push_back({"cumsum", fp32, "at::cumsum", "", "", [](In& in) { return at::cumsum(in({4}), 0); }});
  out.push_back({"dist", fp32, "at::dist", "", "", [](In& in) { return at::dist(in({4}), in({4})); }});
  out.push_back({"erfinv", fp32, "at::erfinv", "", "", [](In& in) { return at::erfinv(in({4})); }});
  out.push_back({"exp", fp32, "at::exp", "", "", [](In& in) { return at::exp(in({4})); }});
  out.push_back({"expm1", fp32, "at::expm1", "", "", [](In& in) { return at::expm1(in({4})); }});
  out.push_back({"group_norm", fp32, "at::group_norm", "", "", [](In& in) {
                   return at::group_norm(in({2, 4, 3}), 2);
                 }});
  out.push_back({"hinge_embedding_loss", fp32, "at::hinge_embedding_loss", "hinge_embedding_loss", "", [](In& in) {
                   return at::hinge_embedding_loss(in({2, 4}), in.ones({2, 4}));
                 }});
  out.push_back({"kl_div", fp32, "at::kl_div", "kl_div", "", [](In& in) {
                   return at::kl_div(in({2, 4}), in({2, 4}));
                 }});
  out.push_back({"l1_loss", fp32, "at::l1_loss", "l1_loss", "", [](In& in) {
                   return at::l1_loss(in({2, 4}), in({2, 4}));
                 }});
  out.push_back({"layer_norm", fp32, "at::layer_norm", "", "", [](In& in) { return at::layer_norm(in({2, 4}), {4}); }});
  out.push_back({"log", fp32, "at::log", "", "", [](In& in) { return at::log(in({4})); }});
  out.push_back({"log_softmax", fp32, "at::log_softmax", "", "", [](In& in) {
                   return at::log_softmax(in({2, 4}), 1);
                 }});
  out.push_back({"log10", fp32, "at::log10", "", "", [](In& in) { return at::log10(in({4})); }});
  out.push_back({"log1p", fp32, "at::log1p", "", "", [](In& in) { return at::log1p(in({4})); }});
  out.push_back({"log2", fp32, "at::log2", "", "", [](In& in) { return at::log2(in({4})); }});
}

/// Operations that autocast to float32, `margin_ranking_loss` to `triplet_margin_loss`.
void add_float32_probes_from_margin_ranking_loss(std::vector<OpProbe>& out) {
  out.push_back({"margin_ranking_loss", fp32, "at::margin_ranking_loss", "margin_ranking_loss", "",
                 [](In& in) { return at::margin_ranking_loss(in({4}), in({4}), in.ones({4})); }});
  out.push_back({"mse_loss", fp32, "at::mse_loss", "mse_loss", "", [](In& in) {
                   return at::mse_loss(in({2, 4}), in({2, 4}));
                 }});
  out.push_back(
      {"multilabel_margin_loss", fp32, "at::multilabel_margin_loss", "multilabel_margin_loss", "", [](In& in) {
         return at::multilabel_margin_loss(in({2, 4}), in.longs({0, 1, -1, 0, 2, -1, 0, 0}, {2, 4}));
       }});
  out.push_back({"multi_margin_loss", fp32, "at::multi_margin_loss", "multi_margin_loss", "", [](In& in) {
                   return at::multi_margin_loss(in({2, 4}), in.longs({0, 3}, {2}));
                 }});
  out.push_back({"nll_loss", fp32, "at::nll_loss", "nll_loss", "", [](In& in) {
                   return at::nll_loss(in({2, 4}), in.longs({0, 3}, {2}));
                 }});
  out.push_back({"norm", fp32, "at::norm", "", "", [](In& in) { return at::norm(in({4})); }});
  out.push_back({"normalize", fp32, "F::normalize", "", "C++ F::normalize is x / norm(x) (aten::norm)", [](In& in) {
                   return F::normalize(in({2, 4}), F::NormalizeFuncOptions().dim(1));
                 }});
  out.push_back({"pdist", fp32, "at::pdist", "", "", [](In& in) { return at::pdist(in({3, 4})); }});
  out.push_back({"poisson_nll_loss", fp32, "at::poisson_nll_loss", "poisson_nll_loss", "", [](In& in) {
                   return at::poisson_nll_loss(in({2, 4}), in({2, 4}), true, false, 1e-8, at::Reduction::Mean);
                 }});
  out.push_back({"pow", fp32, "at::pow(x, y)", "", "", [](In& in) { return at::pow(in({4}), in({4})); }});
  out.push_back({"prod", fp32, "at::prod", "prod", "", [](In& in) { return at::prod(in({4})); }});
  out.push_back({"reciprocal", fp32, "at::reciprocal", "", "", [](In& in) { return at::reciprocal(in({4})); }});
  out.push_back({"rsqrt", fp32, "at::rsqrt", "", "", [](In& in) { return at::rsqrt(in({4})); }});
  out.push_back({"sinh", fp32, "at::sinh", "", "", [](In& in) { return at::sinh(in({4})); }});
  out.push_back({"smooth_l1_loss", fp32, "at::smooth_l1_loss", "smooth_l1_loss", "", [](In& in) {
                   return at::smooth_l1_loss(in({2, 4}), in({2, 4}));
                 }});
  out.push_back({"soft_margin_loss", fp32, "at::soft_margin_loss", "soft_margin_loss", "", [](In& in) {
                   return at::soft_margin_loss(in({2, 4}), in.ones({2, 4}));
                 }});
  out.push_back({"softmax", fp32, "at::softmax", "", "", [](In& in) { return at::softmax(in({2, 4}), 1); }});
  out.push_back({"softmin", fp32, "F::softmin", "", "C++ F::softmin is softmax(-x)", [](In& in) {
                   return F::softmin(in({2, 4}), F::SoftminFuncOptions(1));
                 }});
  out.push_back({"softplus", fp32, "at::softplus", "", "", [](In& in) { return at::softplus(in({4})); }});
  out.push_back({"sum", fp32, "at::sum", "", "", [](In& in) { return at::sum(in({4})); }});
  out.push_back({"renorm", fp32, "at::renorm", "", "", [](In& in) { return at::renorm(in({2, 4}), 2, 0, 1.0); }});
  out.push_back({"tan", fp32, "at::tan", "", "", [](In& in) { return at::tan(in({4})); }});
  out.push_back({"triplet_margin_loss", fp32, "at::triplet_margin_loss", "triplet_margin_loss", "", [](In& in) {
                   return at::triplet_margin_loss(in({2, 4}), in({2, 4}), in({2, 4}));
                 }});
}

/// Operations that promote to the widest input type.
void add_widest_type_probes(std::vector<OpProbe>& out) {
  out.push_back(
      {"addcdiv", widest, "at::addcdiv", "", "", [](In& in) { return at::addcdiv(in({4}), in({4}), in({4})); }});
  out.push_back(
      {"addcmul", widest, "at::addcmul", "", "", [](In& in) { return at::addcmul(in({4}), in({4}), in({4})); }});
  out.push_back({"atan2", widest, "at::atan2", "", "", [](In& in) { return at::atan2(in({4}), in({4})); }});
  out.push_back({"bilinear", widest, "at::bilinear", "", "", [](In& in) {
                   return at::bilinear(in({2, 3}), in({2, 3}), in({5, 3, 3}), {});
                 }});
  out.push_back({"cross", widest, "at::cross", "", "", [](In& in) { return at::cross(in({3}), in({3}), 0); }});
  out.push_back({"dot", widest, "at::dot", "", "", [](In& in) { return at::dot(in({4}), in({4})); }});
  out.push_back({"grid_sample", widest, "at::grid_sampler (F::grid_sample's op)", "grid_sampler", "", [](In& in) {
                   return at::grid_sampler(in({1, 1, 4, 4}), in({1, 2, 2, 2}), 0, 0, false);
                 }});
  out.push_back({"index_put", widest, "at::index_put", "", "", [](In& in) {
                   const auto self = in({4});
                   c10::List<std::optional<at::Tensor>> indices;
                   indices.push_back(in.longs({0, 2}, {2}));
                   return at::index_put(self, indices, in({2}));
                 }});
  out.push_back({"scatter_add", widest, "at::scatter_add", "", "", [](In& in) {
                   const auto self = in({4});
                   return at::scatter_add(self, 0, in.longs({0, 1, 2, 3}, {4}), in({4}));
                 }});
  out.push_back(
      {"tensordot", widest, "at::tensordot", "", "", [](In& in) { return at::tensordot(in({4}), in({4}), {0}, {0}); }});
}

}  // namespace

std::vector<OpProbe> unlisted_probes() {
  const std::string none = "inputs";
  std::vector<OpProbe> out;
  out.push_back({"add", none, "at::add", "add.Tensor", "", [](In& in) { return at::add(in({4}), in({4})); }});
  out.push_back({"mul", none, "at::mul", "mul.Tensor", "", [](In& in) { return at::mul(in({4}), in({4})); }});
  out.push_back({"relu", none, "at::relu", "relu", "", [](In& in) { return at::relu(in({4})); }});
  out.push_back({"gelu", none, "at::gelu", "gelu", "", [](In& in) { return at::gelu(in({4})); }});
  out.push_back({"tanh", none, "at::tanh", "tanh", "", [](In& in) { return at::tanh(in({4})); }});
  out.push_back({"sigmoid", none, "at::sigmoid", "sigmoid", "", [](In& in) { return at::sigmoid(in({4})); }});
  out.push_back({"masked_fill", none, "at::masked_fill", "masked_fill.Scalar", "", [](In& in) {
                   const auto x = in({4});
                   return at::masked_fill(x, x > 0.5, 0.0);
                 }});
  return out;
}

std::vector<OpProbe> chapter_probes() {
  std::vector<OpProbe> probes;
  add_lower_precision_probes(probes);
  add_float32_probes_to_log2(probes);
  add_float32_probes_from_margin_ranking_loss(probes);
  add_widest_type_probes(probes);
  return probes;
}

}  // namespace lab03
