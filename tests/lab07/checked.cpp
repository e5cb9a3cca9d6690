// Lab 07, checked outside the student's process (tests/support/checked.h): the prefetching loader's batches,
// end, error and stop, on streams, capacities, failing batches and stopping points the grader's seed draws.
// Every output is what the contract fixes whatever the threads' timing; a loader that breaks it, or hangs
// (the exercise's budget ends it), gives other outputs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

// What one next() call gave: the batch's index (0, 1, ...), or one of these.
constexpr int64_t kEnded = -1;       // nullopt
constexpr int64_t kRethrown = -2;    // make_batch's own exception, its message intact
constexpr int64_t kOtherError = -3;  // any other exception

// The loader's time to fill its queue before the first next(): a bounded worker stops at its capacity (and one
// batch it holds), an unbounded one makes the whole stream of trivial batches long before.
constexpr auto kHeadStart = std::chrono::milliseconds(20);

// A stream of @p length batches (batch i holds i) whose make_batch throws at @p throw_at (-1: never), and what
// the worker did: the most batches it was ahead of the loop, and its calls after stop() had returned.
struct Stream {
  int64_t length = 0, throw_at = -1;
  std::atomic<int64_t> taken{0}, most_ahead{0}, calls_after_stop{0};
  std::atomic<bool> stopping{false};  // stop() is about to be called: each call now takes a while
  std::atomic<bool> stopped{false};   // stop() has returned

  lab07::MakeBatch make_batch() {
    return [this](int64_t index) -> std::optional<datasets::Batch> {
      if (stopped) ++calls_after_stop;
      // A worker that goes on after stop() then has calls left when stop() returns, where they are counted.
      if (stopping) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const int64_t ahead = index - taken.load();
      for (int64_t seen = most_ahead.load(); ahead > seen && !most_ahead.compare_exchange_weak(seen, ahead);) {
      }
      if (index == throw_at) throw std::runtime_error("batch " + std::to_string(index) + " failed");
      if (index >= length) return std::nullopt;
      return datasets::Batch{torch::full({1, 1}, index, torch::kLong), torch::full({1, 1}, index + 1, torch::kLong)};
    };
  }
};

// 0 to 40 batches; with @p may_fail, a failing batch one time in two (at the end of the stream at the latest).
std::unique_ptr<Stream> draw_stream(at::Generator& generator, bool may_fail) {
  auto stream = std::make_unique<Stream>();
  stream->length = draw_int(generator, 0, 40);
  if (may_fail && draw_int(generator, 0, 1) == 0) stream->throw_at = draw_int(generator, 0, stream->length);
  return stream;
}

// One next() call, as an outcome code.
int64_t take(lab07::PrefetchLoader& loader, Stream& stream) {
  try {
    const auto batch = loader.next();
    if (!batch) return kEnded;
    ++stream.taken;
    return batch->x.flatten()[0].item<int64_t>();
  } catch (const std::runtime_error& e) {
    return std::string(e.what()) == "batch " + std::to_string(stream.throw_at) + " failed" ? kRethrown : kOtherError;
  } catch (...) {
    return kOtherError;
  }
}

// Whether the worker kept within the bound: capacity queued, plus the one batch it may hold (plus one more
// the loop had taken but not yet counted when the worker looked).
Outputs with_bound(Outputs outputs, const Stream& stream, int64_t capacity) {
  outputs.emplace_back("worker_within_capacity",
                       torch::tensor(int64_t{stream.most_ahead.load() <= capacity + 2}, torch::kLong));
  return outputs;
}

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"PrefetchLoader_next",
       [](at::Generator& generator) {
         // A queue of 1 to 6; three calls past the end.
         const auto stream = draw_stream(generator, /*may_fail=*/true);
         const int64_t capacity = draw_int(generator, 1, 6);
         std::vector<int64_t> outcomes;
         {
           lab07::PrefetchLoader loader(stream->make_batch(), capacity);
           std::this_thread::sleep_for(kHeadStart);
           for (int64_t call = 0; call < stream->length + 3; ++call) outcomes.push_back(take(loader, *stream));
         }
         return with_bound({{"outcomes", torch::tensor(outcomes, torch::kLong)}}, *stream, capacity);
       },
       Tolerance{}},
      {"PrefetchLoader_stop",
       [](at::Generator& generator) {
         // The loop stops before the stream's last batch, often with the worker waiting for room in a full queue; then
         // next() gives nothing, a second stop() is harmless, and make_batch is never called again. No batch
         // fails here: whether next() after stop() rethrows an earlier failure is left open by the contract.
         const auto stream = draw_stream(generator, /*may_fail=*/false);
         const int64_t capacity = draw_int(generator, 1, 6),
                       stop_at = draw_int(generator, 0, std::max<int64_t>(0, stream->length - 1));
         std::vector<int64_t> outcomes;
         int64_t second_stop = 1;  // 1: returned, 0: threw
         {
           lab07::PrefetchLoader loader(stream->make_batch(), capacity);
           std::this_thread::sleep_for(kHeadStart);
           for (int64_t call = 0; call < stop_at; ++call) outcomes.push_back(take(loader, *stream));
           stream->stopping = true;
           loader.stop();
           stream->stopped = true;
           std::this_thread::sleep_for(kHeadStart);  // a worker still running would call make_batch meanwhile
           outcomes.push_back(take(loader, *stream));
           try {
             loader.stop();
           } catch (...) {
             second_stop = 0;
           }
         }
         return with_bound({{"outcomes", torch::tensor(outcomes, torch::kLong)},
                            {"calls_after_stop", torch::tensor(stream->calls_after_stop.load(), torch::kLong)},
                            {"second_stop_returned", torch::tensor(second_stop, torch::kLong)}},
                           *stream, capacity);
       },
       Tolerance{}},
  };
}

}  // namespace speedlabs::checked
