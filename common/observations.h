/// @file observations.h
/// @brief What a lab observed: each claim, what was measured, what was expected, and the verdict.
///
/// An Observation travels unchanged from the experiment to the printed table, the --json file, the
/// exit code and the tests, so the program, the tests and the docs cannot disagree about a lab's claims.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "common/files.h"

namespace speedlabs {

/// The outcome of one observation on this run.
enum class Verdict { holds, fails, not_applicable };

/// "holds", "fails", "not_applicable".
std::string to_string(Verdict v);

/// One claim a lab checks on this machine.
struct Observation {
  std::string id;          ///< stable identifier; tests, docs and other tools rely on it
  std::string claim;       ///< the claim in words
  nlohmann::json measured; ///< what this run measured (a number, a string, a small object)
  std::string expected;    ///< the expected value or the rule the measurement is held against
  Verdict verdict = Verdict::fails;  ///< what this run found
  bool must_hold = true;   ///< when true, a `fails` verdict makes the program exit 1
  std::string reason;      ///< why the observation is not_applicable (e.g. "no CUDA GPU")
};

/// The observations of one run of a lab.
class Report {
 public:
  /// @param lab     the lab's folder name, e.g. "01_vectorize"
  /// @param device  the device description, e.g. "cpu (2 threads)"
  Report(std::string lab, std::string device);

  /// Adds an observation; throws std::logic_error if its id is already taken.
  Observation& add(Observation observation);

  /// Adds an observation whose verdict is holds when @p holds is true, fails otherwise.
  Observation& check(const std::string& id, const std::string& claim, nlohmann::json measured,
                     const std::string& expected, bool holds, bool must_hold = true);

  /// Adds an observation that could not be made on this run, with the reason (e.g. no GPU).
  Observation& not_applicable(const std::string& id, const std::string& claim, const std::string& expected,
                              const std::string& reason, bool must_hold = true);

  /// True when an observation with this id has been added.
  bool has(const std::string& id) const;

  /// The observation with this id; throws std::out_of_range if there is none.
  const Observation& at(const std::string& id) const;

  /// Every observation, in the order added.
  const std::vector<Observation>& observations() const { return observations_; }
  /// The lab's folder name.
  const std::string& lab() const { return lab_; }
  /// The device description.
  const std::string& device() const { return device_; }

  /// {"lab", "device", "libtorch", "observations": [...]}
  nlohmann::json to_json() const;

  /// A readable table, one row per observation, the claim under its row.
  void print_table(std::ostream& out) const;

  /// 0 when every must-hold observation holds (or is not applicable), 1 otherwise.
  int exit_code() const;

 private:
  std::string lab_;
  std::string device_;
  std::vector<Observation> observations_;
};

}  // namespace speedlabs
