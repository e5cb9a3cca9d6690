// Lab 14, checked outside the student's process (tests/support/checked.h): the tensor-parallel linear layers of
// every worker, for worker counts, sizes and values the grader's seed draws, and the 1F1B order of every stage of
// pipelines whose depth and number of micro-batches it draws.
#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "exercise.h"
#include "tests/support/checked.h"
#include "tests/support/one_process_communicator.h"

namespace speedlabs::checked {

namespace {

// One of N workers in one process. Each rank's call runs twice: first recording what it all-reduces, then with
// each all-reduce given the other ranks' recorded buffers added: the sums N real workers would see.
class SimulatedRank : public speedlabs::testing::OneProcessCommunicator {
 public:
  using Sent = std::vector<std::vector<torch::Tensor>>;  // per rank, each all-reduce's buffer as it was sent

  SimulatedRank(int rank, int size, const Sent* others)
      : OneProcessCommunicator(rank, size, "tensor parallelism here"), others_(others) {}

  int start_allreduce_sum(const torch::Tensor& flat) override {
    if (others_ == nullptr) {
      sent.push_back(flat.clone());
    } else {
      for (int r = 0; r < size(); ++r) {
        const auto& theirs = (*others_)[r];
        if (r == rank()) continue;
        if (calls_ >= theirs.size() || theirs[calls_].numel() != flat.numel()) {
          throw speedlabs::RuntimeFailure("all-reduce " + std::to_string(calls_) + " of rank " +
                                          std::to_string(rank()) + " has no match on rank " + std::to_string(r));
        }
        flat.add_(theirs[calls_].view(flat.sizes()));
      }
    }
    return static_cast<int>(calls_++);
  }
  void wait(int) override {}  // the sum is complete when it starts

  std::vector<torch::Tensor> sent;  ///< the first run's all-reduce buffers

 private:
  const Sent* others_;
  size_t calls_ = 0;
};

// A linear layer (out, in) split over 2 to 4 workers, its input (B, T, in) and the gradient of its output.
struct Layer {
  int workers = 1;
  torch::Tensor x, weight, bias, grad_output;
  torch::Tensor rows_of(const torch::Tensor& t, int r) const { return t.chunk(workers, 0)[r]; }      // W_r, b_r
  torch::Tensor columns_of(const torch::Tensor& t, int r) const { return t.chunk(workers, -1)[r]; }  // x_r, W_r
};

Layer draw_layer(at::Generator& generator) {
  Layer layer;
  layer.workers = static_cast<int>(draw_int(generator, 2, 4));
  const int64_t out = layer.workers * draw_int(generator, 1, 8), in = layer.workers * draw_int(generator, 1, 8);
  const int64_t batch = draw_int(generator, 1, 3), seq = draw_int(generator, 1, 5);
  layer.x = torch::randn({batch, seq, in}, generator, torch::kFloat);
  layer.weight = torch::randn({out, in}, generator, torch::kFloat);
  layer.bias = torch::randn({out}, generator, torch::kFloat);
  layer.grad_output = torch::randn({batch, seq, out}, generator, torch::kFloat);
  return layer;
}

// Every rank's outputs, named rankR_...: @p call runs rank R's part of the layer with its communicator.
Outputs on_every_rank(const Layer& layer, const std::function<Outputs(int, SimulatedRank&)>& call) {
  SimulatedRank::Sent sent(layer.workers);
  for (int r = 0; r < layer.workers; ++r) {
    SimulatedRank recording(r, layer.workers, nullptr);
    call(r, recording);
    sent[r] = recording.sent;
  }
  Outputs all;
  for (int r = 0; r < layer.workers; ++r) {
    SimulatedRank summing(r, layer.workers, &sent);
    for (auto& [name, tensor] : call(r, summing)) all.emplace_back("rank" + std::to_string(r) + "_" + name, tensor);
  }
  return all;
}

Outputs grads(const lab14::LinearGrads& g) { return {{"input", g.input}, {"weight", g.weight}, {"bias", g.bias}}; }

// Each output is a float32 sum of at most 32 products of N(0, 1) values (plus the workers' partial sums), in
// whatever order the student's matmuls take: two orders differ by at most 32 x 2^-23 x the largest product (below
// 25 here), under 1e-4. A missing all-reduce, a bias added on every worker or a wrong shard is off by about 1.
constexpr Tolerance kMatmulOrders{1e-5, 1e-4};

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"column_parallel_forward",
       [](at::Generator& generator) {
         const Layer l = draw_layer(generator);
         return on_every_rank(l, [&](int r, SimulatedRank&) {
           return Outputs{{"y", lab14::column_parallel_forward(l.x, l.rows_of(l.weight, r), l.rows_of(l.bias, r))}};
         });
       },
       kMatmulOrders},
      {"column_parallel_backward",
       [](at::Generator& generator) {
         const Layer l = draw_layer(generator);
         return on_every_rank(l, [&](int r, SimulatedRank& comm) {
           return grads(lab14::column_parallel_backward(l.x, l.rows_of(l.weight, r),
                                                        l.columns_of(l.grad_output, r).contiguous(), comm));
         });
       },
       kMatmulOrders},
      {"row_parallel_forward",
       [](at::Generator& generator) {
         const Layer l = draw_layer(generator);
         return on_every_rank(l, [&](int r, SimulatedRank& comm) {
           return Outputs{{"y", lab14::row_parallel_forward(l.columns_of(l.x, r).contiguous(),
                                                            l.columns_of(l.weight, r).contiguous(), l.bias, comm)}};
         });
       },
       kMatmulOrders},
      {"row_parallel_backward",
       [](at::Generator& generator) {
         const Layer l = draw_layer(generator);
         return on_every_rank(l, [&](int r, SimulatedRank&) {
           return grads(lab14::row_parallel_backward(l.columns_of(l.x, r).contiguous(),
                                                     l.columns_of(l.weight, r).contiguous(), l.grad_output));
         });
       },
       kMatmulOrders},
      {"one_f_one_b_schedule",
       [](at::Generator& generator) {
         // Per pipeline, per stage, per operation: (pipeline, stage, backward 0|1, micro-batch). Fewer, as many
         // and more micro-batches than stages.
         std::vector<int64_t> rows;
         for (int64_t pipeline = 0; pipeline < 40; ++pipeline) {
           const int stages = static_cast<int>(draw_int(generator, 1, 8));
           const int micro_batches = static_cast<int>(draw_int(generator, 1, 2 * stages + 2));
           for (int stage = 0; stage < stages; ++stage)
             for (const auto& op : lab14::one_f_one_b_schedule(stage, stages, micro_batches))
               rows.insert(rows.end(), {pipeline, stage, op.kind == lab14::PipeOp::backward ? 1 : 0, op.micro_batch});
         }
         return Outputs{{"operations", torch::tensor(rows, torch::kLong).view({-1, 4})}};
       },
       Tolerance{}},  // an order: exactly
  };
}

}  // namespace speedlabs::checked
