/// @file common/peaks.h
/// @brief The theoretical peak a model FLOP utilisation (MFU) divides by: on a CPU, cores x clock x FMA units
/// x vector lanes x 2 FLOP, every input read from this machine and shown; on a GPU, the datasheet's number,
/// named. Beside it, the MFU formula: 6 N FLOPs per token plus the attention term.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/gpt_config.h"
#include "common/precision.h"

namespace speedlabs {

/// The number format of a step's matmuls, for the peak it is held against.
enum class PeakFormat { fp32, tf32, bf16, fp16 };

/// The format of the matmuls a training step in @p precision runs (fp32 -> fp32, tf32 -> tf32, ...).
/// @param precision the step's mode
PeakFormat format_of(Precision precision);

/// "fp32", "tf32", "bf16", "fp16".
/// @param format the format
std::string to_string(PeakFormat format);

/// What /proc/cpuinfo and /sys say about this CPU: the inputs of its theoretical peak.
struct CpuDescription {
  std::string vendor;        ///< vendor_id, e.g. "AuthenticAMD"
  int family = 0;            ///< "cpu family" (AMD: 25 Zen 3/4, 26 Zen 5)
  std::string model_name;    ///< "model name"
  std::string flags;         ///< the "flags" line, space separated
  int64_t cores = 0;         ///< physical cores: distinct (physical id, core id) pairs
  double clock_hz = 0;       ///< the clock the peak assumes
  std::string clock_source;  ///< where the clock came from, in words
};

/// Reads a /proc/cpuinfo text and, when present, cpufreq's cpuinfo_max_freq (kHz). Pure: a test hands it
/// any text. The clock is cpufreq's maximum when given (the highest clock the kernel knows this CPU runs at),
/// else the first "cpu MHz" (a VM usually has no cpufreq and reports the host's nominal clock there).
/// @param cpuinfo          the text of /proc/cpuinfo
/// @param cpufreq_max_khz  /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq, when readable
CpuDescription parse_cpuinfo(const std::string& cpuinfo, std::optional<double> cpufreq_max_khz);

/// This core's clock, measured: chains of 64 dependent register-to-register integer adds (one cycle each on
/// every x86-64 and AArch64 core) timed, the fastest of a few timings, in cycles per second; 0 on other CPUs.
double measured_clock_hz();

/// This machine's description (parse_cpuinfo of the files themselves), its clock raised to measured_clock_hz()
/// where that is higher (a VM lists its host's nominal clock; a core may run above cpufreq's maximum), the
/// source saying so.
CpuDescription describe_this_cpu();

/// A theoretical peak and what it is made of.
struct TheoreticalPeak {
  double flops = 0;       ///< FLOP/s; 0 when unknown (then the text says why)
  std::string what;       ///< the formula with its numbers, or the datasheet entry, in words
  nlohmann::json inputs;  ///< every input of the formula, for --json
};

/// The CPU's peak in @p format: cores x clock x FMA units per core x lanes x 2 FLOP per FMA. Lanes come from
/// the widest FMA vector in the flags (avx512f: 16 float32 lanes, fma: 8, neither: 4 with no FMA, 1 FLOP each);
/// AMD family 25 (Zen 4) runs a 512-bit op as two 256-bit halves, so it counts 8. Two FMA units per core:
/// what every x86 core with AVX2 since Haswell and Zen 2 has (the flags cannot say; shown as an input).
/// bf16 doubles the lanes where avx512_bf16 gives a bf16 pair dot product per float32 lane, fp16 where
/// avx512_fp16 exists; tf32 has no CPU instruction (float32's peak). Where the flags list AMX for the format
/// (amx_bf16, amx_fp16), the tile unit's 1,024 FLOP per cycle per core (Intel's figure for a 4th-generation
/// Xeon) replaces the vector units'. Pure.
/// @param cpu    the description (parse_cpuinfo)
/// @param format the matmuls' format
TheoreticalPeak cpu_peak(const CpuDescription& cpu, PeakFormat format);

/// The dense (no sparsity) tensor-core number of NVIDIA's datasheet for a GPU named @p gpu_name (A100, H100
/// SXM or PCIe, H200, L4), fp32 without tensor cores; flops 0 with the reason for any other GPU.
/// @param gpu_name the device's name, e.g. "NVIDIA H100 80GB HBM3"
/// @param format   the matmuls' format
TheoreticalPeak datasheet_peak(const std::string& gpu_name, PeakFormat format);

/// The theoretical peak of @p device: cpu_peak() of this CPU, or datasheet_peak() of this GPU.
/// @param device the device the step runs on
/// @param format the matmuls' format
TheoreticalPeak theoretical_peak(const c10::Device& device, PeakFormat format);

/// A GPT's model FLOPs per token of a training step: 6 N (forward 2 N, backward 4 N: one multiply and one add
/// per parameter per token, twice as many backward) plus attention's 12 L C T (QK^T and the weighted sum of V,
/// 2 T C each per token per layer forward, x3 with backward; the full T x T, causal mask or not, as PaLM counts).
/// @param parameters N, every parameter the step's matmuls use (the tied embedding counts once)
/// @param layers     L
/// @param n_embd     C
/// @param seq        T
double model_flops_per_token(double parameters, int64_t layers, int64_t n_embd, int64_t seq);

/// Model FLOPs of one training step of @p model_config at B=@p batch, T=@p seq: model_flops_per_token() with N
/// every parameter but the position embedding (a lookup, no matmul; as nanoGPT's estimate_mfu counts), x B x T.
/// @param model_config the model (built once to count its parameters)
/// @param batch        B
/// @param seq          T
double gpt_model_flops_per_step(const gpt::GPTConfig& model_config, int64_t batch, int64_t seq);

/// Model FLOP utilisation: @p flops_per_step / @p step_seconds / @p peak_flops (0 when the peak is unknown).
/// @param flops_per_step model FLOPs of one step (model_flops_per_token x tokens)
/// @param step_seconds   the step's time
/// @param peak_flops     the peak divided by: measured or theoretical
double mfu(double flops_per_step, double step_seconds, double peak_flops);

}  // namespace speedlabs
