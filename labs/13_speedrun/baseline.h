/// @file labs/13_speedrun/baseline.h
/// @brief The speedrun's fixed baseline: plain float32 AdamW at a constant learning rate, attention written out.
/// It is the lab's, not the student's: every score is a time measured against it in the same run.
#pragma once
#include <memory>

#include "exercise.h"

namespace lab13 {

/// The baseline trainer (the recipe of the stub in labs/13_speedrun/exercise.cpp, kept here unchanged).
std::unique_ptr<Trainer> make_baseline_trainer();

}  // namespace lab13
