#include "common/observations.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/named_enum.h"
#include "common/table.h"

namespace speedlabs {

std::string to_string(Verdict v) {
  static const EnumNames<Verdict> names("verdict", {{Verdict::holds, "holds"},
                                                    {Verdict::fails, "fails"},
                                                    {Verdict::not_applicable, "not_applicable"},
                                                    {Verdict::inconclusive, "inconclusive"}});
  return names.name(v);
}

namespace {

std::string number(double value) {
  std::ostringstream s;
  s << std::setprecision(4) << value;
  return s.str();
}

std::string percent(double share) { return std::isfinite(share) ? fixed(100 * share, 0) + "%" : "unbounded"; }

}  // namespace

std::string load_effect_name(LoadEffect load) {
  static const EnumNames<LoadEffect> names("load effect", {{LoadEffect::unknown, "unknown"},
                                                           {LoadEffect::ratio, "ratio"},
                                                           {LoadEffect::time, "time"},
                                                           {LoadEffect::rate, "rate"}});
  return names.name(load);
}

nlohmann::json Evidence::to_json() const {
  nlohmann::json limits = nlohmann::json::array();
  for (const auto& b : bounds) {
    limits.push_back({{"what", b.what}, {"value", b.value}, {"low", b.low}, {"high", b.high}, {"broken", b.broken()}});
  }
  return {{"value", value.to_json()}, {"contention", contention.to_json()}, {"bounds", limits},
          {"max_spread", max_spread}, {"min_samples", min_samples},         {"load", load_effect_name(load)}};
}

namespace {

// The interval [low, high] the value can have had on a quiet machine, given that other programs can have
// slowed a CPU-bound side by up to @p slowdown (1: not at all).
void widen_for_load(LoadEffect load, double slowdown, double& low, double& high) {
  if (slowdown <= 1) return;
  if (load == LoadEffect::ratio || load == LoadEffect::time) low /= slowdown;  // the slowed side sped up
  if (load == LoadEffect::ratio || load == LoadEffect::rate) high *= slowdown;
}

// "the machine was busy (...): one CPU-bound side can have run up to 2.1x slower", or unbounded.
std::string load_text(const Contention& contention) {
  const double slowdown = contention.worst_slowdown();
  return "the machine was busy: " + contention.why_busy() +
         (std::isfinite(slowdown) ? "; a CPU-bound side can have run up to " + fixed(slowdown, 2) + "x slower"
                                  : "; no bound on how much slower a side ran");
}

// Points of the range a band rule (a <= x <= b) is probed at: it can fail at both ends and the median while the
// range runs across it. Ranges from real runs span at most a few hundred times their band, so 4096 points
// land inside any band they cross.
constexpr int kRangeProbes = 4096;

bool holds_anywhere_inside(const std::function<bool(double)>& rule, double low, double high) {
  for (int i = 1; i < kRangeProbes; ++i) {
    if (rule(low + (high - low) * i / kRangeProbes)) return true;
  }
  return false;
}

}  // namespace

Evidence ratio_evidence(const Interleaved& timing, size_t i, size_t j) {
  return {timing.ratio(i, j), timing.contention, LoadEffect::ratio};
}

Verdict decide_verdict(const Evidence& evidence, const std::function<bool(double)>& rule, std::string& reason) {
  const Summary& v = evidence.value;
  for (const auto& b : evidence.bounds) {
    if (b.broken()) {
      reason = b.what + " = " + number(b.value) + " lies outside [" + number(b.low) + ", " + number(b.high) +
               "], which no real run can give: the measurement failed";
      return Verdict::inconclusive;
    }
  }
  if (v.count < evidence.min_samples) {
    reason = std::to_string(v.count) + " sample(s), fewer than the " + std::to_string(evidence.min_samples) +
             " a spread needs";
    return Verdict::inconclusive;
  }
  const bool busy = evidence.contention.busy();
  if (busy && evidence.load == LoadEffect::unknown) {
    reason = "the machine was busy: " + evidence.contention.why_busy();
    return Verdict::inconclusive;
  }
  // The middle half of the samples decides; when they scatter, only what every sample agrees on does.
  const bool scattered = !(v.spread() <= evidence.max_spread);
  double low = scattered ? v.min : v.q1, high = scattered ? v.max : v.q3;
  widen_for_load(evidence.load, evidence.contention.worst_slowdown(), low, high);
  const bool at_low = rule(low), at_middle = rule(v.median), at_high = rule(high);
  if (at_low && at_middle && at_high) return Verdict::holds;
  if (!at_low && !at_middle && !at_high && !holds_anywhere_inside(rule, low, high)) return Verdict::fails;
  const std::string range = "[" + number(low) + ", " + number(high) + "]";
  if (busy) {
    reason = load_text(evidence.contention) + ", so the value lies anywhere in " + range + ", across the expectation";
  } else if (scattered) {
    reason = "the samples scatter by " + percent(v.spread()) + " (interquartile range over median, more than " +
             percent(evidence.max_spread) + ") and range over " + range + ", across the expectation";
  } else {
    reason = "the expectation lies within the measured spread " + range;
  }
  return Verdict::inconclusive;
}

Report::Report(std::string lab, std::string device) : lab_(std::move(lab)), device_(std::move(device)) {}

Observation& Report::add(Observation observation) {
  if (has(observation.id)) throw std::logic_error("observation id '" + observation.id + "' reported twice");
  observations_.push_back(std::move(observation));
  return observations_.back();
}

Observation& Report::check(const std::string& id, const std::string& claim, nlohmann::json measured,
                           const std::string& expected, bool holds, bool must_hold) {
  return add(
      {id, claim, std::move(measured), expected, holds ? Verdict::holds : Verdict::fails, must_hold, "", nullptr});
}

Observation& Report::decide(const std::string& id, const std::string& claim, nlohmann::json measured,
                            const std::string& expected, const Evidence& evidence,
                            const std::function<bool(double)>& rule, bool must_hold) {
  std::string reason;
  const Verdict verdict = decide_verdict(evidence, rule, reason);
  return add({id, claim, std::move(measured), expected, verdict, must_hold, reason, evidence.to_json()});
}

Observation& Report::not_applicable(const std::string& id, const std::string& claim, const std::string& expected,
                                    const std::string& reason, bool must_hold) {
  return add({id, claim, nullptr, expected, Verdict::not_applicable, must_hold, reason, nullptr});
}

bool Report::has(const std::string& id) const {
  for (const auto& o : observations_) {
    if (o.id == id) return true;
  }
  return false;
}

const Observation& Report::at(const std::string& id) const {
  for (const auto& o : observations_) {
    if (o.id == id) return o;
  }
  throw std::out_of_range("no observation with id '" + id + "' in lab " + lab_);
}

nlohmann::json Report::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& o : observations_) {
    nlohmann::json item{{"id", o.id},
                        {"claim", o.claim},
                        {"measured", o.measured},
                        {"expected", o.expected},
                        {"verdict", to_string(o.verdict)},
                        {"must_hold", o.must_hold}};
    if (o.verdict == Verdict::not_applicable || o.verdict == Verdict::inconclusive) item["reason"] = o.reason;
    if (!o.evidence.is_null()) item["evidence"] = o.evidence;
    list.push_back(std::move(item));
  }
  return {{"lab", lab_}, {"device", device_}, {"libtorch", libtorch_version()}, {"observations", list}};
}

