/// @file common/progress.h
/// @brief A one-line progress bar on stderr for the long runs (training steps, a sweep of sizes).
#pragma once
#include <unistd.h>

#include <iostream>
#include <string>

namespace speedlabs {

/// Redrawn in place (a carriage return, no newline), and only on a terminal, so logs, pipes and --json
/// output stay clean.
class ProgressBar {
 public:
  /// `wanted`: the lab's --progress-bar choice (on unless --no-progress-bar); `total`: the steps in all.
  ProgressBar(bool wanted, int total) : enabled_(wanted && isatty(STDERR_FILENO)), total_(total) {}
  /// Erases the bar: an error message after an exception starts on a clean line.
  ~ProgressBar() { clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Shows `done` of `total` steps, with what is running now.
  void show(const std::string& label, int done) {
    if (!enabled_) return;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? std::min(done, total_) * kWidth / total_ : kWidth;
    std::cerr << "\r\033[K  " << label << " [" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] "
              << done << "/" << total_ << std::flush;
  }

  /// One more step done.
  void step(const std::string& label) { show(label, ++done_); }

  /// Erases the bar, so that the next line printed to stdout starts on a clean line.
  void clear() {
    if (enabled_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  bool enabled_;
  int total_;
  int done_ = 0;
};

}  // namespace speedlabs
