// Lab 11, checked outside the student's process (tests/support/checked.h): the shard every worker owns, for
// buffer sizes and worker counts the grader's seed draws, and three AdamW steps on a drawn shard.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/errors.h"
#include "exercise.h"
#include "tests/support/checked.h"
#include "tests/support/one_process_communicator.h"
#include "zero.h"

namespace speedlabs::checked {

namespace {

// Rank r of N workers in one process: an all-gather records the slice this worker sent and fills every other
// worker's slice with values drawn from the grader's seed.
class DrawnGather : public speedlabs::testing::OneProcessCommunicator {
 public:
  DrawnGather(int rank, int size, at::Generator& generator)
      : OneProcessCommunicator(rank, size, "a gather"), generator_(generator) {}
  void wait(int) override {}
  void all_gather_into(const torch::Tensor& full) override {
    const int64_t slice = full.numel() / size();
    sent.push_back(full.narrow(0, rank() * slice, slice).clone());
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) full.narrow(0, r * slice, slice).copy_(torch::randn({slice}, generator_, torch::kFloat));
    }
  }
  std::vector<torch::Tensor> sent;  ///< this worker's slice at each all-gather

 private:
  at::Generator& generator_;
};

// A stage-3 unit at rest, as the lab's make_units leaves it: 1 to 6 parameters of 1 to 50 elements, views of a
// full buffer padded for 2 to 8 workers, without its bytes; this worker's shard (drawn values) in a tensor of
// its own. Its range is computed here, not by the student's shard_range.
lab11::FlatUnit unit_at_rest(at::Generator& generator, int rank, int workers) {
  lab11::FlatUnit unit;
  int64_t numel = 0;
  for (int64_t count = draw_int(generator, 1, 6); count > 0; --count) {
    unit.params.push_back(torch::zeros({draw_int(generator, 1, 50)}).requires_grad_());
    unit.offsets.push_back(numel);
    numel += unit.params.back().numel();
  }
  const int64_t shard_size = (numel + workers - 1) / workers;
  unit.range = {numel, shard_size * workers, shard_size, rank * shard_size,
                std::max(rank * shard_size, std::min((rank + 1) * shard_size, numel))};
  unit.rank = rank;
  unit.full = torch::zeros({unit.range.padded});
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < unit.params.size(); ++i) {
      unit.params[i].set_data(unit.full.narrow(0, unit.offsets[i], unit.params[i].numel()));
    }
  }
  unit.shard = torch::randn({shard_size}, generator, torch::kFloat);
  lab11::release_full_storage(unit.full);
  return unit;
}

// A unit at rest on rank r of N workers (both drawn: N in 2..8) and their communicator.
struct DrawnUnit {
  explicit DrawnUnit(at::Generator& generator) : DrawnUnit(generator, static_cast<int>(draw_int(generator, 2, 8))) {}
  DrawnUnit(at::Generator& generator, int workers)
      : DrawnUnit(generator, static_cast<int>(draw_int(generator, 0, workers - 1)), workers) {}
  DrawnUnit(at::Generator& generator, int rank, int workers)
      : comm(rank, workers, generator), unit(unit_at_rest(generator, rank, workers)) {}
  DrawnGather comm;
  lab11::FlatUnit unit;
};

torch::Tensor longs(const std::vector<int64_t>& values) { return torch::tensor(values, torch::kLong); }

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"shard_range",
       [](at::Generator& generator) {
         // (numel, padded, shard_size, begin, end) of every rank, for sizes below, at and above the workers.
         std::vector<int64_t> fields;
         for (int drawn = 0; drawn < 200; ++drawn) {
           const int workers = static_cast<int>(draw_int(generator, 1, 16));
           const int64_t numel = draw_int(generator, 0, 3) == 0 ? draw_int(generator, 0, 2 * workers)
                                                                : draw_int(generator, 0, int64_t{1} << 40);
           for (int rank = 0; rank < workers; ++rank) {
             const auto range = lab11::shard_range(numel, rank, workers);
             fields.insert(fields.end(), {range.numel, range.padded, range.shard_size, range.begin, range.end});
           }
         }
         return Outputs{{"ranges", torch::tensor(fields, torch::kLong).view({-1, 5})}};
       },
       Tolerance{}},  // whole numbers: exactly
      {"sharded_adamw_step",
       [](at::Generator& generator) {
         // One shard of 1 to 4096 elements, three steps with fresh gradients; settings drawn around the lab's.
         const int64_t numel = draw_int(generator, 1, 4096);
         const torch::Tensor param = torch::randn({numel}, generator, torch::kFloat);
         lab11::AdamWSettings settings;
         settings.lr = std::ldexp(1.0, -static_cast<int>(draw_int(generator, 4, 12)));
         settings.weight_decay = draw_int(generator, 0, 1) ? 0.1 : 0.0;
         settings.beta2 = draw_int(generator, 0, 1) ? 0.95 : 0.999;
         lab11::AdamWShard state;
         for (int step = 0; step < 3; ++step) {
           lab11::sharded_adamw_step(param, torch::randn({numel}, generator, torch::kFloat), state, settings);
         }
         return Outputs{{"param", param},
                        {"exp_avg", state.exp_avg.defined() ? state.exp_avg : torch::zeros({0})},
                        {"exp_avg_sq", state.exp_avg_sq.defined() ? state.exp_avg_sq : torch::zeros({0})},
                        {"step", torch::tensor({state.step}, torch::kLong)}};
       },
       // AdamW's float32 formula in two op orders: each within a few roundings (1e-7 relative) of the exact value;
       // an element moves by about lr (2^-12 or more) a step, so 1e-5 relative and 1e-7 absolute leave room and
       // still catch a missing bias correction, a coupled decay or a lost step (as lab 06's check of AdamW).
       Tolerance{1e-5, 1e-7}},
      {"gather_full_parameters",
       [](at::Generator& generator) {
         DrawnUnit drawn(generator);
         auto& [comm, unit] = drawn;
         lab11::gather_full_parameters(unit, comm);
         return Outputs{{"has_bytes", longs({lab11::has_full_storage(unit.full) ? 1 : 0})},
                        {"sent", comm.sent.empty() ? torch::zeros({0}) : torch::cat(comm.sent)},
                        {"params", lab11::has_full_storage(unit.full) ? joined(unit.params) : torch::zeros({0})}};
       },
       Tolerance{}},  // copies: exactly
      {"free_full_parameters",
       [](at::Generator& generator) {
         DrawnUnit drawn(generator);
         auto& [comm, unit] = drawn;
         const torch::Tensor shard = unit.shard.clone();
         // Gathered here, not by the student's gather_full_parameters: this grades the release alone.
         lab11::allocate_full_storage(unit.full);
         unit.full.narrow(0, unit.range.begin, unit.range.shard_size).copy_(unit.shard);
         comm.all_gather_into(unit.full);
         lab11::free_full_parameters(unit);
         std::vector<int64_t> numels;  // the parameters keep their shapes
         for (const auto& p : unit.params) numels.push_back(p.numel());
         return Outputs{{"has_bytes", longs({lab11::has_full_storage(unit.full) ? 1 : 0})},
                        {"full_numel", longs({unit.full.numel()})},
                        {"param_numels", longs(numels)},
                        {"shard_kept", longs({unit.shard.defined() && unit.shard.equal(shard) ? 1 : 0})}};
       },
       Tolerance{}},  // counts: exactly
  };
}

}  // namespace speedlabs::checked
