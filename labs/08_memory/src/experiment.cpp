// Lab 08: where the memory of a training step goes. run() follows the lesson's three parts (parts.h).
#include "experiment.h"

#include <iostream>

#include "common/host_memory.h"
#include "common/memory.h"
#include "common/process.h"
#include "parts.h"

namespace lab08 {

void run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  speedlabs::install_stop_handlers();  // Ctrl-C or SIGTERM: stop between two timed rounds
  checked_config(config.model, config.seq);
  for (const int64_t seq : config.checkpoint_seqs) checked_config(config.model, seq);
  // Refuses a device it cannot measure before anything runs; on the CPU, installs the counting allocator.
  [[maybe_unused]] const speedlabs::TensorMemoryMeter meter(device);
  const ModelShape shape = model_shape(config.model);
  const int64_t budget = checked_budget_bytes(config, shape, device);
  check_batch(config, shape, device);
  // Step times are compared below: freed buffers kept in the heap, not page-faulted in again every step.
  std::cout << speedlabs::keep_freed_host_memory() << "\n";
  std::cout << (device.is_cpu() ? "measured by the counting CPU allocator (common/host_memory.h)"
                                : "measured by the CUDA caching allocator's statistics")
            << ": bytes held by tensors\n";

  PlottedRuns plotted;
  run_phases(config, shape, device, report, plotted);
  run_checkpointing(config, device, report, plotted);
  run_budget(config, shape, budget, device, report);
  if (!config.results_dir.empty()) std::cout << "\n" << write_phase_plot(config.results_dir, plotted) << "\n";
}

}  // namespace lab08
