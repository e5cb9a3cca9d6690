#include "training.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "common/format.h"
#include "common/memory.h"
#include "common/process.h"
#include "common/timer.h"
#include "datasets/data_loader.h"
#include "exercise.h"

namespace lab05 {

using speedlabs::Precision;
using speedlabs::fixed;
namespace gpt = speedlabs::gpt;

namespace {

// An fp16 step whose loss overflows is skipped while the scaler lowers its scale; the loss itself comes
// from the forward pass, which the scale does not touch, so this many overflowed losses in a row mean a
// run that cannot recover: it stops as one that could not be made (exit 3), not as a verdict.
constexpr int kMaxNonfiniteInARow = 8;

}  // namespace

CsvLog::CsvLog(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  const std::string temporary = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw speedlabs::RuntimeFailure("cannot write '" + temporary + "': " + std::strerror(errno));
  add("mode,step,loss,ms,tokens_per_s");
  if (std::rename(temporary.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw speedlabs::RuntimeFailure("cannot write '" + path_ + "': " + reason);
  }
}

CsvLog::~CsvLog() {
  if (fd_ >= 0) ::close(fd_);
}

void CsvLog::add(const std::string& line) {
  if (fd_ < 0) return;
  const std::string bytes = line + "\n";
  errno = 0;
  if (::write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    const std::string reason = errno != 0 ? std::strerror(errno) : "a short write";
    const bool cut = ::ftruncate(fd_, size_) == 0;  // a partial line off: the file ends with a whole step
    throw speedlabs::RuntimeFailure("writing the --csv file '" + path_ + "' failed (" + reason + "); " +
                                    (cut ? "it keeps the steps before" : "its last line may be partial"));
  }
  size_ += static_cast<off_t>(bytes.size());
}

bool logged(int step, const Config& config) { return step % config.log_every == 0 || step == config.steps - 1; }

ModeResult train_one_mode(const TrainingRun& run, Precision mode) {
  const Config& config = run.config;
  ModeResult result;
  result.mode = mode;
  speedlabs::reset_peak_memory(run.device);
  // The same seed before each model: every mode starts from the same weights and sees the same batches.
  torch::manual_seed(config.seed);
  gpt::GPT model(run.model_config, causal_attention);
  model->to(run.device);
  datasets::DataLoaderLite loader(run.tokens, config.batch, config.seq);
  auto optimizer = gpt::make_adamw(model, config.lr);
  lab03::GradScaler scaler;  // your lab 03 scaler; train_step needs it in fp16 only

  const std::string name = speedlabs::to_string(mode);
  const double tokens_per_step = static_cast<double>(config.batch * config.seq);
  int nonfinite_in_a_row = 0;
  for (int step = 0; step < config.steps; ++step) {
    // Ctrl-C or SIGTERM: stop between two steps (the progress bar erases itself on the way out).
    speedlabs::stop_if_asked("at step " + std::to_string(step) + " of mode " + name +
                             (config.csv_path.empty() ? "" : "; the steps done so far are in " + config.csv_path));
    torch::Tensor loss;
    const double ms = speedlabs::time_once_ms(
        [&] {
          const auto batch = loader.next_batch();
          loss = train_step(model, optimizer, batch.x.to(run.device), batch.y.to(run.device), mode, &scaler);
        },
        run.device);
    const double value = loss.item<double>();
    const StepRecord record{step, value, ms, tokens_per_step / (ms / 1000.0)};
    result.steps.push_back(record);
    std::ostringstream line;
    line << name << ',' << step << ',' << std::setprecision(9) << value << ',' << fixed(ms, 3) << ','
         << fixed(record.tokens_per_s, 1);
    run.csv.add(line.str());  // after every step: a killed or interrupted run keeps every finished step
    if (!std::isfinite(value)) {
      if (mode != Precision::fp16) {
        throw speedlabs::RuntimeFailure("the loss is " + std::string(std::isnan(value) ? "NaN" : "inf") +
                                        " at step " + std::to_string(step) + " in " + name +
                                        ": training diverged; try a smaller --lr");
      }
      ++result.nonfinite_fp16_steps;  // float16 overflow: the scaler skips this step and lowers the scale
      if (++nonfinite_in_a_row == kMaxNonfiniteInARow) {
        throw speedlabs::RuntimeFailure(
            "the fp16 loss is NaN or inf at " + std::to_string(kMaxNonfiniteInARow) + " steps in a row (to step " +
            std::to_string(step) + "): the forward pass overflows float16, which loss scaling cannot fix; "
            "try a smaller --lr, or bf16");
      }
    } else {
      nonfinite_in_a_row = 0;
    }
    if (logged(step, config)) {
      run.bar.clear();
      std::cout << "  " << std::left << std::setw(5) << name << std::right << "step " << std::setw(4) << step
                << " | loss " << fixed(value, 6) << " | " << std::setw(9) << fixed(ms, 2) << " ms/step | "
                << std::setw(9) << fixed(record.tokens_per_s, 0) << " tokens/s" << std::endl;
    }
    run.bar.show(name, step + 1);
  }
  run.bar.clear();

  std::vector<double> timed;
  for (const auto& s : result.steps) {
    if (s.step >= warmup_steps(config.steps)) timed.push_back(s.ms);
  }
  if (timed.empty()) timed.push_back(result.steps.back().ms);  // a one-step run has only its warm-up step
  result.median_ms = speedlabs::summarize(timed).median_ms;
  result.tokens_per_s = tokens_per_step / (result.median_ms / 1000.0);
  result.peak_bytes = speedlabs::peak_memory_bytes(run.device);
  result.final_loss_scale = mode == Precision::fp16 ? scaler.get_scale() : 1.0;
  std::set<std::string> dtypes;
  for (const auto& p : model->parameters()) dtypes.insert(c10::toString(p.scalar_type()));
  result.weight_dtypes.assign(dtypes.begin(), dtypes.end());
  return result;
}

}  // namespace lab05
