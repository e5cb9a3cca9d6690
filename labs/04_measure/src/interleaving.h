/// @file labs/04_measure/src/interleaving.h
/// @brief Lab 04's demonstration of why a comparison is timed in rounds side by side: a load that arrives
/// halfway through skews the one-after-the-other comparison and not the interleaved one.
#pragma once
#include "common/observations.h"
#include "experiment.h"

namespace lab04 {

/// Times one op against itself with a neighbour thread that starts halfway, one side after the other and
/// then interleaved (lab04::measure_pair(), the exercise); records interleaving_resists_a_changing_load.
void observe_interleaving(const Config& config, speedlabs::Report& report);

}  // namespace lab04
