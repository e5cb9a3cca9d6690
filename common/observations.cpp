#include "common/observations.h"

#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "common/device.h"
#include "common/errors.h"
#include "common/named_enum.h"

namespace speedlabs {

std::string to_string(Verdict v) {
  static const EnumNames<Verdict> names(
      "verdict", {{Verdict::holds, "holds"}, {Verdict::fails, "fails"}, {Verdict::not_applicable, "not_applicable"}});
  return names.name(v);
}

Report::Report(std::string lab, std::string device) : lab_(std::move(lab)), device_(std::move(device)) {}

Observation& Report::add(Observation observation) {
  if (has(observation.id)) throw std::logic_error("observation id '" + observation.id + "' reported twice");
  observations_.push_back(std::move(observation));
  return observations_.back();
}

Observation& Report::check(const std::string& id, const std::string& claim, nlohmann::json measured,
                           const std::string& expected, bool holds, bool must_hold) {
  return add({id, claim, std::move(measured), expected, holds ? Verdict::holds : Verdict::fails, must_hold, ""});
}

Observation& Report::not_applicable(const std::string& id, const std::string& claim, const std::string& expected,
                                    const std::string& reason, bool must_hold) {
  return add({id, claim, nullptr, expected, Verdict::not_applicable, must_hold, reason});
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
    nlohmann::json item{{"id", o.id},           {"claim", o.claim},
                        {"measured", o.measured}, {"expected", o.expected},
                        {"verdict", to_string(o.verdict)}, {"must_hold", o.must_hold}};
    if (o.verdict == Verdict::not_applicable) item["reason"] = o.reason;
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

}  // namespace

void Report::print_table(std::ostream& out) const {
  out << "\nObservations for " << lab_ << " on " << device_ << " (libtorch " << libtorch_version() << ")\n";
  out << std::left << std::setw(16) << "verdict" << std::setw(6) << "must" << std::setw(38) << "id"
      << std::setw(30) << "measured"
      << "expected\n";
  out << std::string(112, '-') << "\n";
  for (const auto& o : observations_) {
    out << std::left << std::setw(16) << to_string(o.verdict) << std::setw(6) << (o.must_hold ? "yes" : "no")
        << std::setw(38) << o.id << std::setw(30) << clip(measured_text(o.measured), 29) << o.expected << "\n";
    out << "    " << o.claim;
    if (o.verdict == Verdict::not_applicable) out << " [" << o.reason << "]";
    out << "\n";
  }
  const int code = exit_code();
  out << "\n" << (code == 0 ? "All must-hold observations hold." : "A must-hold observation FAILS.") << "\n";
}

int Report::exit_code() const {
  for (const auto& o : observations_) {
    if (o.must_hold && o.verdict == Verdict::fails) return kExitObservationFailed;
  }
  return kExitOk;
}

}  // namespace speedlabs
