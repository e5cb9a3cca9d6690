/// @file topology.h
/// @brief The machine's CPUs as the kernel lists them: logical CPUs, and the physical cores they sit on.
///
/// A physical core may run two hardware threads (hyperthreads, SMT) that share its execution units, caches
/// and bandwidth; the kernel lists each thread as a logical CPU, and std::thread::hardware_concurrency()
/// counts those. Two compute-bound threads on the two hyperthreads of one core get far less than two cores'
/// work done, so a claim about N workers scaling needs the physical cores, which sysfs names: each logical
/// CPU's topology/thread_siblings_list lists the logical CPUs of its core. Inside a virtual machine this is
/// what the hypervisor declares: its virtual cores may be hyperthreads of one host core, which the guest
/// cannot see.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace speedlabs {

/// What the kernel says about the online CPUs.
struct CpuTopology {
  int logical_cpus = 0;          ///< online logical CPUs (0: not readable here)
  int physical_cores = 0;        ///< distinct cores among them, hyperthreads counted once (0: not readable here)
  bool virtual_machine = false;  ///< the CPU reports a hypervisor: these cores are virtual ones

  /// True when both counts were read.
  bool known() const { return logical_cpus > 0 && physical_cores > 0; }
  /// E.g. "2 logical CPUs on 2 physical cores (virtual: a hypervisor's)".
  std::string describe() const;
  /// {"logical_cpus", "physical_cores", "virtual_machine"}
  nlohmann::json to_json() const;
};

/// Reads the online logical CPUs from @p cpu_dir/online (else every cpuN folder), their cores from each one's
/// topology/core_cpus_list (else thread_siblings_list, the older name), and the hypervisor flag from
/// @p cpuinfo. Never throws: what cannot be read stays 0 (physical_cores is 0 unless every online CPU's core
/// was read), so a caller can say why it cannot rely on it.
/// @param cpu_dir the kernel's CPU folder, or a copy of its layout (the tests' fake sysfs)
/// @param cpuinfo the kernel's CPU description (x86: a "hypervisor" flag in a VM)
CpuTopology read_cpu_topology(const std::filesystem::path& cpu_dir = "/sys/devices/system/cpu",
                              const std::filesystem::path& cpuinfo = "/proc/cpuinfo");

}  // namespace speedlabs