namespace {

std::string measured_text(const nlohmann::json& measured) {
  if (measured.is_null()) return "-";
  if (measured.is_string()) return measured.get<std::string>();
  if (measured.is_number_float()) {
    std::ostringstream s;
    s << std::setprecision(6) << measured.get<double>();
    return s.str();
  }
  return measured.dump();
}

std::string clip(const std::string& text, size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

// "could not decide" reads better than the JSON's one word.
std::string verdict_text(Verdict v) { return v == Verdict::inconclusive ? "could not decide" : to_string(v); }

// A timed observation's spread and sample count, e.g. "±4% n=12"; "" for an untimed one.
std::string spread_text(const nlohmann::json& evidence) {
  if (evidence.is_null()) return "";
  const auto& value = evidence.at("value");
  const double spread = value.at("spread").is_number() ? value.at("spread").get<double>() : INFINITY;
  return "±" + percent(spread / 2) + " n=" + std::to_string(value.at("count").get<int>());
}

}  // namespace

void Report::print_table(std::ostream& out) const {
  out << "\nObservations for " << lab_ << " on " << device_ << " (libtorch " << libtorch_version() << ")\n";
  Table table("");
  table.left("verdict", 18).left("must", 6).left("id", 38).left("measured", 30).left("spread", 13);
  table.left("expected", 0).underline(125);
  table.print_header(out);
  for (const auto& o : observations_) {
    table.print_row(out, {verdict_text(o.verdict), o.must_hold ? "yes" : "no", o.id,
                          clip(measured_text(o.measured), 29), spread_text(o.evidence), o.expected});
    out << "    " << o.claim;
    if (!o.reason.empty()) out << " [" << o.reason << "]";
    out << "\n";
  }
  switch (exit_code()) {
    case kExitOk:
      out << "\nAll must-hold observations hold.\n";
      break;
    case kExitUndecided:
      out << "\nNo must-hold observation fails, but this run could not decide one (reason under its row): "
             "rerun on a quieter machine.\n";
      break;
    default:
      out << "\nA must-hold observation FAILS.\n";
  }
}

int Report::exit_code() const {
  bool undecided = false;
  for (const auto& o : observations_) {
    if (o.must_hold && o.verdict == Verdict::fails) return kExitObservationFailed;
    undecided = undecided || (o.must_hold && o.verdict == Verdict::inconclusive);
  }
  return undecided ? kExitUndecided : kExitOk;
}

}  // namespace speedlabs
