#include "tensor_parallel.h"

#include <iostream>

#include "common/errors.h"
#include "common/host_memory.h"
#include "common/workers/harness.h"
#include "datasets/data_loader.h"
#include "optimizer.h"

namespace lab14 {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t pointer_of(Communicator& comm) { return reinterpret_cast<int64_t>(&comm); }
Communicator& communicator_of(AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}

struct ColumnParallelFn : torch::autograd::Function<ColumnParallelFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, int64_t comm) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["comm"] = comm;
    return column_parallel_forward(x, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    LinearGrads g = column_parallel_backward(saved[0], saved[1], grads[0], communicator_of(ctx));
    return {g.input, g.weight, g.bias, torch::Tensor()};
  }
};

struct RowParallelFn : torch::autograd::Function<RowParallelFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, int64_t comm) {
    ctx->save_for_backward({x, weight});
    return row_parallel_forward(x, weight, bias, *reinterpret_cast<Communicator*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    LinearGrads g = row_parallel_backward(saved[0], saved[1], grads[0]);
    return {g.input, g.weight, g.bias, torch::Tensor()};
  }
};

// A trainable copy of @p t (new memory, a leaf).
torch::Tensor leaf(const torch::Tensor& t) { return t.detach().clone().contiguous().requires_grad_(); }

// Rows [rank * rows, (rank + 1) * rows) of @p w.
torch::Tensor rows_of(const torch::Tensor& w, int rank, int workers) {
  const int64_t rows = w.size(0) / workers;
  return w.narrow(0, rank * rows, rows);
}

torch::Tensor block_forward(const TPBlock& b, torch::Tensor x, int64_t heads, Communicator& comm) {
  namespace F = torch::nn::functional;
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), local = b.proj_w.size(1);
  const auto ln = [&](const torch::Tensor& v, const torch::Tensor& w, const torch::Tensor& bias) {
    return torch::layer_norm(v, {C}, w, bias);
  };
  const auto qkv = column_parallel(ln(x, b.ln1_w, b.ln1_b), b.qkv_w, b.qkv_b, comm).split(local, 2);
  const int64_t head_size = C / heads, local_heads = local / head_size;
  const auto split_heads = [&](const torch::Tensor& t) {
    return t.view({B, T, local_heads, head_size}).transpose(1, 2);
  };
  const auto y = speedlabs::gpt::fused_causal_attention(split_heads(qkv[0]), split_heads(qkv[1]), split_heads(qkv[2]));
  x = x + row_parallel(y.transpose(1, 2).contiguous().view({B, T, local}), b.proj_w, b.proj_b, comm);
  const auto hidden = torch::gelu(column_parallel(ln(x, b.ln2_w, b.ln2_b), b.fc_w, b.fc_b, comm), "tanh");
  return x + row_parallel(hidden, b.out_w, b.out_b, comm);
}

}  // namespace

torch::Tensor column_parallel(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              Communicator& comm) {
  return ColumnParallelFn::apply(x, weight, bias, pointer_of(comm));
}

torch::Tensor row_parallel(const torch::Tensor& x_shard, const torch::Tensor& weight, const torch::Tensor& bias,
                           Communicator& comm) {
  return RowParallelFn::apply(x_shard, weight, bias, pointer_of(comm));
}

std::vector<torch::Tensor> TPModel::parameters() const {
  std::vector<torch::Tensor> out{wte, wpe, lnf_w, lnf_b};
  for (const TPBlock& b : blocks) {
    for (const auto& t :
         {b.ln1_w, b.ln1_b, b.qkv_w, b.qkv_b, b.proj_w, b.proj_b, b.ln2_w, b.ln2_b, b.fc_w, b.fc_b, b.out_w, b.out_b}) {
      out.push_back(t);
    }
  }
  return out;
}

int64_t split_elements_per_block(int64_t n_embd) { return 12 * n_embd * n_embd + 7 * n_embd; }

