// Lab 14 graded tests (./lab check 14): the column- and row-parallel linear layers and the 1F1B order of
// exercise.h. Suite Lab14_<function> grades that function: the layers as two workers in one process (each
// worker's all-reduce given the other's buffer), against one linear layer on the whole weight; the schedule
// against its rules (tests/lab14/test_model_parallel.cpp trains through it with MPI workers).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/build_paths.h"
#include "common/errors.h"
#include "exercise.h"
#include "experiment.h"
#include "tests/support/data.h"
#include "tests/support/expect.h"
#include "tests/support/mpi_jobs.h"
#include "tests/support/one_process_communicator.h"

namespace {

using lab14::PipeOp;
using speedlabs::testing::tensors_close;

// Two workers in one process. Pass 1 (peer == nullptr) records what each all-reduce was given and leaves it;
// pass 2 adds the peer's recorded buffer of the same call: the sum two workers would get.
class PairCommunicator : public speedlabs::testing::OneProcessCommunicator {
 public:
  explicit PairCommunicator(int rank, const std::vector<torch::Tensor>* peer = nullptr)
      : OneProcessCommunicator(rank, 2, "tensor parallelism here"), peer_(peer) {}
  int start_allreduce_sum(const torch::Tensor& flat) override {
    if (!flat.is_contiguous()) throw std::logic_error("an all-reduce needs a contiguous buffer");
    if (peer_ == nullptr) {
      recorded.push_back(flat.clone());
    } else {
      if (calls_ >= peer_->size()) throw std::logic_error("more all-reduces than the other worker made");
      flat.add_((*peer_)[calls_].view(flat.sizes()));
    }
    ++calls_;
    count_ring_bytes(flat.numel() * 4, 2);
    return 0;
  }
  void wait(int) override {}
  size_t calls() const { return calls_; }
  std::vector<torch::Tensor> recorded;

