#include "common/cli.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <c10/util/Exception.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <regex>
#include <vector>

#include "common/contention.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/precision.h"
#include "common/predictions.h"
#include "common/process.h"

namespace speedlabs {

CLI::Validator finite_above(double above) {
  return CLI::Validator(
      [above](std::string& text) -> std::string {
        double parsed = 0.0;
        if (!CLI::detail::lexical_cast(text, parsed)) return "'" + text + "' is not a number";
        if (!std::isfinite(parsed)) return "'" + text + "' is not a finite number";
        if (!(parsed > above)) return "'" + text + "' must be greater than " + CLI::detail::to_string(above);
        return "";
      },
      "NUMBER > " + CLI::detail::to_string(above));
}

CLI::Validator whole_seed() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || std::stoull(text) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return "'" + text + "' is not a seed: give a whole number from 0 to 9223372036854775807";
        }
        return "";
      },
      "0..2^63-1");
}

namespace {

// libtorch's OpenMP (libgomp) spins at every barrier unless OMP_WAIT_POLICY says otherwise, and reads the
// variable only as it loads. On a quiet machine spinning catches the next op soonest (lab 05's tokens/s were
// 1-13% lower with PASSIVE, three interleaved pairs); beside a busy core a spinning thread keeps its core while
// its sibling waits a time slice for the other one, once per op (lab 13's quick run beside one busy core:
// 510-539 s spinning, 97 s asleep; 2-vCPU Xeon VM). So a lab that starts on a busy machine (the suite's own
// reading of busy, over 50 ms) sets PASSIVE, unless its user chose a policy, and starts again as itself: execv
// keeps the process id, so a parent or a supervisor sees one process.
void wait_asleep_when_busy(int argc, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || !ContentionProbe().read().busy()) return;
  std::vector<char*> again(argv, argv + argc);
  again.push_back(nullptr);  // execv's list ends with a null pointer
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", again.data());
  unsetenv("OMP_WAIT_POLICY");  // execv failed: the lab runs on, spinning, and its JSON says so
}

// The OpenMP wait policy this process started with (its environment as execve gave it, which a later setenv does
// not change, as libgomp's reading does not), or null.
nlohmann::json started_wait_policy() {
  std::ifstream environ("/proc/self/environ", std::ios::binary);
  const std::string prefix = "OMP_WAIT_POLICY=";
  for (std::string entry; std::getline(environ, entry, '\0');) {
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
  }
  return nullptr;
}

int run_and_report(const LabInfo& info, const CommonFlags& flags, const RunExperiment& run) {
  const bool json_to_stdout = is_stream_path(flags.json_path);
  if (!flags.json_path.empty() && !json_to_stdout) require_writable(flags.json_path);
  c10::Device device = select_device(flags.device);  // validates the request even for a CPU-only lab
  if (info.cpu_only && !device.is_cpu()) {
    std::cout << "(lab " << info.number << " runs on the CPU whatever --device says)\n";
    device = c10::Device(c10::kCPU);
  }
  Report report(info.folder, describe(device));
  std::cout << "lab " << info.folder << " on " << report.device() << (flags.quick ? " (quick)" : "") << "\n";
  run(LabContext{device, flags}, report);
  report.print_table(std::cout);
  const PredictionFile predictions = lab_predictions(info.folder);
  print_predictions(std::cout, predictions, report);
  if (flags.json_path.empty()) return report.exit_code();
  nlohmann::json written = report_with_predictions(report, predictions);
  // How the run's OpenMP threads waited between ops (wait_asleep_when_busy): null when they spun, libgomp's default.
  written["omp_wait_policy"] = started_wait_policy();
  if (json_to_stdout) {
    std::cout << written.dump(2) << "\n" << std::flush;
    // A full disk or a closed pipe behind standard output: the observations were asked for and not delivered.
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      throw RuntimeFailure("could not write the observations to standard output (full, or closed)");
    }
  } else {
    write_file_atomically(flags.json_path, written.dump(2) + "\n");
    std::cout << "observations written to " << flags.json_path << "\n";
  }
  return report.exit_code();
}

}  // namespace

