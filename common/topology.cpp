#include "common/topology.h"

#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

namespace speedlabs {

namespace fs = std::filesystem;

namespace {

// The most CPUs a Linux kernel can be built for (NR_CPUS); a list beyond it is not the kernel's.
constexpr int kMaxCpus = 8192;

// The first line of a sysfs file, or nothing when it cannot be read.
std::optional<std::string> first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// The CPUs of a kernel CPU list such as "0-3,8,10-11"; nothing when it is not one.
std::optional<std::set<int>> parse_cpu_list(const std::string& text) {
  static const std::regex range(R"((\d{1,5})(?:-(\d{1,5}))?)");
  std::set<int> cpus;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    std::smatch m;
    if (!std::regex_match(item, m, range)) return std::nullopt;
    const int first = std::stoi(m[1]), last = m[2].matched ? std::stoi(m[2]) : first;
    if (last < first || last >= kMaxCpus) return std::nullopt;
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  if (cpus.empty()) return std::nullopt;
  return cpus;
}

// The online CPUs: the kernel's list, else every cpuN folder (an older or partial sysfs).
std::set<int> online_cpus(const fs::path& cpu_dir) {
  if (const auto line = first_line(cpu_dir / "online")) {
    if (auto cpus = parse_cpu_list(*line)) return *cpus;
  }
  static const std::regex cpu_name(R"(cpu(\d{1,5}))");
  std::set<int> cpus;
  std::error_code error;
  for (fs::directory_iterator it(cpu_dir, error), end; !error && it != end; it.increment(error)) {
    std::smatch m;
    const std::string name = it->path().filename().string();
    if (std::regex_match(name, m, cpu_name)) cpus.insert(std::stoi(m[1]));
  }
  return cpus;
}

// The logical CPUs of @p cpu's core (the same set for every hyperthread of that core), or nothing.
std::optional<std::set<int>> core_of(const fs::path& cpu_dir, int cpu) {
  const fs::path topology = cpu_dir / ("cpu" + std::to_string(cpu)) / "topology";
  for (const char* name : {"core_cpus_list", "thread_siblings_list"}) {
    if (const auto line = first_line(topology / name)) {
      if (auto siblings = parse_cpu_list(*line)) return siblings;
    }
  }
  return std::nullopt;
}

// x86's /proc/cpuinfo lists the "hypervisor" flag on every CPU of a virtual machine.
bool reports_hypervisor(const fs::path& cpuinfo) {
  std::ifstream in(cpuinfo);
  static const std::regex flag(R"(^flags\s*:.*\bhypervisor\b.*)");
  std::string line;
  while (std::getline(in, line)) {
    if (std::regex_match(line, flag)) return true;
  }
  return false;
}

}  // namespace

std::string CpuTopology::describe() const {
  const auto count = [](int n, const std::string& what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  if (!known()) {
    return logical_cpus > 0 ? count(logical_cpus, "logical CPU") + " on cores the kernel does not list"
                            : "CPUs the kernel does not list";
  }
  return count(logical_cpus, "logical CPU") + " on " + count(physical_cores, "physical core") +
         (virtual_machine ? " (virtual: a hypervisor's)" : "");
}

nlohmann::json CpuTopology::to_json() const {
  return {{"logical_cpus", logical_cpus}, {"physical_cores", physical_cores}, {"virtual_machine", virtual_machine}};
}

CpuTopology read_cpu_topology(const fs::path& cpu_dir, const fs::path& cpuinfo) {
  CpuTopology topology;
  const std::set<int> cpus = online_cpus(cpu_dir);
  topology.logical_cpus = static_cast<int>(cpus.size());
  topology.virtual_machine = reports_hypervisor(cpuinfo);
  std::set<std::set<int>> cores;
  for (int cpu : cpus) {
    const auto core = core_of(cpu_dir, cpu);
    if (!core) return topology;  // one unreadable core makes the count unknown, never too small
    cores.insert(*core);
  }
  topology.physical_cores = static_cast<int>(cores.size());
  return topology;
}

}  // namespace speedlabs
