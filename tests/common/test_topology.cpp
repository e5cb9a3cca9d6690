// common/topology: physical cores and logical CPUs read from a fake sysfs laid out as the kernel's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/topology.h"

namespace fs = std::filesystem;

namespace {

class CpuTopology : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("speedlabs-topology-" + std::to_string(getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ / "cpu");
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const fs::path& relative, const std::string& text) const {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text << "\n";
  }
  // cpuN's core as the kernel lists it, under the old name (thread_siblings_list) or the new (core_cpus_list).
  void cpu(int n, const std::string& siblings, const char* file = "thread_siblings_list") const {
    write("cpu/cpu" + std::to_string(n) + "/topology/" + file, siblings);
  }
  speedlabs::CpuTopology read() const { return speedlabs::read_cpu_topology(root_ / "cpu", root_ / "cpuinfo"); }

  fs::path root_;
};

TEST_F(CpuTopology, TwoCoresWithOneThreadEachAreTwoPhysicalCores) {
  write("cpu/online", "0-1");
  cpu(0, "0");
  cpu(1, "1");
  write("cpuinfo", "processor\t: 0\nflags\t\t: fpu sse2 avx2\n");
  const auto topology = read();
  EXPECT_EQ(topology.logical_cpus, 2);
  EXPECT_EQ(topology.physical_cores, 2);
  EXPECT_FALSE(topology.virtual_machine);
  EXPECT_EQ(topology.describe(), "2 logical CPUs on 2 physical cores");
}

// Two hyperthreads of one core: two logical CPUs, one physical core.
TEST_F(CpuTopology, HyperthreadsOfOneCoreCountOnce) {
  write("cpu/online", "0-1");
  cpu(0, "0-1");
  cpu(1, "0-1");
  EXPECT_EQ(read().logical_cpus, 2);
  EXPECT_EQ(read().physical_cores, 1);
}

// A typical SMT layout: CPU n and n+4 share a core; the kernel writes the sibling list as "0,4".
TEST_F(CpuTopology, SiblingsListedApartAreOneCore) {
  write("cpu/online", "0-7");
  for (int n = 0; n < 8; ++n) cpu(n, std::to_string(n % 4) + "," + std::to_string(n % 4 + 4), "core_cpus_list");
  const auto topology = read();
  EXPECT_EQ(topology.logical_cpus, 8);
  EXPECT_EQ(topology.physical_cores, 4);
}

// Offline CPUs do not count; their folders stay in sysfs.
TEST_F(CpuTopology, OnlyOnlineCpusCount) {
  write("cpu/online", "0,2-3");
  for (int n = 0; n < 4; ++n) cpu(n, std::to_string(n));
  EXPECT_EQ(read().logical_cpus, 3);
  EXPECT_EQ(read().physical_cores, 3);
}

TEST_F(CpuTopology, WithoutAnOnlineListEveryCpuFolderCounts) {
  for (int n = 0; n < 3; ++n) cpu(n, std::to_string(n));
  fs::create_directories(root_ / "cpu" / "cpufreq");  // not a CPU
  EXPECT_EQ(read().logical_cpus, 3);
  EXPECT_EQ(read().physical_cores, 3);
}

// One CPU's core unreadable: the core count is unknown (0), never a guess that could be too small.
TEST_F(CpuTopology, AnUnreadableCoreMakesTheCountUnknown) {
  write("cpu/online", "0-1");
  cpu(0, "0");
  cpu(1, "garbage");
  const auto topology = read();
  EXPECT_EQ(topology.logical_cpus, 2);
  EXPECT_EQ(topology.physical_cores, 0);
  EXPECT_FALSE(topology.known());
  EXPECT_EQ(topology.describe(), "2 logical CPUs on cores the kernel does not list");
}

TEST_F(CpuTopology, NoSysfsAtAllIsUnknownNotAnError) {
  fs::remove_all(root_ / "cpu");
  const auto topology = read();
  EXPECT_EQ(topology.logical_cpus, 0);
  EXPECT_EQ(topology.physical_cores, 0);
  EXPECT_FALSE(topology.known());
}

TEST_F(CpuTopology, AHypervisorFlagMarksVirtualCores) {
  write("cpu/online", "0");
  cpu(0, "0");
  write("cpuinfo", "processor\t: 0\nflags\t\t: fpu sse2 hypervisor avx2\n");
  EXPECT_TRUE(read().virtual_machine);
  EXPECT_EQ(read().describe(), "1 logical CPU on 1 physical core (virtual: a hypervisor's)");
}

// This machine's own sysfs, read as the labs read it: at least one core, at most one per logical CPU.
TEST(CpuTopologyHere, PhysicalCoresAreAtMostTheLogicalCpus) {
  const auto topology = speedlabs::read_cpu_topology();
  if (!topology.known()) GTEST_SKIP() << "no readable sysfs here: " << topology.describe();
  EXPECT_GE(topology.physical_cores, 1);
  EXPECT_LE(topology.physical_cores, topology.logical_cpus);
}

}  // namespace
