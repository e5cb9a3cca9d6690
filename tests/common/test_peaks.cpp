// The theoretical peak (common/peaks): /proc/cpuinfo read from a given text, the peak from given flags and
// clock, the datasheet rows, and the MFU formula.
#include "common/peaks.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using speedlabs::PeakFormat;

// Two cores of one socket, as a KVM guest lists them (no cpufreq), flags cut to what the peak reads.
const std::string kTwoCoreVm =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.122\n"
    "physical id\t: 0\ncore id\t\t: 0\nflags\t\t: fpu sse sse2 fma avx avx2 avx512f avx512_bf16\n\n"
    "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.122\n"
    "physical id\t: 0\ncore id\t\t: 1\nflags\t\t: fpu sse sse2 fma avx avx2 avx512f avx512_bf16\n";

TEST(Peaks, ParsesCoresClockAndFlagsFromCpuinfo) {
  const auto cpu = speedlabs::parse_cpuinfo(kTwoCoreVm, std::nullopt);
  EXPECT_EQ(cpu.vendor, "AuthenticAMD");
  EXPECT_EQ(cpu.family, 26);
  EXPECT_EQ(cpu.model_name, "AMD EPYC");
  EXPECT_EQ(cpu.cores, 2);
  EXPECT_DOUBLE_EQ(cpu.clock_hz, 2596.122e6);
  EXPECT_NE(cpu.clock_source.find("cpu MHz"), std::string::npos) << cpu.clock_source;
  // cpufreq's maximum, when there is one, wins over the current clock of "cpu MHz".
  const auto with_cpufreq = speedlabs::parse_cpuinfo(kTwoCoreVm, 3700000.0);
  EXPECT_DOUBLE_EQ(with_cpufreq.clock_hz, 3.7e9);
  EXPECT_NE(with_cpufreq.clock_source.find("cpufreq"), std::string::npos);
  // Two hyperthreads of one core count once.
  const std::string smt = "processor\t: 0\ncore id\t\t: 0\nprocessor\t: 1\ncore id\t\t: 0\n";
  EXPECT_EQ(speedlabs::parse_cpuinfo(smt, std::nullopt).cores, 1);
}

TEST(Peaks, CpuPeakIsCoresTimesClockTimesFmaUnitsTimesLanesTimesTwo) {
  speedlabs::CpuDescription cpu;
  cpu.vendor = "AuthenticAMD";
  cpu.family = 26;
  cpu.cores = 2;
  cpu.clock_hz = 2.5e9;
  cpu.flags = "sse sse2 fma avx avx2 avx512f avx512_bf16";
  const auto fp32 = speedlabs::cpu_peak(cpu, PeakFormat::fp32);
  EXPECT_DOUBLE_EQ(fp32.flops, 2 * 2.5e9 * 2 * 16 * 2);  // 320 GFLOP/s
  EXPECT_EQ(fp32.inputs.at("lanes").get<int64_t>(), 16);
  EXPECT_NE(fp32.what.find("2 cores x 2.500 GHz x 2 FMA units x 16 lanes x 2 FLOP"), std::string::npos) << fp32.what;
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::tf32).flops, fp32.flops) << "no TF32 on a CPU";
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::bf16).flops, 2 * fp32.flops) << "avx512_bf16's pairs";
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::fp16).flops, fp32.flops) << "no avx512_fp16";
  // Zen 4 (family 25) runs 512-bit ops on a 256-bit datapath: 8 lanes, as with AVX2.
  cpu.family = 25;
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::fp32).flops, 2 * 2.5e9 * 2 * 8 * 2);
  cpu.flags = "sse sse2 fma avx avx2";
  cpu.family = 23;
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::fp32).flops, 2 * 2.5e9 * 2 * 8 * 2);
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::bf16).flops, 2 * 2.5e9 * 2 * 8 * 2) << "no avx512_bf16";
  cpu.flags = "sse sse2";  // no FMA: a multiply or an add per lane per cycle
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::fp32).flops, 2 * 2.5e9 * 2 * 4 * 1);
}

