/// @file observations.h
/// @brief What a lab observed: each claim, what was measured, what was expected, and the verdict.
///
/// An Observation travels unchanged from the experiment to the printed table, the --json file, the
/// exit code and the tests, so the program, the tests and the docs cannot disagree about a lab's claims.
///
/// A timed claim is decided by Report::decide() from Evidence: the samples of the quantity the claim is
/// about, how busy the machine was, and the physical bounds every derived number must respect. When the
/// samples scatter, the machine was busy or a number is impossible, the verdict is `inconclusive`: this run
/// could not decide, and says why; it never says holds or fails from noise.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/contention.h"
#include "common/files.h"
#include "common/timer.h"

namespace speedlabs {

/// The outcome of one observation on this run.
enum class Verdict { holds, fails, not_applicable, inconclusive };

/// "holds", "fails", "not_applicable", "inconclusive".
std::string to_string(Verdict v);

/// A physical limit on a derived number: a share within [0, 1], a point at most 100% of its roof, a peak
/// at least a rate just achieved. A value outside it (or NaN) means the measurement failed, never that a
/// claim held or failed.
struct Bound {
  std::string what;  ///< the number in words, e.g. "share of the loading time hidden"
  double value = 0;  ///< what this run gave
  double low = 0;    ///< the smallest possible value, less the stated tolerance
  double high = 0;   ///< the largest possible value, plus the stated tolerance
  /// True when value lies outside [low, high] or is not a number.
  bool broken() const { return !(value >= low && value <= high); }
};

/// How other programs on the machine can have moved the value a claim is decided on. A busy run still
/// decides when the verdict is the same at the worst the load could have done (Contention::worst_slowdown).
enum class LoadEffect {
  unknown,  ///< no bound is known: a busy machine cannot decide
  ratio,    ///< a ratio of two CPU-bound sides timed interleaved: the load may have slowed either side alone
  time,     ///< a CPU-bound duration: the load can only have lengthened it
  rate,     ///< a CPU-bound rate (work per second): the load can only have lowered it
};

/// "unknown", "ratio", "time", "rate".
std::string load_effect_name(LoadEffect load);

/// What a timed verdict rests on. It has no default: whoever measures the value names how a busy machine can
/// have moved it, so a busy run decides every claim its load cannot flip, and LoadEffect::unknown is a choice
/// written where the value is made, never a field forgotten.
struct Evidence {
  /// @param value      the samples of the quantity the claim is decided on
  /// @param contention how busy the machine was while they were measured
  /// @param load       how that load can have moved the value
  Evidence(Summary value, Contention contention, LoadEffect load)
      : value(std::move(value)), contention(std::move(contention)), load(load) {}

  Summary value;              ///< the samples of the quantity the claim is decided on (e.g. per-round ratios)
  Contention contention;      ///< how busy the machine was while they were measured
  LoadEffect load;            ///< how a busy machine can have moved the value
  std::vector<Bound> bounds;  ///< limits every number derived from them must respect
  double max_spread = 0.25;   ///< above this relative interquartile range only every sample together decides
  int min_samples = 3;        ///< fewer samples have no spread worth the name
  /// {"value": summary, "contention": ..., "bounds": [...], "max_spread", "min_samples", "load"}
  nlohmann::json to_json() const;
};

/// The evidence of side @p i's time over side @p j's in @p timing, taken round by round (Interleaved::ratio): its
/// samples, the machine's reading, and the load model of every interleaved ratio (LoadEffect::ratio: another
/// program may have slowed either side alone, so a busy run still decides a margin its load cannot cover).
/// Bounds are the caller's.
/// @param timing the interleaved timing
/// @param i      the numerator's side
/// @param j      the denominator's side
Evidence ratio_evidence(const Interleaved& timing, size_t i, size_t j);

/// The verdict @p evidence supports for a claim stated as @p rule on the value: inconclusive (with @p reason
/// set) when there are too few samples or a bound is broken; otherwise holds when the rule holds at the
/// median and at both ends of the range the quiet value can lie in, fails when it fails across the whole range
/// (a band rule, a <= x <= b, is probed inside it too), and inconclusive when the expectation lies within it. The range
/// is the quartiles, or every sample (min to max) when the spread is above its limit; on a busy machine it is widened
/// by how far the load can have moved the value (Evidence::load, Contention::worst_slowdown), and a busy run whose load
/// effect is unknown cannot decide. So a 142x against a 3x rule decides beside another program; a 3.1x does not.
Verdict decide_verdict(const Evidence& evidence, const std::function<bool(double)>& rule, std::string& reason);

/// One claim a lab checks on this machine.
struct Observation {
  std::string id;                    ///< stable identifier; tests, docs and other tools rely on it
  std::string claim;                 ///< the claim in words
  nlohmann::json measured;           ///< what this run measured (a number, a string, a small object)
  std::string expected;              ///< the expected value or the rule the measurement is held against
  Verdict verdict = Verdict::fails;  ///< what this run found
  bool must_hold = true;             ///< when true, a `fails` verdict makes the program exit 1
  std::string reason;                ///< why the observation is not_applicable (e.g. "no CUDA GPU") or inconclusive
  nlohmann::json evidence;           ///< a timed observation's Evidence (null for an untimed one)
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

  /// Adds a timed observation whose verdict decide_verdict() gives from @p evidence and @p rule; the
  /// evidence travels with it into the table and the JSON.
  Observation& decide(const std::string& id, const std::string& claim, nlohmann::json measured,
                      const std::string& expected, const Evidence& evidence, const std::function<bool(double)>& rule,
                      bool must_hold = true);

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

  /// 1 when a must-hold observation fails; else 5 when one could not be decided on this run; else 0.
  int exit_code() const;

 private:
  std::string lab_;
  std::string device_;
  std::vector<Observation> observations_;
};

}  // namespace speedlabs
