/// @file predictions.h
/// @brief A student's predictions (labs/NN_topic/predictions.toml) beside what the run measured.
///
/// Each lab asks a few questions whose answers it measures: per question the observation id and the field
/// of its `measured` value, the question in words, the unit, the student's answer (empty until they fill it)
/// and how close counts as right (the tolerance). The lab's table (Report::print_table's caller, run_lab)
/// shows each filled answer beside the measurement, marked close or off and by how much, and the --json output
/// carries the same comparison (predictions_section). These are the only rules: ./lab check and ./lab grade read
/// the section, written for a saved run by the `predictions` program (common/predictions_main.cpp).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "common/observations.h"

namespace speedlabs {

/// How close an answer must be to count. Exactly one kind per question.
struct Tolerance {
  /// exact: equal; relative: within a share of the measurement; absolute: within that much of it in the unit;
  /// factor: within that many times, either way; side_of: on the same side of the pivot.
  enum class Kind { exact, relative, absolute, factor, side_of };
  Kind kind = Kind::exact;  ///< which rule
  double value = 0;  ///< relative: a share of the measurement; absolute: in the unit; factor: x; side_of: the pivot
};

/// One question of a lab's predictions.toml.
struct Prediction {
  std::string id;          ///< the observation it predicts
  std::string field;       ///< a path inside its `measured` ("" for the value itself; "a.b", "list.0")
  std::string question;    ///< the question in words
  std::string unit;        ///< the answer's unit
  std::string why;         ///< an optional line explaining the answer: shown after the run, never giving it away
  nlohmann::json answer;   ///< the student's answer: null while blank; a number, a string or a bool
  Tolerance tolerance;     ///< how close counts
  int line = 0;            ///< where the question starts in the file
  bool in_answers = true;  ///< false when the answers' file lacks the question (answer_questions)
};

/// A predictions file, read.
struct PredictionFile {
  std::string path;                   ///< where it was read from
  std::vector<Prediction> questions;  ///< in the file's order
  std::string error;                  ///< "" when the file read well; else what is wrong and on which line
};

/// Reads @p path with toml++. A missing file gives no questions and no error; a malformed one gives the
/// error (naming the line) and no questions, never an exception.
PredictionFile read_predictions(const std::string& path);

/// The official questions of lab @p folder ("01_vectorize"): `SOURCE/labs/FOLDER/predictions.toml`.
std::string predictions_path(const std::string& folder);

/// The official questions @p questions (a lab's predictions.toml as the course ships it: their text, unit,
/// why and tolerance) answered from @p answers (a student's file: only its answers count, matched by id and
/// field; a question it lacks stays blank, one it adds or repeats is ignored). The error of the first
/// malformed file, with no questions.
PredictionFile answer_questions(const PredictionFile& questions, const PredictionFile& answers);

/// Lab @p folder's official questions answered from $SPEEDLABS_PREDICTIONS when set, else from the official
/// file itself (a student's checkout holds one file: the questions, their answers filled in).
PredictionFile lab_predictions(const std::string& folder);

/// How one answer compares with the run.
struct Comparison {
  /// blank: no answer yet; close: within the tolerance; off: outside it; unmeasured: nothing to compare with
  /// (not measured here, or a measurement the run could not decide).
  enum class Status { blank, close, off, unmeasured };
  Status status = Status::blank;  ///< the outcome
  nlohmann::json measured;        ///< the measured value (null when unmeasured)
  std::string detail;             ///< "off by 23%", "other side of 1", why it is unmeasured
};

/// Compares @p p's answer with its observation in @p run, a lab's --json report (Report::to_json); a null
/// @p run (no run to compare with) leaves every filled answer unmeasured.
Comparison compare_prediction(const Prediction& p, const nlohmann::json& run);

/// The name of a tolerance's kind: "exact", "relative", "absolute", "factor" or "side_of".
std::string to_string(Tolerance::Kind kind);

/// The comparison of @p file's questions with @p run (as compare_prediction takes it), the "predictions"
/// section of a lab's --json output: {"file", "error", "questions": [{"id", "field", "name", "question", "unit",
/// "why", "answer", "measured", "rule": {"kind", "value"}, "verdict", "detail", "yours", "measured_text",
/// "machine_dependent"}]}. verdict: "ok" (within the rule), "off", "blank" (not answered; detail "not in
/// your file" when the answers' file lacks it) or "unmeasured" (detail: why). yours and measured_text are
/// the values as the table shows them (a word answer without the unit); machine_dependent: a band around,
/// or a side of, the machine's own measurement (factor, side_of).
nlohmann::json predictions_section(const PredictionFile& file, const nlohmann::json& run);

/// @p report's --json output: Report::to_json with the "predictions" section of @p file compared with it.
nlohmann::json report_with_predictions(const Report& report, const PredictionFile& file);

/// The value at @p field inside @p measured, or null when there is none.
nlohmann::json measured_field(const nlohmann::json& measured, const std::string& field);

/// Compares a filled @p answer with @p measured under @p tolerance (close or off, with by how much). A side_of
/// question also takes the words it offers: "above", "more", "higher" or "greater" for the side above its pivot,
/// "below", "less", "lower" or "fewer" for the other (compare_side).
Comparison compare_values(const nlohmann::json& answer, const nlohmann::json& measured, const Tolerance& tolerance);

/// A word @p answer to a side_of question compared with @p measured: close when it names the measurement's side
/// of @p pivot; off, saying which words count, when it is none of them.
Comparison compare_side(const nlohmann::json& answer, double measured, double pivot);

/// The predictions beside the measurements, one row each ("your prediction" and "measured"); nothing when
/// the file has no question; the error line when it is malformed.
void print_predictions(std::ostream& out, const PredictionFile& file, const Report& report);

}  // namespace speedlabs
