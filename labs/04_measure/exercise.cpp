// Lab 04 exercise stub: replace the body, then run ./lab test (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab04 {

speedlabs::TimingStats measure(const std::function<void()>& /*fn*/, const c10::Device& /*device*/,
                               speedlabs::TimingOptions /*options*/) {
  // TODO(lab04): check the counts, make the warm-up calls (keep the first one's time), then time each
  // measured call between two synchronize() calls with std::chrono::steady_clock, and summarize().
  speedlabs::not_implemented("04", "04_measure", "measure");
}

}  // namespace lab04
