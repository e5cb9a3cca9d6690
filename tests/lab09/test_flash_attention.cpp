// Lab 09: the tiled forward against lab 05's written-out attention and SDPA, the backward against autograd,
// and every observation of a --quick run through the same experiment the program runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attention_backward.h"
#include "common/build_paths.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/observations.h"
#include "exercise.h"
#include "experiment.h"
#include "labs/05_gpt2/exercise.h"
#include "tests/support/expect.h"
#include "tests/support/spawn.h"
#include "tests/support/timed.h"

namespace {

using speedlabs::Verdict;
using speedlabs::testing::tensors_close;

struct Qkv {
  torch::Tensor q, k, v;
};

Qkv random_qkv(int64_t B, int64_t H, int64_t T, int64_t D, uint64_t seed, bool requires_grad = false) {
  torch::manual_seed(seed);
  const auto options = torch::TensorOptions().requires_grad(requires_grad);
  return {torch::randn({B, H, T, D}, options), torch::randn({B, H, T, D}, options),
          torch::randn({B, H, T, D}, options)};
}

// Both sides float32 (see kForwardTolerance in experiment.h): the same sums in different orders.
TEST(Lab09Forward, MatchesWrittenOutAndSdpaForTFrom1To4096) {
  for (const int64_t T : {1, 2, 37, 64, 65, 256, 1000, 4096}) {
    // Tiles that divide T and tiles that do not; few, large ones at T=4096 to keep the test short.
    const std::vector<std::pair<int64_t, int64_t>> tiles =
        T < 4096 ? std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {100, 37}}
                 : std::vector<std::pair<int64_t, int64_t>>{{512, 512}, {600, 700}};
    const auto x = random_qkv(1, 2, T, 64, static_cast<uint64_t>(T));
    const auto written_out = lab05::causal_attention(x.q, x.k, x.v);
    const auto sdpa = at::scaled_dot_product_attention(x.q, x.k, x.v, {}, 0.0, /*is_causal=*/true);
    for (const auto& [q_tile, kv_tile] : tiles) {
      const std::string what =
          "T=" + std::to_string(T) + ", tiles " + std::to_string(q_tile) + " x " + std::to_string(kv_tile);
      const auto out = lab09::tiled_attention_forward(x.q, x.k, x.v, q_tile, kv_tile).out;
      EXPECT_TRUE(tensors_close(out, written_out, lab09::kForwardTolerance, 0, "tiled vs written out, " + what));
      EXPECT_TRUE(tensors_close(out, sdpa, lab09::kForwardTolerance, 0, "tiled vs SDPA, " + what));
    }
  }
}

// float32 gradients through two different orders of the same sums (see kBackwardTolerance in experiment.h).
TEST(Lab09Backward, GradientsMatchAutogradThroughTheWrittenOutAttention) {
  const std::vector<std::pair<int64_t, int64_t>> tiles{{16, 16}, {7, 20}, {64, 64}};
  for (const int64_t T : {1, 5, 64, 130}) {
    const auto x = random_qkv(2, 3, T, 16, static_cast<uint64_t>(T), /*requires_grad=*/true);
    const auto grad_out = torch::randn({2, 3, T, 16});
    const auto expected = torch::autograd::grad({lab05::causal_attention(x.q, x.k, x.v)}, {x.q, x.k, x.v}, {grad_out});
    for (const auto& [q_tile, kv_tile] : tiles) {
      const auto got =
          torch::autograd::grad({lab09::tiled_attention(x.q, x.k, x.v, q_tile, kv_tile)}, {x.q, x.k, x.v}, {grad_out});
      const std::string what =
          " at T=" + std::to_string(T) + ", tiles " + std::to_string(q_tile) + " x " + std::to_string(kv_tile);
      EXPECT_TRUE(tensors_close(got[0], expected[0], lab09::kBackwardTolerance, 0, "dq" + what));
      EXPECT_TRUE(tensors_close(got[1], expected[1], lab09::kBackwardTolerance, 0, "dk" + what));
      EXPECT_TRUE(tensors_close(got[2], expected[2], lab09::kBackwardTolerance, 0, "dv" + what));
    }
  }
}

TEST(Lab09Sdpa, TheCpuKernelIsNamed) {
  const std::string name = lab09::sdpa_kernel_name(torch::zeros({1, 12, 8, 64}));
  EXPECT_EQ(name.find("none fits"), std::string::npos) << name;
  EXPECT_FALSE(name.empty());
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');) {
    if (!folder.empty() && std::filesystem::exists(std::filesystem::path(folder) / program)) return true;
  }
  return false;
}

