/// @file labs/06_compile_ahead/src/ladder_report.h
/// @brief What the ladder observed: the markdown table of a shape, the observations (losses, peers, the GPU
/// goals) and the result files.
#pragma once
#include <string>

#include "common/observations.h"
#include "experiment.h"

namespace lab06 {

/// The rungs and peers of @p shape as a markdown table, then the ratios the GPU goals are about.
std::string shape_table(const LadderResult& ladder, const Shape& shape);

/// Records rung_RUNG_BxT, initial_losses_BxT, losses_track_fp32_BxT, python_peers_BxT,
/// python_eager_vs_cpp_fp32_BxT and python_compile_tracks_cpp_BxT for @p shape.
/// @param config       the run (its Python, for the peers' observation)
/// @param ladder       every rung and peer measured
/// @param shape        the shape observed
/// @param peer_failure why the peers of this shape did not run ("" when they did)
/// @param report       receives the observations
void observe_shape(const Config& config, const LadderResult& ladder, const Shape& shape,
                   const std::string& peer_failure, speedlabs::Report& report);

/// Records the GPU goals goal_* (reported, never must-hold; judged only on a CUDA GPU).
void observe_goals(const LadderResult& ladder, const c10::Device& device, speedlabs::Report& report);

/// Writes ladder.json, ladder.md and ladder.dat (gnuplot data) into config.results_dir, each atomically.
void write_results(const Config& config, const LadderResult& ladder, const std::string& markdown,
                   const c10::Device& device);

}  // namespace lab06