TPModel shard_model(speedlabs::gpt::GPT& model, int rank, int workers) {
  torch::NoGradGuard no_grad;
  TPModel out;
  out.workers = workers;
  out.n_head = model->config().n_head;
  if (out.n_head % workers != 0) {
    throw speedlabs::UsageError(std::to_string(workers) + " workers do not divide the " + std::to_string(out.n_head) +
                                " heads");
  }
  out.wte = leaf(model->wte->weight);
  out.wpe = leaf(model->wpe->weight);
  out.lnf_w = leaf(model->ln_f->weight);
  out.lnf_b = leaf(model->ln_f->bias);
  for (const auto& module : *model->h) {
    const auto& block = module->as<speedlabs::gpt::Block>();
    const auto& attn = block->attn;
    const int64_t C = attn->c_proj->weight.size(0);
    TPBlock b;
    b.ln1_w = leaf(block->ln_1->weight);
    b.ln1_b = leaf(block->ln_1->bias);
    b.ln2_w = leaf(block->ln_2->weight);
    b.ln2_b = leaf(block->ln_2->bias);
    // q, k and v are three stacked (C, C) blocks of c_attn: this worker's heads are the same rows of each.
    const auto qkv_w = attn->c_attn->weight.split(C, 0), qkv_b = attn->c_attn->bias.split(C, 0);
    b.qkv_w = leaf(torch::cat(
        {rows_of(qkv_w[0], rank, workers), rows_of(qkv_w[1], rank, workers), rows_of(qkv_w[2], rank, workers)}));
    b.qkv_b = leaf(torch::cat(
        {rows_of(qkv_b[0], rank, workers), rows_of(qkv_b[1], rank, workers), rows_of(qkv_b[2], rank, workers)}));
    b.proj_w = leaf(rows_of(attn->c_proj->weight.t(), rank, workers).t());
    b.proj_b = leaf(attn->c_proj->bias);
    b.fc_w = leaf(rows_of(block->mlp->c_fc->weight, rank, workers));
    b.fc_b = leaf(rows_of(block->mlp->c_fc->bias, rank, workers));
    b.out_w = leaf(rows_of(block->mlp->c_proj->weight.t(), rank, workers).t());
    b.out_b = leaf(block->mlp->c_proj->bias);
    out.blocks.push_back(std::move(b));
  }
  return out;
}

torch::Tensor tp_loss(const TPModel& model, const torch::Tensor& x, const torch::Tensor& y, Communicator& comm) {
  namespace F = torch::nn::functional;
  const int64_t T = x.size(1);
  auto h = F::embedding(x, model.wte) + F::embedding(torch::arange(T, x.options()), model.wpe);
  for (const TPBlock& b : model.blocks) h = block_forward(b, h, model.n_head, comm);
  h = torch::layer_norm(h, {h.size(-1)}, model.lnf_w, model.lnf_b);
  const auto logits = F::linear(h, model.wte);
  return F::cross_entropy(logits.view({-1, logits.size(-1)}), y.view({-1}));
}

nlohmann::json train_tensor_parallel(const Job& job, speedlabs::workers::Engine& engine) {
  auto& comm = engine.control;
  const auto tokens = shakespeare_bytes(job.data_dir);
  torch::manual_seed(job.seed);
  int64_t split_bytes = 0;
  TPModel model;
  {
    speedlabs::gpt::GPT whole(model_config(job));
    const int64_t before = speedlabs::host_memory_stats().live_bytes;
    model = shard_model(whole, comm.rank(), comm.size());
    const int64_t after = speedlabs::host_memory_stats().live_bytes;
    // The copies of the whole tensors, counted apart: what remains is the split matrices' slices.
    int64_t whole_bytes = 4 * (model.wte.numel() + model.wpe.numel() + model.lnf_w.numel() + model.lnf_b.numel());
    for (const TPBlock& b : model.blocks) {
      for (const auto& t : {b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b, b.proj_b, b.out_b}) whole_bytes += 4 * t.numel();
    }
    split_bytes = after - before - whole_bytes;
  }
  auto optimizer = make_optimizer(model.parameters(), job.lr);
  datasets::DataLoaderLite loader(tokens, job.batch, job.seq);
  std::vector<double> losses, sent;
  for (int step = 0; step < job.steps; ++step) {
    const auto batch = loader.next_batch();
    const int64_t before = engine.gradients.bytes_sent();
    const auto loss = tp_loss(model, batch.x, batch.y, engine.gradients);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    sent.push_back(static_cast<double>(engine.gradients.bytes_sent() - before));
    losses.push_back(loss.item<double>());
    if (comm.rank() == 0)
      std::cout << "  tp " << comm.size() << " workers  step " << step << " | loss " << losses.back() << std::endl;
  }
  return {{"losses", losses}, {"bytes_sent", sent}, {"split_bytes", split_bytes}, {"workers", comm.size()}};
}

}  // namespace lab14