// One --quick run, every observation checked on it (one test: CTest runs each test in a process of its own,
// and the run is what takes the time).
TEST(Lab09Run, EveryObservationOfAQuickRun) {
  speedlabs::Report report("09_flash_attention", "cpu");
  lab09::Config config = lab09::quick_config();
  config.progress_bar = false;
  const lab09::Results results = lab09::run(config, c10::Device(c10::kCPU), report);
  const auto at = [&](const std::string& id) -> const speedlabs::Observation& { return report.at(id); };
  {
    SCOPED_TRACE("the README lists exactly the ids reported");
    std::vector<std::string> ids;
    for (const auto& o : report.observations()) ids.push_back(o.id);
    EXPECT_EQ(ids, (std::vector<std::string>{"tiled_matches_reference", "tiled_backward_matches_autograd",
                                             "tiled_peak_memory_linear_in_T", "tiled_vs_sdpa_time",
                                             "tiled_vs_sdpa_time_at_1024", "written_out_vs_tiled_memory_at_4096",
                                             "cuda_kernel_matches_sdpa", "cuda_kernel_vs_sdpa_time"}));
    // The README's table lists the same ids, no more, no fewer.
    const std::string readme = speedlabs::read_file(speedlabs::source_dir() + "/labs/09_flash_attention/README.md");
    const auto table_start = readme.find("## What you should observe, and why");
    ASSERT_NE(table_start, std::string::npos);
    for (const auto& id : ids) EXPECT_NE(readme.find("| `" + id + "` |", table_start), std::string::npos) << id;
    size_t rows = 0;
    for (size_t pos = readme.find("\n| `", table_start); pos != std::string::npos; pos = readme.find("\n| `", pos + 1))
      ++rows;
    EXPECT_EQ(rows, ids.size());
  }

  {
    SCOPED_TRACE("tiled_matches_reference");
    const auto& o = at("tiled_matches_reference");
    EXPECT_EQ(o.verdict, Verdict::holds) << o.measured.dump();
    EXPECT_TRUE(o.must_hold);
    for (const auto& size : results.sizes) {
      EXPECT_LE(size.max_error_vs_written_out, lab09::kForwardTolerance) << "T=" << size.seq;
      EXPECT_LE(size.max_error_vs_sdpa, lab09::kForwardTolerance) << "T=" << size.seq;
    }
  }

  {
    SCOPED_TRACE("tiled_backward_matches_autograd");
    const auto& o = at("tiled_backward_matches_autograd");
    EXPECT_EQ(o.verdict, Verdict::holds) << o.measured.dump();
    EXPECT_LE(results.backward.max_abs_error, lab09::kBackwardTolerance);
  }

  {
    SCOPED_TRACE("tiled_peak_memory_linear_in_T");
    const auto& o = at("tiled_peak_memory_linear_in_T");
    EXPECT_TRUE(o.must_hold);
    ASSERT_EQ(o.verdict, Verdict::holds) << o.measured.dump() << " " << o.reason;
    EXPECT_LE(o.measured["tiled_exponent"].get<double>(), lab09::kLinearExponentLimit);
    EXPECT_GE(o.measured["written_out_exponent"].get<double>(), lab09::kQuadraticExponentFloor);
  }

  {
    SCOPED_TRACE("written_out_vs_tiled_memory_at_4096");
    const auto& o = at("written_out_vs_tiled_memory_at_4096");
    ASSERT_EQ(o.verdict, Verdict::holds) << o.reason;
    EXPECT_FALSE(o.must_hold);
    EXPECT_EQ(o.measured["T"].get<int64_t>(), results.sizes.back().seq);
    // At T=1024 with 64-row tiles the written-out scores (T x T per head) dwarf the tiled forward's tiles.
    EXPECT_GT(o.measured["ratio"].get<double>(), 3.0) << o.measured.dump();
  }

  for (const std::string id : {"tiled_vs_sdpa_time", "tiled_vs_sdpa_time_at_1024"}) {
    SCOPED_TRACE(id);
    const auto& o = at(id);
    EXPECT_FALSE(o.must_hold);
    // Timed interleaved: the ratio is the median of the per-round ratios, with its quartiles and the
    // machine's reading; a busy machine makes it 'could not decide', with the reason, never a verdict.
    EXPECT_TRUE(speedlabs::testing::timed_with_evidence(o));
    EXPECT_NE(o.verdict, Verdict::not_applicable);
    const double ratio = o.measured["ratio"].get<double>();
    EXPECT_GT(ratio, 0.0);
    EXPECT_LE(o.measured["ratio_q1"].get<double>(), ratio);
    EXPECT_GE(o.measured["ratio_q3"].get<double>(), ratio);
    EXPECT_GE(o.measured["rounds"].get<int>(), config.repeats);
    EXPECT_EQ(o.evidence["value"]["count"].get<int>(), o.measured["rounds"].get<int>());
    for (const auto& size : results.sizes) {  // every method timed in the same rounds
      EXPECT_EQ(size.of(lab09::Method::tiled).time.samples_ms.size(),
                size.of(lab09::Method::sdpa).time.samples_ms.size());
      EXPECT_EQ(size.of(lab09::Method::tiled).time.samples_ms.size(),
                size.of(lab09::Method::written_out).time.samples_ms.size());
    }
    EXPECT_NE(o.claim.find(results.sdpa_cpu_kernel), std::string::npos) << "the claim names SDPA's CPU kernel";
  }
  EXPECT_EQ(at("tiled_vs_sdpa_time_at_1024").measured["T"].get<int64_t>(), 1024);

  {
    SCOPED_TRACE("the GPU observations on a CPU");
    for (const std::string id : {"cuda_kernel_matches_sdpa", "cuda_kernel_vs_sdpa_time"}) {
      EXPECT_EQ(at(id).verdict, Verdict::not_applicable) << id;
      EXPECT_NE(at(id).reason.find("no CUDA device"), std::string::npos) << at(id).reason;
    }
  }

  {
    SCOPED_TRACE("the plot");
    if (on_path("gnuplot")) {  // the lab goes on without a plot where gnuplot is missing
      const auto directory = std::filesystem::path(::testing::TempDir()) / "lab09 plot 'quoted'";
      ASSERT_TRUE(lab09::write_plot(results, directory.string()));
      const std::string svg = speedlabs::read_file((directory / "lab09_attention_vs_T.svg").string());
      EXPECT_NE(svg.find("<svg"), std::string::npos);
      EXPECT_NE(svg.find("tiled"), std::string::npos);
    }
  }
}

