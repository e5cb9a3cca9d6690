// The workers' engine on its own, in one process (the jobs of real MPI workers are the tests of labs 10, 11 and 14):
// the faults a test plants, the checks made before any worker starts, the worker role of a lab's program, the
// weights' fingerprint and the job's JSON.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/workers/faults.h"
#include "common/workers/harness.h"
#include "common/workers/job_flags.h"
#include "common/workers/launcher.h"
#include "tests/common/workers/recording_communicator.h"

namespace {

using speedlabs::workers::FaultPlan;

// How a child process that ran plan.strike_at_step(rank, step) ended: "exited", "killed" or "stopped" (a
// stopped child is killed after).
std::string fate_of_step(const FaultPlan& plan, int rank, int step) {
  const pid_t child = fork();
  if (child == 0) {
    plan.strike_at_step(rank, step);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, WUNTRACED);
  if (WIFSTOPPED(status)) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return "stopped";
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return "killed";
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "exited" : "ended otherwise";
}

TEST(WorkersFaults, StrikeOnlyTheirRankAtTheirStep) {
  FaultPlan plan;
  plan.kill_rank = 1;
  plan.kill_step = 3;
  plan.stop_rank = 0;
  plan.stop_step = 2;
  EXPECT_EQ(fate_of_step(plan, 1, 3), "killed");
  EXPECT_EQ(fate_of_step(plan, 0, 2), "stopped");
  EXPECT_EQ(fate_of_step(plan, 0, 3), "exited");
  EXPECT_EQ(fate_of_step(plan, 1, 2), "exited");
  EXPECT_EQ(fate_of_step(FaultPlan{}, 0, 0), "exited") << "no fault is planted by default";
}

TEST(WorkersFaults, GiveOnlyTheirRankABiggerModel) {
  FaultPlan plan;
  plan.bigger_model_rank = 1;
  const auto tiny = speedlabs::gpt::GPTConfig::by_name("tiny");
  EXPECT_EQ(plan.model_for(1, tiny).n_layer, tiny.n_layer + 1);
  EXPECT_EQ(plan.model_for(0, tiny).n_layer, tiny.n_layer);
  EXPECT_EQ(FaultPlan{}.model_for(0, tiny).n_layer, tiny.n_layer);
}

TEST(WorkersFaults, TravelAsJson) {
  FaultPlan plan;
  plan.kill_rank = 1;
  plan.kill_step = 2;
  plan.claimed_workers = 3;
  const nlohmann::json json = plan;
  const auto back = json.get<FaultPlan>();
  EXPECT_EQ(back.kill_rank, 1);
  EXPECT_EQ(back.kill_step, 2);
  EXPECT_EQ(back.claimed_workers, 3);
  EXPECT_EQ(back.stop_rank, -1);
}

TEST(WorkersLaunch, RejectsWhatCannotStartBeforeAnyWorkerDoes) {
  using speedlabs::workers::LaunchConfig;
  using speedlabs::workers::validate_batch_split;
  using speedlabs::workers::validate_launch;
  EXPECT_THROW(validate_launch(LaunchConfig{}, 1), speedlabs::UsageError);
  EXPECT_THROW(validate_batch_split(16, 3), speedlabs::UsageError);
  EXPECT_NO_THROW(validate_batch_split(16, 2));
  LaunchConfig elsewhere;
  elsewhere.hostfile = "/nonexistent-hosts";
  EXPECT_THROW(validate_launch(elsewhere, 2), speedlabs::UsageError);
  EXPECT_NO_THROW(validate_launch(LaunchConfig{}, 2));
#ifndef SPEEDLABS_NCCL
  LaunchConfig gpus;
  gpus.device = "cuda";
  EXPECT_THROW(validate_launch(gpus, 2), speedlabs::UsageError) << "no NCCL path in this build";
#endif
}

// Every setting of a lab's run reaches its job's Launch: no lab leaves a limit at its default.
TEST(WorkersLaunch, LaunchOfPassesEverySettingOn) {
  speedlabs::workers::LaunchConfig settings;
  settings.device = "cuda";
  settings.hostfile = "hosts";
  settings.worker_program = "/bin/worker";
  settings.mpirun = "/opt/mpirun";
  settings.timeout_s = 42;
  settings.stall = {/*warn_s=*/1, /*end_s=*/2};
  settings.faults.kill_rank = 1;
  const auto launch = speedlabs::workers::launch_of(settings, 3, "lab99 worker", "3-worker job");
  EXPECT_EQ(launch.workers, 3);
  EXPECT_EQ(launch.device, "cuda");
  EXPECT_EQ(launch.hostfile, "hosts");
  EXPECT_EQ(launch.worker_program, "/bin/worker");
  EXPECT_EQ(launch.mpirun, "/opt/mpirun");
  EXPECT_EQ(launch.timeout_s, 42);
  EXPECT_EQ(launch.stall.warn_s, 1);
  EXPECT_EQ(launch.stall.end_s, 2);
  EXPECT_EQ(launch.faults.kill_rank, 1);
  EXPECT_EQ(launch.who, "lab99 worker");
  EXPECT_EQ(launch.name, "3-worker job");
}

TEST(WorkersHarness, SplitsABatchOnlyEvenly) {
  EXPECT_EQ(speedlabs::workers::rows_per_worker(16, 2), 8);
  EXPECT_THROW(speedlabs::workers::rows_per_worker(16, 3), speedlabs::UsageError);
}

struct Spec {
  int steps = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Spec, steps)

TEST(WorkersHarness, AJobDescriptionWithoutAFieldIsAUsageError) {
  EXPECT_EQ(speedlabs::workers::job_from_json<Spec>({{"steps", 4}}).steps, 4);
  EXPECT_THROW(speedlabs::workers::job_from_json<Spec>({{"stages", 4}}), speedlabs::UsageError);
}

TEST(WorkersHarness, TheWeightsChecksumSeesOneBit) {
  const std::vector<torch::Tensor> weights{torch::ones({3, 4}), torch::arange(5, torch::kFloat)};
  auto flipped = std::vector<torch::Tensor>{weights[0].clone(), weights[1].clone()};
  flipped[1].view(torch::kInt32)[2].add_(1);  // the last bit of one float
  const auto checksum = speedlabs::workers::weights_checksum(weights);
  EXPECT_EQ(checksum, speedlabs::workers::weights_checksum({weights[0].clone(), weights[1].clone()}));
  EXPECT_NE(checksum, speedlabs::workers::weights_checksum(flipped));
}

TEST(WorkersRole, IsTheLauncherUnlessStartedAsAWorker) {
  const auto worker_main = [](int, char**, const std::string& envelope) { return envelope == "SPEC" ? 7 : 1; };
  std::string program = "labNN", flag = "--worker", spec = "SPEC";
  char* as_worker[] = {program.data(), flag.data(), spec.data(), nullptr};
  EXPECT_EQ(speedlabs::workers::worker_role(3, as_worker, "labNN", "./lab run NN", worker_main), 7);
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) GTEST_SKIP() << "this test runs under mpirun";
  char* as_launcher[] = {program.data(), nullptr};
  EXPECT_FALSE(speedlabs::workers::worker_role(1, as_launcher, "labNN", "./lab run NN", worker_main).has_value());
}

// The recording communicator (the labs' graded tests watch their exercises with it) counts bytes as a ring sends
// them: an all-gather of B bytes over N workers sends (N-1)/N x B from each.
TEST(WorkersRecordingCommunicator, CountsTheBytesOfARing) {
  speedlabs::workers::testing::RecordingCommunicator comm(/*size=*/4, /*peer_factor=*/2.0);
  const auto full = torch::arange(8, torch::kFloat);
  comm.all_gather_into(full);
  EXPECT_EQ(comm.bytes_sent(), 3 * 8 * 4 / 4);
  EXPECT_FLOAT_EQ(full[2].item<float>(), 0.0f * 2);
  EXPECT_FLOAT_EQ(full[7].item<float>(), 1.0f * 2);
}

}  // namespace