TEST(Peaks, AmxTilesSetTheBf16PeakWhereTheFlagsListThem) {
  speedlabs::CpuDescription cpu;
  cpu.vendor = "GenuineIntel";
  cpu.cores = 2;
  cpu.clock_hz = 2.1e9;
  cpu.flags = "sse sse2 fma avx avx2 avx512f avx512_bf16 amx_bf16 amx_tile";
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::bf16).flops, 2 * 2.1e9 * 1024);  // Intel's AMX figure
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::fp32).flops, 2 * 2.1e9 * 2 * 16 * 2) << "no float32 tiles";
  EXPECT_DOUBLE_EQ(speedlabs::cpu_peak(cpu, PeakFormat::fp16).flops, 2 * 2.1e9 * 2 * 16 * 2) << "no amx_fp16";
}

TEST(Peaks, TheClockIsMeasuredAndThePeakIsAtLeastIt) {
#if defined(__x86_64__) || defined(__aarch64__)
  const double hz = speedlabs::measured_clock_hz();
  // One add a cycle: a clock between 0.3 and 7 GHz, or the chain did not time what it says (an optimised-away
  // loop gives far more, a chain of slower instructions far less).
  EXPECT_GT(hz, 0.3e9);
  EXPECT_LT(hz, 7e9);
  const auto cpu = speedlabs::describe_this_cpu();
  EXPECT_GE(cpu.clock_hz, 0.9 * hz) << cpu.clock_source;  // the peak's clock is never below the measured one
#else
  GTEST_SKIP() << "the clock's chain of adds is written for x86-64 and AArch64 only";
#endif
}

TEST(Peaks, ThisCpuHasAPositivePeakWithEveryInputShown) {
  const auto peak = speedlabs::theoretical_peak(c10::Device(c10::kCPU), PeakFormat::fp32);
  EXPECT_GT(peak.flops, 0) << peak.what;
  for (const auto* key : {"cores", "clock_hz", "clock_source", "fma_units_per_core", "lanes", "vector_isa"}) {
    EXPECT_TRUE(peak.inputs.contains(key)) << key;
  }
}

TEST(Peaks, DatasheetNamesTheGpuAndItsDenseNumber) {
  const auto h100 = speedlabs::datasheet_peak("NVIDIA H100 80GB HBM3", PeakFormat::bf16);
  EXPECT_DOUBLE_EQ(h100.flops, 989.4e12);
  EXPECT_NE(h100.what.find("H100 SXM"), std::string::npos) << h100.what;
  EXPECT_DOUBLE_EQ(speedlabs::datasheet_peak("NVIDIA H100 PCIe", PeakFormat::bf16).flops, 756e12);
  EXPECT_DOUBLE_EQ(speedlabs::datasheet_peak("NVIDIA A100-SXM4-80GB", PeakFormat::tf32).flops, 156e12);
  EXPECT_DOUBLE_EQ(speedlabs::datasheet_peak("NVIDIA A100-SXM4-80GB", PeakFormat::fp32).flops, 19.5e12);
  const auto unknown = speedlabs::datasheet_peak("Some GPU", PeakFormat::bf16);
  EXPECT_EQ(unknown.flops, 0);
  EXPECT_NE(unknown.what.find("Some GPU"), std::string::npos);
}

TEST(Peaks, MfuIsSixNPlusAttentionOverTimeOverPeak) {
  // GPT-2 small at T=1024: 6 x 124M + 12 x 12 x 768 x 1024 per token.
  const double per_token = speedlabs::model_flops_per_token(124e6, 12, 768, 1024);
  EXPECT_DOUBLE_EQ(per_token, 6 * 124e6 + 12.0 * 12 * 768 * 1024);
  // 16 x 1024 tokens in 0.1 s against a 1 PFLOP/s peak.
  const double flops = per_token * 16 * 1024;
  EXPECT_DOUBLE_EQ(speedlabs::mfu(flops, 0.1, 1e15), flops / 0.1 / 1e15);
  EXPECT_EQ(speedlabs::mfu(flops, 0.1, 0), 0) << "an unknown peak gives no MFU";
  EXPECT_EQ(speedlabs::mfu(flops, 0, 1e15), 0);
  // The tiny model at B=4, T=64: N = 3,316,544 (every parameter but the position embedding), L = 2, C = 64.
  EXPECT_DOUBLE_EQ(speedlabs::gpt_model_flops_per_step(speedlabs::gpt::GPTConfig::tiny(), 4, 64),
                   (6.0 * 3316544 + 12.0 * 2 * 64 * 64) * 4 * 64);
}

}  // namespace
