/// @file tests/support/checked.h
/// @brief The outside check of a lab's exercises: outputs on the grader's inputs, compared outside the
/// student's process (./lab grade; docs/grading.md, "Checked outside the student's process").
///
/// A lab's tests/labNN/checked.cpp defines speedlabs::checked::exercises(): for each exercise, the named
/// outputs it gives on inputs drawn from a seed. The program checked_labNN (tests/support/checked_main.cpp)
/// is built twice from the same cases. In the graded tree, linked with the student's exercise, it runs one
/// exercise on the seed the grader drew at grade time, inside the sandbox, and writes the outputs to a pipe.
/// In the reference tree, linked with solutions/, it draws the same inputs from the same seed outside the
/// sandbox, computes the reference outputs and compares them with what came through the pipe. The verdict
/// is the reference program's: no line the student's process prints, no file it writes, decides it, and a
/// fresh seed every grade means no remembered answer fits.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace speedlabs::checked {

/// How close an output must be to the reference's: |got - ref| <= atol + rtol * |ref| per element.
/// Both 0: bit-exact (NaN matches any NaN; -0 and +0 differ).
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// An exercise's outputs, in a fixed order: a name and a CPU tensor each.
using Outputs = std::vector<std::pair<std::string, torch::Tensor>>;

/// What a check compares for an exercise with many right answers (a trainer): from the outputs and a generator
/// seeded as the outputs' was (so it can draw the same inputs again), the judged facts, computed outside the
/// student's process on both sides' outputs.
using Judge = std::function<Outputs(at::Generator&, const Outputs&)>;

/// One checked exercise of a lab.
struct Exercise {
  std::string name;                                ///< the exercise function, as tests/labNN/points.tsv names it
  std::function<Outputs(at::Generator&)> outputs;  ///< draws its inputs from the generator, calls the exercise
  Tolerance tolerance;                             ///< per dtype; checked.cpp says why beside each
  /// Unset: the outputs are compared with the reference's. Set: judge(student's) with judge(reference's), where
  /// the outputs themselves may differ (weights trained another way); a student's outputs it cannot read (a
  /// missing weight, a wrong shape) must come out as a judged fact that differs, never as an exception.
  Judge judge;
};

/// The lab's checked exercises (defined by tests/labNN/checked.cpp).
std::vector<Exercise> exercises();

/// What a timed process runs (checked_labNN time): the student's exercise, the best this machine does, or
/// neither, only drawing the inputs (the time that takes is taken off both sides' times).
enum class Side { exercise, best, inputs_only };

/// A speed exercise timed outside the student's process (./lab grade; docs/grading.md, "Speed timed outside").
/// Each side runs in a process of its own; the grader times it from the moment it hands the process the seed
/// to the moment the last output arrives, so nothing the student's code does to its own clock counts, and
/// the inputs, drawn from that seed, do not exist before the timing starts, so no answer can be ready early.
struct Timed {
  std::string name;  ///< its line in tests/labNN/points.tsv (sum_squares_unrolled_speed)
  int64_t calls;     ///< calls per timed process, each on inputs of its own
  double full;       ///< the speed fraction (best's time over the exercise's) that earns full points
  double zero;       ///< the speed fraction that earns none
  /// One call: draws its inputs from the generator, then calls @p side (Side::inputs_only: no call, no outputs).
  std::function<Outputs(at::Generator&, Side)> call;
  Tolerance tolerance;  ///< the exercise's outputs against the best's on the same inputs; checked.cpp says why
  /// What every side makes before it says it is ready, outside the timing (the inputs' buffers, their pages
  /// faulted in); unset: nothing. Throws std::exception saying why the exercise cannot be timed here.
  std::function<void()> prepare;
  /// The CPUs each timed process is given (a job's workers, one each); the grader gives every side the same ones.
  int cpus = 1;
};

/// The lab's timed speed exercises (tests/labNN/checked.cpp, where the lab has one; none elsewhere).
std::vector<Timed> timed();

/// One side of a race (Raced::start): each call takes the side's next segment of steps (the first call sets it up
/// first) and returns its weights as they stand.
using Segment = std::function<Outputs()>;

/// A speed exercise raced to a target outside the student's process (./lab grade; docs/grading.md, "Raced
/// outside"): a trainer, whose speed is its time to a judged loss. Both sides run at once, each in a process of
/// its own on the same one CPU; the grader lets one run a segment while the other is stopped (SIGSTOP, its
/// whole sandbox), the order turning every round, times each segment on its own clock, and judges the weights
/// each segment ends with in the reference's process while both are stopped. The score is the best's time to
/// the target over the exercise's.
struct Raced {
  std::string name;       ///< its line in tests/labNN/points.tsv (make_trainer_speed)
  double full;            ///< the score that earns full points
  double zero;            ///< the score that earns none
  double target;          ///< the judged loss a side must reach (at or under)
  int64_t segment_steps;  ///< the steps of one segment: the weights are judged after each
  int64_t step_cap;       ///< a side that has not reached the target after this many steps has failed
  /// Draws the task from the generator and starts @p side (Side::exercise or Side::best) on it.
  std::function<Segment(at::Generator&, Side)> start;
  /// The judged loss of a side's weights on the task the generator draws (its held-out part); NaN when a weight
  /// is not finite; throws std::exception saying why when they are not the model's (a missing or unknown weight,
  /// a wrong shape).
  std::function<double(at::Generator&, const Outputs&)> loss;
  /// What every process makes before it says it is ready (the data, loaded once); unset: nothing. Throws
  /// std::exception saying why the exercise cannot be raced here.
  std::function<void()> prepare;
};

/// The lab's raced speed exercises (tests/labNN/checked.cpp, where the lab has one; none elsewhere).
std::vector<Raced> raced();

/// A whole number in [low, high] drawn from @p generator (input sizes, tile widths).
int64_t draw_int(at::Generator& generator, int64_t low, int64_t high);

/// Attention's q, k and v, float32 N(0, 1), of one shape drawn from @p generator: (B, heads, T, head_size) with
/// B in 1..2, heads in 1..@p max_heads, T in 1..96 (every remainder of a tile) and head_size in 4..32.
std::vector<torch::Tensor> draw_attention_inputs(at::Generator& generator, int64_t max_heads);

/// Every tensor of @p tensors, detached and flattened, joined into one (a model's weights as one output).
torch::Tensor joined(const std::vector<torch::Tensor>& tensors);

}  // namespace speedlabs::checked