 private:
  const std::vector<torch::Tensor>* peer_;
  size_t calls_ = 0;
};

// The whole layer: x (2, 3, 4) -> y (2, 3, 6), its gradients from autograd with a fixed dL/dy.
struct Whole {
  torch::Tensor x, w, b, grad_y, y, grad_x, grad_w, grad_b;
};
Whole whole_layer() {
  torch::manual_seed(14);
  Whole s;
  s.x = torch::randn({2, 3, 4}).requires_grad_();
  s.w = torch::randn({6, 4}).requires_grad_();
  s.b = torch::randn({6}).requires_grad_();
  s.grad_y = torch::randn({2, 3, 6});
  s.y = torch::nn::functional::linear(s.x, s.w, s.b);
  s.y.backward(s.grad_y);
  s.grad_x = s.x.grad().clone();
  s.grad_w = s.w.grad().clone();
  s.grad_b = s.b.grad().clone();
  return s;
}

TEST(Lab14_column_parallel_forward, EachWorkerComputesItsOutputColumnsWithoutAMessage) {
  const Whole s = whole_layer();
  torch::NoGradGuard no_grad;
  for (int r = 0; r < 2; ++r) {
    const auto y = lab14::column_parallel_forward(s.x, s.w.narrow(0, 3 * r, 3), s.b.narrow(0, 3 * r, 3));
    EXPECT_TRUE(tensors_close(y, s.y.detach().narrow(2, 3 * r, 3), 1e-6, 1e-5,
                              "worker " + std::to_string(r) + "'s columns of y = x W^T + b"));
  }
}

TEST(Lab14_column_parallel_backward, SumsDxOverTheWorkersAndKeepsTheShardsGradients) {
  const Whole s = whole_layer();
  torch::NoGradGuard no_grad;
  PairCommunicator first0(0), first1(1);
  const auto shard = [&](const torch::Tensor& t, int r) { return t.narrow(0, 3 * r, 3); };
  const auto grad_y = [&](int r) { return s.grad_y.narrow(2, 3 * r, 3); };
  lab14::column_parallel_backward(s.x, shard(s.w, 0), grad_y(0), first0);
  lab14::column_parallel_backward(s.x, shard(s.w, 1), grad_y(1), first1);
  ASSERT_EQ(first0.calls(), 1u) << "the backward of a column-parallel layer makes exactly one all-reduce (dL/dx)";
  for (int r = 0; r < 2; ++r) {
    PairCommunicator comm(r, r == 0 ? &first1.recorded : &first0.recorded);
    const auto g = lab14::column_parallel_backward(s.x, shard(s.w, r), grad_y(r), comm);
    EXPECT_TRUE(
        tensors_close(g.input, s.grad_x, 1e-5, 1e-5, "dL/dx after the all-reduce, worker " + std::to_string(r)));
    EXPECT_TRUE(tensors_close(g.weight, shard(s.grad_w, r), 1e-5, 1e-5, "the weight shard's gradient"));
    EXPECT_TRUE(tensors_close(g.bias, shard(s.grad_b, r), 1e-5, 1e-5, "the bias shard's gradient"));
  }
}

TEST(Lab14_row_parallel_forward, SumsThePartialOutputsAndAddsTheBiasOnce) {
  const Whole s = whole_layer();
  torch::NoGradGuard no_grad;
  const auto x_shard = [&](int r) { return s.x.narrow(2, 2 * r, 2); };
  const auto w_shard = [&](int r) { return s.w.narrow(1, 2 * r, 2); };
  PairCommunicator first0(0), first1(1);
  lab14::row_parallel_forward(x_shard(0), w_shard(0), s.b, first0);
  lab14::row_parallel_forward(x_shard(1), w_shard(1), s.b, first1);
  ASSERT_EQ(first1.calls(), 1u) << "the forward of a row-parallel layer makes exactly one all-reduce (y)";
  for (int r = 0; r < 2; ++r) {
    PairCommunicator comm(r, r == 0 ? &first1.recorded : &first0.recorded);
    const auto y = lab14::row_parallel_forward(x_shard(r), w_shard(r), s.b, comm);
    EXPECT_TRUE(tensors_close(y, s.y.detach(), 1e-5, 1e-5,
                              "y on worker " + std::to_string(r) + " (a bias added before the sum counts twice)"));
  }
}

TEST(Lab14_row_parallel_backward, NeedsNoMessageAndGivesEachWorkerItsColumns) {
  const Whole s = whole_layer();
  torch::NoGradGuard no_grad;
  for (int r = 0; r < 2; ++r) {
    const auto g = lab14::row_parallel_backward(s.x.narrow(2, 2 * r, 2), s.w.narrow(1, 2 * r, 2), s.grad_y);
    EXPECT_TRUE(tensors_close(g.input, s.grad_x.narrow(2, 2 * r, 2), 1e-5, 1e-5, "dL/dx_r"));
    EXPECT_TRUE(tensors_close(g.weight, s.grad_w.narrow(1, 2 * r, 2), 1e-5, 1e-5, "the weight columns' gradient"));
    EXPECT_TRUE(tensors_close(g.bias, s.grad_b, 1e-5, 1e-5, "the whole bias's gradient"));
  }
}

std::string show(const std::vector<PipeOp>& ops) {
  std::string out;
  for (const auto& op : ops) out += (op.kind == PipeOp::forward ? "F" : "B") + std::to_string(op.micro_batch) + " ";
  return out;
}

TEST(Lab14_one_f_one_b_schedule, WarmsUpThenAlternatesThenDrains) {
  using K = PipeOp;
  const std::vector<PipeOp> stage0 = {{K::forward, 0},  {K::forward, 1}, {K::backward, 0}, {K::forward, 2},
                                      {K::backward, 1}, {K::forward, 3}, {K::backward, 2}, {K::backward, 3}};
  EXPECT_EQ(lab14::one_f_one_b_schedule(0, 2, 4), stage0) << show(lab14::one_f_one_b_schedule(0, 2, 4));
  const std::vector<PipeOp> last = {{K::forward, 0}, {K::backward, 0}, {K::forward, 1}, {K::backward, 1}};
  EXPECT_EQ(lab14::one_f_one_b_schedule(3, 4, 2), last) << "the last stage starts a backward after every forward";
  const std::vector<PipeOp> short_pipe = {{K::forward, 0}, {K::backward, 0}};
  EXPECT_EQ(lab14::one_f_one_b_schedule(0, 4, 1), short_pipe) << "warm-up is at most M forwards";
}

TEST(Lab14_one_f_one_b_schedule, HoldsAtMostTheStagesAfterItInFlight) {
  for (int stages : {2, 3, 4}) {
    for (int m : {1, 2, 5, 8}) {
      for (int stage = 0; stage < stages; ++stage) {
        const auto ops = lab14::one_f_one_b_schedule(stage, stages, m);
        ASSERT_EQ(ops.size(), static_cast<size_t>(2 * m)) << show(ops);
        int held = 0, most = 0, next_f = 0, next_b = 0;
        for (const auto& op : ops) {
          if (op.kind == PipeOp::forward) {
            EXPECT_EQ(op.micro_batch, next_f++) << "forwards in order: " << show(ops);
            ++held;
          } else {
            EXPECT_EQ(op.micro_batch, next_b++) << "backwards in order: " << show(ops);
            EXPECT_LT(op.micro_batch, next_f) << "a backward after its forward: " << show(ops);
            --held;
          }
          most = std::max(most, held);
        }
        EXPECT_EQ(most, std::min(stages - stage, m)) << "stage " << stage << " of " << stages << ", M " << m;
      }
    }
  }
  EXPECT_THROW(lab14::one_f_one_b_schedule(2, 2, 4), speedlabs::UsageError) << "stage 2 of 2";
  EXPECT_THROW(lab14::one_f_one_b_schedule(0, 2, 0), speedlabs::UsageError) << "no micro-batch";
}

}  // namespace
