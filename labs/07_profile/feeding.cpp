#include "feeding.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "common/device.h"
#include "common/errors.h"
#include "common/process.h"
#include "common/timer.h"
#include "exercise.h"
#include "trace.h"

namespace lab07 {

namespace {

// Tiny shakespeare averages about 3.3 bytes per GPT-2 token; 8 leaves room for a window of long tokens.
constexpr int64_t kMaxBytesPerToken = 8;
constexpr uint64_t kModelSeed = 42;
// Steps of one way before switching to the other.
constexpr int kBlock = 4;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Identifies a batch's inputs: the ids weighted by their position, summed.
int64_t fingerprint(const torch::Tensor& x) {
  return (x.flatten() * torch::arange(1, x.numel() + 1, torch::kLong)).sum().item<int64_t>();
}

// Sets the intra-op threads for a scope and puts the old count back afterwards.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads) : previous_(at::get_num_threads()) { at::set_num_threads(threads); }
  ~ThreadsScope() { at::set_num_threads(previous_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int previous_;
};

// A fixed amount of arithmetic that no compiler can drop.
double spin() {
  constexpr int64_t kIterations = 20'000'000;  // ~20-40 ms on one core
  double sum = 0;
  for (int64_t i = 0; i < kIterations; ++i) sum += std::sqrt(static_cast<double>(i));
  return sum;
}

}  // namespace

double measure_free_cores() {
  std::vector<double> ratios;
  for (int attempt = 0; attempt < 3; ++attempt) {
    volatile double sink = 0;
    auto start = Clock::now();
    sink = sink + spin();
    const double one_ms = ms_since(start);
    start = Clock::now();
    std::thread other([&sink] { sink = sink + spin(); });
    sink = sink + spin();
    other.join();
    const double two_ms = ms_since(start);
    ratios.push_back(std::clamp(2 * one_ms / two_ms, 1.0, 2.0));
  }
  return speedlabs::summarize(ratios).median_ms;  // the median of the ratios (summarize is unit-free)
}

DocumentBatches::DocumentBatches(const datasets::GPT2Tokenizer& tokenizer, std::string text, int64_t batch,
                                 int64_t seq, int64_t doc_bytes, bool pin, uint64_t seed)
    : tokenizer_(tokenizer), text_(std::move(text)), batch_(batch), seq_(seq), doc_bytes_(doc_bytes), pin_(pin),
      seed_(seed) {
  if (doc_bytes_ > static_cast<int64_t>(text_.size())) {
    throw speedlabs::UsageError("a document of " + std::to_string(doc_bytes_) + " bytes is longer than the text (" +
                                std::to_string(text_.size()) + " bytes)");
  }
  if (doc_bytes_ < kMaxBytesPerToken * (seq_ + 1)) {
    throw speedlabs::UsageError("a document of " + std::to_string(doc_bytes_) + " bytes may hold fewer than T+1 = " +
                                std::to_string(seq_ + 1) + " tokens: give at least " +
                                std::to_string(kMaxBytesPerToken * (seq_ + 1)) + " bytes");
  }
}

datasets::Batch DocumentBatches::make(int64_t index) const {
  std::mt19937_64 rng(seed_ * 1'000'003 + static_cast<uint64_t>(index));
  auto x = torch::empty({batch_, seq_}, torch::kLong);
  auto y = torch::empty({batch_, seq_}, torch::kLong);
  auto xs = x.accessor<int64_t, 2>();
  auto ys = y.accessor<int64_t, 2>();
  const std::string_view text(text_);
  for (int64_t b = 0; b < batch_; ++b) {
    const auto offset = std::uniform_int_distribution<size_t>(0, text.size() - doc_bytes_)(rng);
    const std::vector<int32_t> ids = tokenizer_.encode(text.substr(offset, doc_bytes_));
    if (static_cast<int64_t>(ids.size()) < seq_ + 1) {
      throw speedlabs::RuntimeFailure("a document holds " + std::to_string(ids.size()) + " tokens, fewer than T+1");
    }
    const auto start = std::uniform_int_distribution<size_t>(0, ids.size() - seq_ - 1)(rng);
    for (int64_t t = 0; t < seq_; ++t) {
      xs[b][t] = ids[start + t];
      ys[b][t] = ids[start + t + 1];
    }
  }
  if (pin_) return {x.pin_memory(), y.pin_memory()};
  return {x, y};
}

FeedResult compare_loaders(const DocumentBatches& batches, const speedlabs::gpt::GPTConfig& model_config, double lr,
                           int warmup, int steps, int64_t prefetch, const c10::Device& device) {
  FeedResult result;
  result.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = device.is_cpu() ? std::max(1, std::min(at::get_num_threads(), result.cores - 1))
                                      : at::get_num_threads();
  ThreadsScope scope(threads);
  result.torch_threads = threads;

  const double free_before = measure_free_cores();
  torch::manual_seed(kModelSeed);
  speedlabs::gpt::GPT model(model_config);
  model->to(device);
  auto optimizer = speedlabs::gpt::make_adamw(model, lr);
  std::vector<torch::Tensor> losses;
  const auto train_on = [&](const datasets::Batch& batch) {
    // From pinned memory the copy is asynchronous: the host goes on while the device copies.
    const auto x = batch.x.to(device, /*non_blocking=*/true);
    const auto y = batch.y.to(device, /*non_blocking=*/true);
    losses.push_back(ranged_train_step(model, optimizer, x, y));
    speedlabs::synchronize(device);  // each step timed whole
  };

  int64_t next_index = 0;
  for (int i = 0; i < warmup; ++i) train_on(batches.make(next_index++));
  // The two ways alternate in blocks on the same model, so that a burst of other work on a shared machine
  // hits both alike; each block of the prefetched way starts a loader and stops it early at its end.
  std::vector<double> sync_ms, prefetch_ms, load_ms, wait_ms;
  std::vector<std::pair<int64_t, int64_t>> prefetched;  // (index, fingerprint) of each batch the loader gave
  result.all_pinned = true;
  const speedlabs::ContentionProbe probe;
  for (int done = 0; done < steps; done += kBlock) {
    speedlabs::stop_if_asked("while measuring the loaders");  // Ctrl-C: between blocks, the loader stopped
    const int block = std::min(kBlock, steps - done);
    for (int i = 0; i < block; ++i) {
      const auto start = Clock::now();
      const auto batch = batches.make(next_index++);
      load_ms.push_back(ms_since(start));
      train_on(batch);
      sync_ms.push_back(ms_since(start));
    }
    const int64_t first = next_index;
    PrefetchLoader loader([&batches, first](int64_t i) { return std::optional<datasets::Batch>(batches.make(first + i)); },
                          prefetch);
    for (int i = 0; i < block; ++i) {
      const auto start = Clock::now();
      auto batch = loader.next();
      wait_ms.push_back(ms_since(start));
      if (!batch) throw speedlabs::RuntimeFailure("the prefetching loader ended a stream that has no end");
      result.all_pinned = result.all_pinned && batch->x.is_pinned() && batch->y.is_pinned();
      prefetched.emplace_back(next_index++, fingerprint(batch->x));
      train_on(*batch);
      prefetch_ms.push_back(ms_since(start));
    }
  }  // each block's loader is stopped while its worker is still making batches ahead

  result.contention = probe.read();
  result.free_cores = std::min(free_before, measure_free_cores());
  // Per block: a synchronous block and the prefetched block right after it ran moments apart. Their medians
  // are compared, not single steps: one training step varies by about as much as a batch takes to load.
  const auto median_of = [](const std::vector<double>& v, size_t from, size_t count) {
    return speedlabs::summarize_samples({v.begin() + from, v.begin() + from + count}).median;
  };
  for (size_t from = 0; from < prefetch_ms.size(); from += kBlock) {
    const size_t count = std::min<size_t>(kBlock, prefetch_ms.size() - from);
    result.hidden_shares.push_back((median_of(sync_ms, from, count) - median_of(prefetch_ms, from, count)) /
                                   median_of(load_ms, from, count));
  }
  result.load_samples_ms = load_ms;
  const auto all = torch::stack(losses).cpu();
  if (!torch::isfinite(all).all().item<bool>()) {
    throw speedlabs::RuntimeFailure("the loader comparison's loss is not finite: " + c10::str(all));
  }
  result.last_loss = all[-1].item<double>();
  result.same_batches = std::all_of(prefetched.begin(), prefetched.end(), [&](const auto& given) {
    return fingerprint(batches.make(given.first).x) == given.second;
  });
  result.load_ms = speedlabs::summarize(load_ms).median_ms;
  result.wait_ms = speedlabs::summarize(wait_ms).median_ms;
  result.sync_step_ms = speedlabs::summarize(sync_ms).median_ms;
  result.prefetch_step_ms = speedlabs::summarize(prefetch_ms).median_ms;
  return result;
}

}  // namespace lab07
