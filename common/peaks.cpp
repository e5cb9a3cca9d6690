#include "common/peaks.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/format.h"
#include "common/gpt.h"

namespace speedlabs {

namespace {

constexpr double kFlopPerFma = 2;  // one multiply and one add
// Two FMA pipes per core: every x86 core with AVX2 since Intel Haswell and AMD Zen 2 (some Xeon Silver and
// Bronze parts have one 512-bit unit; the flags cannot tell).
constexpr int64_t kFmaUnitsPerCore = 2;
constexpr int64_t kAvx512Lanes = 16;  // float32 lanes of a 512-bit register
constexpr int64_t kAvx2Lanes = 8;     // of a 256-bit register
constexpr int64_t kSseLanes = 4;      // of a 128-bit register
// AMD family 25 (Zen 3, Zen 4): a 256-bit floating-point datapath; Zen 4 splits a 512-bit op into two halves.
constexpr int kAmdHalfWidthAvx512Family = 25;
constexpr double kHzPerMHz = 1e6, kHzPerKHz = 1e3;
constexpr double kTera = 1e12;
// Intel's figure for the AMX tile unit of a 4th-generation Xeon (Sapphire Rapids) core: a 16 x 32 by 32 x 16 bf16
// tile product (16,384 FLOP) every 16 cycles, 1,024 bf16 (or, with AMX-FP16, fp16) FLOP per cycle.
constexpr double kAmxFlopPerCycle = 1024;
// The clock's measurement: adds per chain, chains per timing, timings (the fastest counts: another program
// or the hypervisor can only slow a timing down).
constexpr int64_t kClockChains = 1 << 18;
constexpr int kClockTimings = 9;

// "key\t: value" -> value, for the first line whose key is @p key.
std::string field(const std::string& line, const std::string& key) {
  if (line.rfind(key, 0) != 0) return "";
  const auto colon = line.find(':');
  if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) return "";
  const auto start = line.find_first_not_of(' ', colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string word;
  while (words >> word) {
    if (word == flag) return true;
  }
  return false;
}

std::string read_or_empty(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// One datasheet row: NVIDIA's dense numbers, in TFLOP/s.
struct Datasheet {
  const char* match;  // a substring of the device name
  const char* name;
  double fp32, tf32, bf16;  // fp16 equals bf16 on these parts
};

// NVIDIA's datasheets (A100: "NVIDIA A100 Tensor Core GPU" datasheet; H100/H200: "H100 Tensor Core GPU" and
// "H200" datasheets; L4: "L4 Tensor Core GPU"), the dense numbers, which are half of those "with sparsity".
const std::vector<Datasheet>& datasheets() {
  static const std::vector<Datasheet> rows{{"H100 PCIe", "H100 PCIe", 51.2, 378, 756},
                                           {"H100", "H100 SXM", 67, 494.7, 989.4},
                                           {"H200", "H200 SXM", 67, 494.7, 989.4},
                                           {"A100", "A100 (SXM or PCIe)", 19.5, 156, 312},
                                           {"L4", "L4", 30.3, 60, 121}};
  return rows;
}

// One chain of 64 register-to-register adds, each needing the last one's result: 64 cycles on any x86-64 or
// AArch64 core (an add's latency is one cycle there, and a renamer cannot fold an add of an unknown register).
#if defined(__x86_64__)
#define SPEEDLABS_ADD "add %1, %0\n\t"
#elif defined(__aarch64__)
#define SPEEDLABS_ADD "add %0, %0, %1\n\t"
#endif
#ifdef SPEEDLABS_ADD
#define SPEEDLABS_ADD8 \
  SPEEDLABS_ADD SPEEDLABS_ADD SPEEDLABS_ADD SPEEDLABS_ADD SPEEDLABS_ADD SPEEDLABS_ADD SPEEDLABS_ADD SPEEDLABS_ADD
constexpr int64_t kAddsPerChain = 64;
uint64_t add_chains(int64_t chains, uint64_t step) {
  uint64_t value = step;
  for (int64_t i = 0; i < chains; ++i) {
    asm volatile(SPEEDLABS_ADD8 SPEEDLABS_ADD8 SPEEDLABS_ADD8 SPEEDLABS_ADD8 SPEEDLABS_ADD8 SPEEDLABS_ADD8
                     SPEEDLABS_ADD8 SPEEDLABS_ADD8
                 : "+r"(value)
                 : "r"(step));
  }
  return value;
}
#endif

}  // namespace

double measured_clock_hz() {
#ifdef SPEEDLABS_ADD
  using Clock = std::chrono::steady_clock;
  const uint64_t step = static_cast<uint64_t>(Clock::now().time_since_epoch().count() | 1);  // unknown to the compiler
  add_chains(kClockChains / 8, step);                                                        // warm-up
  double fastest = std::numeric_limits<double>::infinity();
  for (int timing = 0; timing < kClockTimings; ++timing) {
    const auto start = Clock::now();
    add_chains(kClockChains, step);
    fastest = std::min(fastest, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return static_cast<double>(kClockChains * kAddsPerChain) / fastest;
#else
  return 0;
#endif
}

PeakFormat format_of(Precision precision) {
  switch (precision) {
    case Precision::tf32:
      return PeakFormat::tf32;
    case Precision::bf16:
      return PeakFormat::bf16;
    case Precision::fp16:
      return PeakFormat::fp16;
    default:
      return PeakFormat::fp32;
  }
}

std::string to_string(PeakFormat format) {
  return format == PeakFormat::tf32   ? "tf32"
         : format == PeakFormat::bf16 ? "bf16"
         : format == PeakFormat::fp16 ? "fp16"
                                      : "fp32";
}

CpuDescription parse_cpuinfo(const std::string& cpuinfo, std::optional<double> cpufreq_max_khz) {
  CpuDescription cpu;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string physical = "0", mhz;
  int processors = 0;
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    if (!field(line, "processor").empty()) ++processors;
    if (const auto v = field(line, "vendor_id"); !v.empty() && cpu.vendor.empty()) cpu.vendor = v;
    if (const auto v = field(line, "cpu family"); !v.empty() && cpu.family == 0) cpu.family = std::stoi(v);
    if (const auto v = field(line, "model name"); !v.empty() && cpu.model_name.empty()) cpu.model_name = v;
    if (const auto v = field(line, "flags"); !v.empty() && cpu.flags.empty()) cpu.flags = v;
    if (const auto v = field(line, "cpu MHz"); !v.empty() && mhz.empty()) mhz = v;
    if (const auto v = field(line, "physical id"); !v.empty()) physical = v;
    if (const auto v = field(line, "core id"); !v.empty()) cores.insert({physical, v});
  }
  // Without core ids (some VMs, other architectures) every listed processor counts as a core.
  cpu.cores = cores.empty() ? processors : static_cast<int64_t>(cores.size());
  if (cpufreq_max_khz && *cpufreq_max_khz > 0) {
    cpu.clock_hz = *cpufreq_max_khz * kHzPerKHz;
    cpu.clock_source = "cpufreq's cpuinfo_max_freq (the highest clock the kernel knows)";
  } else if (!mhz.empty()) {
    cpu.clock_hz = std::stod(mhz) * kHzPerMHz;
    cpu.clock_source =
        "/proc/cpuinfo's 'cpu MHz' (no cpufreq here: a VM reports the host's nominal clock, not its boost)";
  }
  return cpu;
}

CpuDescription describe_this_cpu() {
  const std::string max_khz = read_or_empty("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  std::optional<double> khz;
  if (!max_khz.empty()) khz = std::stod(max_khz);
  CpuDescription cpu = parse_cpuinfo(read_or_empty("/proc/cpuinfo"), khz);
  if (cpu.cores <= 0) cpu.cores = std::thread::hardware_concurrency();
  // A peak is at least what the core runs at: without cpufreq (a VM) the listed clock is the host's nominal one,
  // and even cpufreq's maximum can be passed; the measured clock is taken where it is higher or nothing is known.
  static const double measured = measured_clock_hz();
  if (measured > cpu.clock_hz) {
    cpu.clock_source = "measured: a chain of dependent integer adds (one cycle each) ran at " +
                       fixed(measured / 1e9, 3) + " GHz" +
                       (cpu.clock_hz > 0 ? ", above the " + fixed(cpu.clock_hz / 1e9, 3) + " GHz of " + cpu.clock_source
                                         : std::string(", no clock listed"));
    cpu.clock_hz = measured;
  }
  return cpu;
}

TheoreticalPeak cpu_peak(const CpuDescription& cpu, PeakFormat format) {
  const bool avx512 = has_flag(cpu.flags, "avx512f"), fma = has_flag(cpu.flags, "fma");
  const bool half_width = avx512 && cpu.vendor == "AuthenticAMD" && cpu.family == kAmdHalfWidthAvx512Family;
  int64_t lanes = avx512 && !half_width ? kAvx512Lanes : (fma || avx512) ? kAvx2Lanes : kSseLanes;
  std::string isa = avx512 ? (half_width ? "AVX-512 on a 256-bit datapath" : "AVX-512") : fma ? "AVX2 + FMA" : "SSE";
  const double flop_per_lane = fma || avx512 ? kFlopPerFma : 1;  // no FMA: a multiply or an add per lane
  if (format == PeakFormat::bf16 && has_flag(cpu.flags, "avx512_bf16")) {
    lanes *= 2;
    isa += ", avx512_bf16 (a bf16 pair per float32 lane)";
  } else if (format == PeakFormat::fp16 && has_flag(cpu.flags, "avx512_fp16")) {
    lanes *= 2;
    isa += ", avx512_fp16";
  }
  TheoreticalPeak peak;
  const bool amx = (format == PeakFormat::bf16 && has_flag(cpu.flags, "amx_bf16")) ||
                   (format == PeakFormat::fp16 && has_flag(cpu.flags, "amx_fp16"));
  if (amx) {  // the tile unit outruns the vector units: the core's peak is its
    peak.flops = static_cast<double>(cpu.cores) * cpu.clock_hz * kAmxFlopPerCycle;
    peak.what = std::to_string(cpu.cores) + " cores x " + fixed(cpu.clock_hz / 1e9, 3) + " GHz x " +
                fixed(kAmxFlopPerCycle, 0) + " FLOP per cycle = " + fixed(peak.flops / 1e9, 1) +
                " GFLOP/s (AMX tiles, Intel's figure for a 4th-generation Xeon core)";
    isa = "AMX";
  } else {
    peak.flops = static_cast<double>(cpu.cores) * cpu.clock_hz * kFmaUnitsPerCore * lanes * flop_per_lane;
    peak.what = std::to_string(cpu.cores) + " cores x " + fixed(cpu.clock_hz / 1e9, 3) + " GHz x " +
                std::to_string(kFmaUnitsPerCore) + " FMA units x " + std::to_string(lanes) + " lanes x " +
                fixed(flop_per_lane, 0) + " FLOP = " + fixed(peak.flops / 1e9, 1) + " GFLOP/s (" + isa + ")";
  }
  peak.inputs = {{"cores", cpu.cores},
                 {"clock_hz", cpu.clock_hz},
                 {"clock_source", cpu.clock_source},
                 {"fma_units_per_core", kFmaUnitsPerCore},
                 {"lanes", lanes},
                 {"flop_per_lane_per_cycle", flop_per_lane},
                 {"vector_isa", isa},
                 {"cpu", cpu.model_name},
                 {"vendor", cpu.vendor},
                 {"family", cpu.family}};
  return peak;
}

TheoreticalPeak datasheet_peak(const std::string& gpu_name, PeakFormat format) {
  TheoreticalPeak peak;
  for (const auto& row : datasheets()) {
    if (gpu_name.find(row.match) == std::string::npos) continue;
    const double tflops = format == PeakFormat::fp32 ? row.fp32 : format == PeakFormat::tf32 ? row.tf32 : row.bf16;
    peak.flops = tflops * kTera;
    peak.what = "NVIDIA datasheet, " + std::string(row.name) + ": " + fixed(tflops, 1) + " TFLOP/s dense";
    peak.inputs = {{"gpu", gpu_name}, {"datasheet_row", row.name}, {"tflops_dense", tflops}};
    return peak;
  }
  peak.what = "no datasheet number here for '" + gpu_name + "'";
  peak.inputs = {{"gpu", gpu_name}};
  return peak;
}

TheoreticalPeak theoretical_peak(const c10::Device& device, PeakFormat format) {
  if (device.is_cpu()) return cpu_peak(describe_this_cpu(), format);
  std::string name = device.str();
#ifdef SPEEDLABS_TORCH_HAS_CUDA
  cudaDeviceProp properties{};
  if (device.is_cuda() && cudaGetDeviceProperties(&properties, device.has_index() ? device.index() : 0) == 0) {
    name = properties.name;
  }
#endif
  return datasheet_peak(name, format);
}

double model_flops_per_token(double parameters, int64_t layers, int64_t n_embd, int64_t seq) {
  constexpr double kParameterFlops = 6, kAttentionFlops = 12;
  return kParameterFlops * parameters +
         kAttentionFlops * static_cast<double>(layers) * static_cast<double>(n_embd) * static_cast<double>(seq);
}

double gpt_model_flops_per_step(const gpt::GPTConfig& model_config, int64_t batch, int64_t seq) {
  torch::NoGradGuard no_grad;
  gpt::GPT model(model_config);
  double parameters = 0;
  for (const auto& item : model->named_parameters()) {
    if (item.key().find("wpe") == std::string::npos) parameters += static_cast<double>(item.value().numel());
  }
  return model_flops_per_token(parameters, model_config.n_layer, model_config.n_embd, seq) *
         static_cast<double>(batch * seq);
}

double mfu(double flops_per_step, double step_seconds, double peak_flops) {
  return peak_flops > 0 && step_seconds > 0 ? flops_per_step / step_seconds / peak_flops : 0;
}

}  // namespace speedlabs
