#include "common/workers/launcher.h"

#include <torch/cuda.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "common/errors.h"
#include "common/format.h"
#include "common/process.h"

namespace speedlabs::workers {

namespace {

// Every process but this one whose environment holds @p entry. A zombie's environment reads empty: it is not
// counted (nothing of it runs).
std::vector<pid_t> processes_with(const std::string& entry) {
  std::vector<pid_t> found;
  for (const pid_t pid : all_processes()) {
    if (pid == getpid()) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    for (std::string variable; std::getline(in, variable, '\0');) {
      if (variable == entry) {
        found.push_back(pid);
        break;
      }
    }
  }
  return found;
}

// Open MPI starts the workers in process groups of their own, which the end of mpirun's group does not reach:
// after a stopped job they ran on for a second or two. Every process of the job (its environment names the
// job's heartbeat folder, so no other process can match) is killed and waited for, at most 2 s.
void end_job_processes(const std::filesystem::path& folder) {
  const std::string entry = std::string(kHeartbeatEnv) + "=" + folder.string();
  for (int look = 0; look < 200; ++look) {
    const auto left = processes_with(entry);
    if (left.empty()) return;
    for (const pid_t pid : left) ::kill(pid, SIGKILL);
    usleep(10'000);
  }
}

// A job's own folder in the temporary directory (rank 0's result, the heartbeats), removed with its files
// once every process of the job has ended.
struct JobFolder {
  std::filesystem::path path;
  JobFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "speedlabs-job-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw speedlabs::RuntimeFailure("cannot make a temporary folder like " + pattern + ": " + std::strerror(errno));
    }
    path = pattern;
  }
  ~JobFolder() {
    end_job_processes(path);
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  JobFolder(const JobFolder&) = delete;
  JobFolder& operator=(const JobFolder&) = delete;
};

// The lines of a job's output that say why it stopped: the workers' error lines and, with @p mpirun_too,
// mpirun's account of who died. @p first_only: one line (every worker reports the same usage error).
std::string why_the_job_stopped(const std::string& output, const std::string& who, bool mpirun_too, bool first_only) {
  std::istringstream lines(output);
  std::string line, why;
  while (std::getline(lines, line)) {
    const bool ours = line.find(who) != std::string::npos;
    const bool mpiruns = line.find("mpirun noticed") != std::string::npos;
    if (ours || (mpirun_too && mpiruns)) why += (why.empty() ? "" : "\n  ") + line;
    if (first_only && !why.empty()) break;
  }
  return why.empty() ? "(no worker said why; the output is above)" : why;
}

}  // namespace

void validate_batch_split(int64_t batch, int workers) {
  if (batch % workers != 0) {
    throw speedlabs::UsageError("--batch " + std::to_string(batch) + " does not split evenly over " +
                                std::to_string(workers) + " workers: choose a multiple of --workers");
  }
}

Launch launch_of(const LaunchConfig& settings, int workers, std::string who, std::string name) {
  return Launch{settings, workers, std::move(who), std::move(name)};
}

void validate_launch(const LaunchConfig& settings, int workers) {
  const std::string& hostfile = settings.hostfile;
  const std::string& device = settings.device;
  if (workers < 2) throw speedlabs::UsageError("a job of MPI workers needs at least 2 of them");
  if (!hostfile.empty() && !std::filesystem::is_regular_file(hostfile)) {
    throw speedlabs::UsageError("--hostfile " + hostfile + " is not a file");
  }
  if (device == "cuda") {
#ifdef SPEEDLABS_NCCL
    const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    if (hostfile.empty() && gpus < workers) {
      throw speedlabs::UsageError("--device cuda: NCCL needs one GPU per worker; this machine has " +
                                  std::to_string(gpus) + " for " + std::to_string(workers) + " workers");
    }
#else
    throw speedlabs::UsageError(
        "--device cuda needs the workers' NCCL path, built only against a CUDA libtorch with "
        "NCCL's header (the nvidia-nccl wheel); this build has none");
#endif
  }
}

Launched launch_mpi_job(const Launch& launch, const nlohmann::json& job) {
  const JobFolder folder;
  const auto out_path = folder.path / "result.json";
  const int told_workers = launch.faults.claimed_workers > 0 ? launch.faults.claimed_workers : launch.workers;
  const nlohmann::json envelope{{"job", job},
                                {"device", launch.device},
                                {"workers", told_workers},
                                {"faults", launch.faults},
                                {"out_path", out_path.string()}};
  std::string program = launch.worker_program;
  if (program.empty()) {
    std::error_code error;
    program = std::filesystem::read_symlink("/proc/self/exe", error).string();
    if (error) throw speedlabs::RuntimeFailure("cannot find this program's path (/proc/self/exe): " + error.message());
  }
  std::vector<std::string> argv{launch.mpirun};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");  // Open MPI refuses root without it
  for (const char* flag : {"--oversubscribe", "--bind-to", "none", "-np"}) argv.emplace_back(flag);
  argv.push_back(std::to_string(launch.workers));
  if (!launch.hostfile.empty()) {
    argv.insert(argv.end(), {"--hostfile", launch.hostfile});
  } else {  // one machine: keep every socket, MPI's and its launcher's, on the loopback interface
    argv.insert(argv.end(), {"--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"});
  }
  argv.insert(argv.end(), {program, "--worker", envelope.dump()});

  speedlabs::ProcessOptions options;
  options.timeout_s = launch.timeout_s;
  options.env = {{"OMP_NUM_THREADS", "1"}, {kHeartbeatEnv, folder.path.string()}};
  const speedlabs::ContentionProbe probe;  // the workers' CPU counts as ours once mpirun has reaped them
  const HeartbeatWatch heartbeats(folder.path, launch.stall);
  const auto process = speedlabs::run_process(argv, options);
  Launched launched;
  launched.contention = probe.read();
  std::cout << process.output << std::flush;
  if (process.interrupted) throw speedlabs::RuntimeFailure("interrupted: the " + launch.name + " was stopped");
  if (process.timed_out) {
    throw speedlabs::RuntimeFailure("the " + launch.name + " did not finish within " +
                                    speedlabs::fixed(launch.timeout_s, 0) + " s and was ended with every worker");
  }
  if (!heartbeats.stalled().empty()) {
    throw speedlabs::RuntimeFailure("the " + launch.name + " was ended: " + heartbeats.stalled());
  }
  if (!process.ok()) {
    if (process.exit_code == speedlabs::kExitUsage) {
      throw speedlabs::UsageError("the workers stopped at start: " +
                                  why_the_job_stopped(process.output, launch.who, false, true));
    }
    if (process.exit_code == speedlabs::kExitNotImplemented) {
      throw speedlabs::NotImplementedError(why_the_job_stopped(process.output, launch.who, false, true));
    }
    throw speedlabs::RuntimeFailure("the " + launch.name + " failed (" + process.describe() +
                                    "); every other worker was stopped:\n  " +
                                    why_the_job_stopped(process.output, launch.who, true, false));
  }
  std::ifstream in(out_path);
  if (!in) throw speedlabs::RuntimeFailure("the " + launch.name + " ended without writing " + out_path.string());
  launched.result = nlohmann::json::parse(in);
  return launched;
}

}  // namespace speedlabs::workers