TEST(Lab09Tiles, TileStepsCountEachQueryBlocksKeyBlocksUpToItsLastRow) {
  EXPECT_EQ(lab09::tile_steps(4096, 256, 256), 136);  // 16 query blocks meeting 1..16 key blocks
  EXPECT_EQ(lab09::tile_steps(512, 64, 1), 2304);     // 64 + 128 + ... + 512 keys, one at a time
  EXPECT_EQ(lab09::tile_steps(100, 30, 7), 42);       // keys 30, 60, 90, 100: 5 + 9 + 13 + 15 blocks
  EXPECT_EQ(lab09::tile_steps(1, 256, 256), 1);
}

// One call of the tiled forward runs as one piece and a stop is answered between calls, so tiles that
// would make one call last minutes (256 x 1 at T=4096: 34,816 tile steps) are refused before any work.
TEST(Lab09Tiles, TilesTooSmallForAShortCallAreAUsageErrorNamingTheSmallestThatFits) {
  lab09::Config config;
  config.kv_tile = 1;
  speedlabs::Report report("09_flash_attention", "cpu");
  try {
    lab09::run(config, c10::Device(c10::kCPU), report);
    FAIL() << "tiles of 256 x 1 at T=4096 were accepted";
  } catch (const speedlabs::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("34816 tile steps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--kv-tile 9 or more"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(report.observations().empty());
  config.kv_tile = 9;
  EXPECT_LE(lab09::tile_steps(4096, config.q_tile, config.kv_tile), lab09::kMaxTileSteps);
}

// SIGTERM to a default run with the smallest tiles it accepts is answered within seconds: exit 130 (interrupted) and a
// line saying where it stopped. The lab's own program, started and signalled as a user's shell would.
TEST(Lab09Interrupt, SigtermWithTheSmallestTilesStopsWithinSeconds) {
  const std::string log = (std::filesystem::path(::testing::TempDir()) / "lab09_interrupted.log").string();
  std::vector<std::string> args{speedlabs::program_path("lab09"), "--device", "cpu", "--kv-tile", "9"};
  const pid_t pid = speedlabs::testing::spawn_logged(args, log);
  ASSERT_GT(pid, 0) << "could not start " << args[0];
  sleep(4);  // well into the measurements
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  // A hang guard, not a timing: before the tiles were bounded a call could ignore the signal for minutes.
  int status = 0;
  pid_t ended = 0;
  for (int waited = 0; waited < 150 && (ended = waitpid(pid, &status, WNOHANG)) == 0; ++waited) usleep(100'000);
  if (ended == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "still running 15 s after SIGTERM:\n" << speedlabs::read_file(log);
  }
  ASSERT_EQ(ended, pid);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal instead of stopping between calls";
  EXPECT_EQ(WEXITSTATUS(status), speedlabs::kExitInterrupted);
  EXPECT_NE(speedlabs::read_file(log).find("interrupted"), std::string::npos) << speedlabs::read_file(log);
  std::filesystem::remove(log);
}

}  // namespace