std::string out_of_memory_message(const std::string& what) {
  // libtorch says "CUDA out of memory. Tried to allocate 2.00 GiB" on a GPU and "DefaultCPUAllocator: not
  // enough memory: you tried to allocate 1234 bytes" on the host; std::bad_alloc says neither.
  const bool gpu = what.find("CUDA") != std::string::npos;
  std::string size;
  std::smatch match;
  if (std::regex_search(what, match, std::regex(R"(allocate (\d+) bytes)"))) {
    size = " (" + format_bytes(std::stod(match[1].str())) + ")";
  } else if (std::regex_search(what, match, std::regex(R"([Tt]ried to allocate ([0-9.]+ [KMGT]?i?B))"))) {
    size = " (" + match[1].str() + ")";
  }
  return std::string("out of ") + (gpu ? "GPU" : "host") + " memory: an allocation" + size +
         " failed. Try a smaller --batch or sequence length (--help lists this lab's flags)" +
         (gpu ? "" : ", or close what else is using the machine's memory") +
         ".\n  libtorch said: " + (what.empty() ? "nothing" : what.substr(0, what.find('\n')));
}

bool is_host_allocation_failure(const std::string& what) {
  return what.find("alloc_cpu") != std::string::npos || what.find("DefaultCPUAllocator") != std::string::npos;
}

int run_lab(int argc, char** argv, const LabInfo& info, const AddFlags& add_flags, const RunExperiment& run) {
  CLI::App app{"speedlabs lab " + info.folder + ": " + info.description};
  CommonFlags flags;
  app.add_option("--device", flags.device, "auto picks cuda, then mps, then cpu")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "mps"}))
      ->capture_default_str();
  // A path, never a flag taken for one (--json --quick) nor nothing at all (--json "").
  const CLI::Validator output_path(
      [](std::string& path) -> std::string {
        if (path.empty()) return "--json needs a path: a file, or - for standard output";
        if (path.size() > 1 && path[0] == '-') {
          return "'" + path + "' is a flag, not a path: give the file right after --json (./" + path +
                 " for a file whose name starts with -)";
        }
        return "";
      },
      "PATH");
  app.add_option("--json", flags.json_path,
                 "write the observations as JSON to this file (- or /dev/stdout: print them after the table)")
      ->check(output_path);
  app.add_flag("--quick", flags.quick, "small sizes: finishes in seconds");
  if (add_flags) add_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints --help, or the error and a hint
    return code == 0 ? kExitOk : kExitUsage;
  }
  wait_asleep_when_busy(argc, argv);  // after the flags: --help and a usage error answer at once

  const std::string me = "lab" + info.number;
  exit_on_stop_signals();
  prepare_vector_math();
  try {
    return run_and_report(info, flags, run);
  } catch (const UsageError& e) {
    std::cerr << me << ": error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const NotImplementedError& e) {
    std::cerr << me << ": " << e.what() << "\n";
    return kExitNotImplemented;
  } catch (const c10::OutOfMemoryError& e) {
    std::cerr << me << ": error: " << out_of_memory_message(e.what_without_backtrace()) << "\n";
    return kExitRuntime;
  } catch (const std::bad_alloc&) {
    std::cerr << me << ": error: " << out_of_memory_message("std::bad_alloc") << "\n";
    return kExitRuntime;
  } catch (const RuntimeFailure& e) {
    std::cerr << me << ": " << (stop_requested() ? "" : "error: ") << e.what() << "\n";
    return stop_requested() ? kExitInterrupted : kExitRuntime;  // one code for an interrupted run
  } catch (const c10::Error& e) {
    if (is_host_allocation_failure(e.what_without_backtrace())) {
      std::cerr << me << ": error: " << out_of_memory_message(e.what_without_backtrace()) << "\n";
      return kExitRuntime;
    }
    std::cerr << me << ": libtorch error: " << e.what_without_backtrace() << "\n";
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::cerr << me << ": error: " << e.what() << "\n";
    return kExitRuntime;
  }
}

}  // namespace speedlabs
