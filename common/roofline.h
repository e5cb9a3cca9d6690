/// @file common/roofline.h
/// @brief The roofline of this machine, measured: peak matmul FLOP/s and memory bandwidth, and the
/// training step's main ops placed under it by their arithmetic intensity and achieved rate.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpt_config.h"
#include "common/observations.h"
#include "common/peaks.h"
#include "common/timer.h"

namespace speedlabs {

/// The two roofs, as measured here.
struct MeasuredPeaks {
  double fp32_flops = 0;   ///< n^3 float32 matmul: 2 n^3 / time
  double bf16_flops = 0;   ///< the same in bfloat16 (0 when not measured)
  double copy_bytes = 0;   ///< bytes/s of dst.copy_(src): 2 arrays' bytes per element
  double triad_bytes = 0;  ///< bytes/s of a = b + s * c: 3 arrays' bytes per element
  /// The memory roof: the faster of the copy and the triad.
  double bandwidth() const { return copy_bytes > triad_bytes ? copy_bytes : triad_bytes; }
  /// The intensity (FLOP per byte) where the float32 roof meets the memory roof.
  double ridge() const { return bandwidth() > 0 ? fp32_flops / bandwidth() : 0; }
};

/// One op of the step, run alone at the step's shapes.
struct OpPoint {
  std::string id;            ///< "matmul_mlp", "gelu", ... (the observation is roofline_<id>)
  std::string what;          ///< the op and its shape, in words
  bool elementwise = false;  ///< a few FLOPs per element read and written (no data reuse)
  double flops = 0;          ///< floating-point operations of one call (the convention is in the .cpp)
  double bytes = 0;          ///< the fewest bytes one call must read and write
  double ms = 0;             ///< median time of one call
  /// FLOP per byte.
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
  /// FLOP/s achieved.
  double achieved_flops() const { return ms > 0 ? flops / (ms / 1e3) : 0; }
  /// Bytes/s achieved (of the fewest bytes).
  double achieved_bytes() const { return ms > 0 ? bytes / (ms / 1e3) : 0; }
};

/// The sides of the roofline's interleaved timing, in order: the roofs, then the step's ops.
enum RoofSide : size_t { kFp32Matmul, kBf16Matmul, kCopy, kTriad, kRoofSides };

/// This machine's roofs and where the step's ops sit under them, all timed in the same rounds.
struct Roofline {
  MeasuredPeaks peaks;          ///< each roof from its best round (a peak is a maximum)
  std::vector<OpPoint> points;  ///< each op from its median round
  Interleaved timings;          ///< every round: the roofs (RoofSide order), then the ops (points order)
  double matmul_flops = 0;      ///< FLOPs of one roof matmul
  /// Per round: the largest share of that round's float32 matmul rate that any elementwise op reached.
  Summary elementwise_peak_share() const;
};

/// Times the roofs (an @p matmul_size cubed matmul in float32 and bfloat16, a copy and a triad of
/// @p stream_mib MiB arrays, far larger than the caches) and the step's main ops at the step's shapes
/// (float32, no autograd: the MLP's first matmul, the lm_head matmul, GELU, layer norm, the log-softmax of
/// the logits and one AdamW update of all the model's parameters), all interleaved, round after round.
/// @param model_config the model's size
/// @param batch        B
/// @param seq          T
/// @param device       where to run
/// @param matmul_size  n of the roof's n x n x n matmul
/// @param stream_mib   MiB per array of the streams
/// @param timing       warm-up and measured rounds
Roofline measure_roofline(const gpt::GPTConfig& model_config, int64_t batch, int64_t seq, const c10::Device& device,
                          int64_t matmul_size, int64_t stream_mib, const TimingOptions& timing);

/// One matmul format's measured rate.
struct MatmulRate {
  double flops = 0;           ///< the best repeat's FLOP/s (a peak is a maximum)
  double median_flops = 0;    ///< the median repeat's, beside it: how typical the best was
  double flops_per_call = 0;  ///< 2 n^3
  TimingStats time;           ///< the repeats
};

/// Times an @p n cubed matmul in @p format on @p device (tf32: float32 under torch's "high" matmul precision,
/// TF32 tensor cores where there are any; bf16 and fp16 in that dtype). Throws UsageError for n < 1.
/// @param device where to run
/// @param format the inputs' format
/// @param n      the matrices' size
/// @param timing warm-up and repeats
MatmulRate measure_matmul_rate(const c10::Device& device, PeakFormat format, int64_t n, const TimingOptions& timing);

/// The performance an op of @p intensity can reach under the float32 roofs: min(peak, intensity x bandwidth).
/// @param peaks     the measured roofs
/// @param intensity FLOP per byte
double attainable_flops(const MeasuredPeaks& peaks, double intensity);

/// Prints the roofs and, for each op, its intensity, rate and share of the roof.
/// @param peaks  the measured roofs
/// @param points the ops
void print_roofline(const MeasuredPeaks& peaks, const std::vector<OpPoint>& points);

/// Records peak_matmul_flops, peak_bandwidth, roofline_<op> for each op and elementwise_ops_are_memory_bound.
/// @param roofline measure_roofline()'s result
/// @param report   receives the observations
void observe_roofline(const Roofline& roofline, Report& report);

}  // namespace speedlabs
