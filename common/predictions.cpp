#include "common/predictions.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>

#include "common/build_paths.h"
#include "common/format.h"
#include "common/table.h"

// Debian's toml++ 3.3 installs <toml++/toml.h>; upstream's single header is <toml++/toml.hpp>.
#if __has_include(<toml++/toml.h>)
#include <toml++/toml.h>
#else
#include <toml++/toml.hpp>
#endif

namespace speedlabs {
namespace {

// Significant digits an answer or a measurement is shown with: enough that 1000.5 does not read as 1000.
constexpr int kShownDigits = 6;
// A predictions file is a few questions: anything far larger is not one, and is not read to its end.
constexpr size_t kMaxFileBytes = 1 << 20;

const char* const kToleranceKeys[] = {"relative", "absolute", "factor", "side_of"};

std::string at_line(const std::string& path, int line) { return path + ":" + std::to_string(line) + ": "; }

std::string text_of(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) {
    std::ostringstream s;
    s << std::setprecision(kShownDigits) << value.get<double>();
    return s.str();
  }
  return value.dump();
}

// A number from a measured or predicted value: JSON numbers, "inf", "-inf", "nan" as the labs write them, and a
// number in quotes ("1000", " 1.0005e3 "): compared as the number it is, never as its shortened text.
std::optional<double> number_of(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    if (s == "inf" || s == "+inf" || s == "infinity") return INFINITY;
    if (s == "-inf" || s == "-infinity") return -INFINITY;
    if (s == "nan") return NAN;
    if (s.empty() || s.find_first_not_of("0123456789+-.e") != std::string::npos) return std::nullopt;
    char* end = nullptr;
    const double x = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size() && std::isfinite(x)) return x;
  }
  return std::nullopt;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The words a side_of question offers ("above or below 1?", "more or less than 10x?"), for the side above its
// pivot and the side at or below it.
const char* const kAboveWords[] = {"above", "more", "higher", "greater"};
const char* const kBelowWords[] = {"below", "less", "lower", "fewer"};

// true: an answer word for above the pivot; false: for below; nullopt: not one of the words.
std::optional<bool> side_word(const nlohmann::json& answer) {
  if (!answer.is_string()) return std::nullopt;
  const std::string word = lower(answer.get<std::string>());
  for (const char* w : kAboveWords)
    if (word == w) return true;
  for (const char* w : kBelowWords)
    if (word == w) return false;
  return std::nullopt;
}

std::string share(double x) {
  std::ostringstream s;
  s << std::setprecision(2) << 100 * x << "%";
  return s.str();
}

std::string times(double x) {
  std::ostringstream s;
  s << std::setprecision(2) << std::fixed << x << "x";
  return s.str();
}

// An answer as the table shows it: a word answer ("more") carries no unit, a number does.
std::string shown_answer(const Prediction& p) {
  return text_of(p.answer) + (number_of(p.answer) && !p.unit.empty() ? " " + p.unit : "");
}

// JSON has no inf or nan: they travel as the words the labs write them with.
nlohmann::json json_value(const nlohmann::json& value) {
  const auto x = value.is_number() ? number_of(value) : std::nullopt;
  return x && !std::isfinite(*x) ? nlohmann::json(text_of(value)) : value;
}

std::string shown_measured(const Comparison& c, const std::string& unit) {
  return c.measured.is_null() ? "-" : text_of(c.measured) + (unit.empty() ? "" : " " + unit);
}

Prediction read_question(const toml::table& q, const std::string& path, int line) {
  Prediction p;
  p.line = line;
  for (const auto& [key, node] : q) {
    const std::string k(key.str());
    const bool known = k == "id" || k == "field" || k == "question" || k == "unit" || k == "why" || k == "answer" ||
                       std::find(std::begin(kToleranceKeys), std::end(kToleranceKeys), k) != std::end(kToleranceKeys);
    if (!known) {
      throw std::runtime_error(at_line(path, static_cast<int>(node.source().begin.line)) + "unknown key '" + k +
                               "' (a question has id, field, question, unit, answer, why and one tolerance: "
                               "relative, absolute, factor or side_of)");
    }
  }
  auto text = [&](const char* key, bool required) {
    const auto* node = q.get(key);
    if (node == nullptr) {
      if (required) throw std::runtime_error(at_line(path, line) + "the question has no '" + key + "'");
      return std::string();
    }
    if (!node->is_string()) {
      throw std::runtime_error(at_line(path, static_cast<int>(node->source().begin.line)) + "'" + key +
                               "' must be a string in quotes");
    }
    return std::string(**node->as_string());
  };
  p.id = text("id", true);
  p.field = text("field", false);
  p.question = text("question", true);
  p.unit = text("unit", true);
  p.why = text("why", false);
  const auto* answer = q.get("answer");
  if (answer == nullptr)
    throw std::runtime_error(at_line(path, line) + "the question has no 'answer' (answer = \"\" while blank)");
  const int answer_line = static_cast<int>(answer->source().begin.line);
  if (answer->is_string()) {
    const std::string s(**answer->as_string());
    if (!s.empty()) p.answer = s;
  } else if (answer->is_integer()) {
    p.answer = static_cast<double>(**answer->as_integer());
  } else if (answer->is_floating_point()) {
    p.answer = **answer->as_floating_point();
  } else if (answer->is_boolean()) {
    p.answer = **answer->as_boolean();
  } else {
    throw std::runtime_error(at_line(path, answer_line) + "'answer' must be a number, a string or true/false");
  }
  int tolerances = 0;
  for (size_t k = 0; k < std::size(kToleranceKeys); ++k) {
    const auto* node = q.get(kToleranceKeys[k]);
    if (node == nullptr) continue;
    ++tolerances;
    const auto value = node->value<double>();
    if (!value || !std::isfinite(*value) || (k != 3 && *value < 0) || (k == 2 && *value < 1)) {
      throw std::runtime_error(at_line(path, static_cast<int>(node->source().begin.line)) + "'" + kToleranceKeys[k] +
                               "' must be a finite number" +
                               (k == 2   ? " of at least 1"
                                : k != 3 ? " of at least 0"
                                         : ""));
    }
    p.tolerance = {static_cast<Tolerance::Kind>(k + 1), *value};
  }
  if (tolerances > 1) {
    throw std::runtime_error(at_line(path, line) + "give one tolerance (relative, absolute, factor or side_of), not " +
                             std::to_string(tolerances));
  }
  return p;
}

std::string not_a_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const auto status = fs::status(path, error);  // through a symlink: what reading would open
  if (error) return path + ": cannot be read (" + error.message() + ")";
  if (fs::is_directory(status)) return path + " is a folder, not a predictions file";
  if (!fs::is_regular_file(status)) {
    return path + " is not a regular file (" + (fs::is_fifo(status) ? "a FIFO" : "a device or socket") +
           "): a predictions file is a TOML file";
  }
  const auto size = fs::file_size(path, error);
  if (error) return path + ": cannot be read (" + error.message() + ")";
  if (size > kMaxFileBytes) {
    return path + " holds " + std::to_string(size) + " bytes: a predictions file is at most " +
           std::to_string(kMaxFileBytes) + " bytes";
  }
  return "";
}

}  // namespace

PredictionFile read_predictions(const std::string& path) {
  PredictionFile file;
  file.path = path;
  std::error_code error;
  if (!std::filesystem::exists(path, error) && !std::filesystem::is_symlink(path, error)) return file;
  file.error = not_a_file(path);
  if (!file.error.empty()) return file;
  try {
    std::ifstream in(path, std::ios::binary);
    std::string text(kMaxFileBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes)
      throw std::runtime_error(path + ": a predictions file is at most " + std::to_string(kMaxFileBytes) + " bytes");
    const toml::table table = toml::parse(text, path);
    for (const auto& [key, node] : table) {
      if (key.str() != "question") {
        throw std::runtime_error(at_line(path, static_cast<int>(node.source().begin.line)) + "unknown key '" +
                                 std::string(key.str()) + "' (the file holds [[question]] tables)");
      }
    }
    const auto* questions = table.get("question");
    if (questions == nullptr) return file;
    if (!questions->is_array_of_tables()) {
      throw std::runtime_error(at_line(path, static_cast<int>(questions->source().begin.line)) +
                               "'question' must be [[question]] tables");
    }
    for (const auto& node : *questions->as_array()) {
      file.questions.push_back(read_question(*node.as_table(), path, static_cast<int>(node.source().begin.line)));
    }
  } catch (const toml::parse_error& e) {
    file.questions.clear();
    file.error = at_line(path, static_cast<int>(e.source().begin.line)) + std::string(e.description());
  } catch (const std::runtime_error& e) {
    file.questions.clear();
    file.error = e.what();
  }
  return file;
}

std::string predictions_path(const std::string& folder) {
  return source_dir() + "/labs/" + folder + "/predictions.toml";
}

PredictionFile answer_questions(const PredictionFile& questions, const PredictionFile& answers) {
  PredictionFile file = questions;
  file.path = answers.path;
  if (file.error.empty()) file.error = answers.error;
  if (!file.error.empty()) {
    file.questions.clear();
    return file;
  }
  for (auto& q : file.questions) {
    const auto given = std::find_if(answers.questions.begin(), answers.questions.end(),
                                    [&](const Prediction& a) { return a.id == q.id && a.field == q.field; });
    q.in_answers = given != answers.questions.end();
    q.answer = q.in_answers ? given->answer : nlohmann::json();
  }
  return file;
}

PredictionFile lab_predictions(const std::string& folder) {
  const std::string official = predictions_path(folder);
  const char* given = std::getenv("SPEEDLABS_PREDICTIONS");
  const std::string answers = given != nullptr && *given != '\0' ? given : official;
  return answer_questions(read_predictions(official), read_predictions(answers));
}

nlohmann::json measured_field(const nlohmann::json& measured, const std::string& field) {
  const nlohmann::json* value = &measured;
  std::stringstream keys(field);
  std::string key;
  while (std::getline(keys, key, '.')) {
    if (key.empty()) continue;
    if (value->is_object() && value->contains(key)) {
      value = &(*value)[key];
    } else if (value->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(key) < value->size()) {
      value = &(*value)[std::stoul(key)];
    } else {
      return nullptr;
    }
  }
  return *value;
}

Comparison compare_side(const nlohmann::json& answer, double measured, double pivot) {
  Comparison c;
  c.measured = measured;
  c.status = Comparison::Status::off;
  const auto above = side_word(answer);
  if (!above) {
    c.detail = "answer a number, or above or below (more or less) " + text_of(pivot);
    return c;
  }
  const bool measured_above = measured > pivot;
  if (*above == measured_above) c.status = Comparison::Status::close;
  c.detail = std::string(*above == measured_above ? "same" : "other") + " side of " + text_of(pivot) + ": measured " +
             (measured_above ? "above" : "at or below") + " it";
  return c;
}

Comparison compare_values(const nlohmann::json& answer, const nlohmann::json& measured, const Tolerance& tolerance) {
  Comparison c;
  c.measured = measured;
  if (answer.is_null()) return c;
  if (measured.is_null() || measured.is_object() || measured.is_array()) {
    c.status = Comparison::Status::unmeasured;
    c.detail = "no single measured value to compare with";
    return c;
  }
  const auto a = number_of(answer), m = number_of(measured);
  if (tolerance.kind == Tolerance::Kind::side_of && m && !a) return compare_side(answer, *m, tolerance.value);
  auto verdict = [&](bool close, std::string detail) {
    c.status = close ? Comparison::Status::close : Comparison::Status::off;
    c.detail = std::move(detail);
    return c;
  };
  if (tolerance.kind == Tolerance::Kind::exact || !a || !m) {
    if (answer.is_boolean() || measured.is_boolean()) {
      return verdict(answer == measured, answer == measured ? "exact" : "measured " + text_of(measured));
    }
    if (a && m) {
      const bool same = *a == *m || (std::isnan(*a) && std::isnan(*m));
      return verdict(same, same ? "exact" : "off by " + text_of(std::abs(*a - *m)));
    }
    const bool same = lower(text_of(answer)) == lower(text_of(measured));
    return verdict(same, same ? "exact" : "measured " + text_of(measured));
  }
  if (*a == *m) return verdict(true, "exact");
  const double gap = std::abs(*a - *m);
  switch (tolerance.kind) {
    case Tolerance::Kind::relative: {
      const double off = *m == 0 ? INFINITY : gap / std::abs(*m);
      return verdict(off <= tolerance.value, (off <= tolerance.value ? "within " : "off by ") + share(off) +
                                                 " (tolerance " + share(tolerance.value) + ")");
    }
    case Tolerance::Kind::absolute:
      return verdict(gap <= tolerance.value, (gap <= tolerance.value ? "within " : "off by ") + text_of(gap) +
                                                 " (tolerance " + text_of(tolerance.value) + ")");
    case Tolerance::Kind::factor: {
      const double ratio = (*a > 0 && *m > 0) ? std::max(*a / *m, *m / *a) : INFINITY;
      return verdict(ratio <= tolerance.value, (ratio <= tolerance.value ? "within " : "off by ") + times(ratio) +
                                                   " (tolerance " + times(tolerance.value) + ")");
    }
    case Tolerance::Kind::side_of: {
      const bool same = (*a > tolerance.value) == (*m > tolerance.value);
      return verdict(same, std::string(same ? "same" : "other") + " side of " + text_of(tolerance.value));
    }
    case Tolerance::Kind::exact:
      break;
  }
  return c;
}

Comparison compare_prediction(const Prediction& p, const nlohmann::json& run) {
  if (p.answer.is_null()) return {};
  if (run.is_null()) return {Comparison::Status::unmeasured, nullptr, "no run of this lab to compare with"};
  const auto& observations = run.value("observations", nlohmann::json::array());
  const auto o = std::find_if(observations.begin(), observations.end(),
                              [&](const nlohmann::json& each) { return each.value("id", "") == p.id; });
  if (o == observations.end()) return {Comparison::Status::unmeasured, nullptr, "this run has no observation " + p.id};
  const std::string verdict = o->value("verdict", ""), reason = o->value("reason", "");
  if (verdict == to_string(Verdict::not_applicable))
    return {Comparison::Status::unmeasured, nullptr, "not measured here: " + reason};
  // A run that could not decide an observation does not grade predictions of it: its numbers may be a busy
  // machine's (a roof measured under load, a ratio that scattered). Compare on a quieter run.
  if (verdict == to_string(Verdict::inconclusive)) {
    return {Comparison::Status::unmeasured, nullptr, "this run could not decide " + p.id + ": " + reason};
  }
  const auto value = measured_field(o->value("measured", nlohmann::json()), p.field);
  if (value.is_null()) return {Comparison::Status::unmeasured, nullptr, p.id + " has no field '" + p.field + "'"};
  return compare_values(p.answer, value, p.tolerance);
}

std::string to_string(Tolerance::Kind kind) {
  return kind == Tolerance::Kind::exact ? "exact" : kToleranceKeys[static_cast<int>(kind) - 1];
}

nlohmann::json predictions_section(const PredictionFile& file, const nlohmann::json& run) {
  static const char* const kVerdicts[] = {"blank", "ok", "off", "unmeasured"};  // in Comparison::Status's order
  nlohmann::json questions = nlohmann::json::array();
  for (const auto& p : file.questions) {
    const auto c = compare_prediction(p, run);
    const auto kind = p.tolerance.kind;
    questions.push_back({{"id", p.id},
                         {"field", p.field},
                         {"name", p.id + (p.field.empty() ? "" : "." + p.field)},
                         {"question", p.question},
                         {"unit", p.unit},
                         {"why", p.why},
                         {"answer", json_value(p.answer)},
                         {"measured", json_value(c.measured)},
                         {"rule", {{"kind", to_string(kind)}, {"value", p.tolerance.value}}},
                         {"verdict", kVerdicts[static_cast<int>(c.status)]},
                         {"detail", p.in_answers ? c.detail : "not in your file"},
                         {"yours", shown_answer(p)},
                         {"measured_text", shown_measured(c, p.unit)},
                         {"machine_dependent", kind == Tolerance::Kind::factor || kind == Tolerance::Kind::side_of}});
  }
  return {{"file", file.path}, {"error", file.error}, {"questions", questions}};
}

nlohmann::json report_with_predictions(const Report& report, const PredictionFile& file) {
  nlohmann::json run = report.to_json();
  run["predictions"] = predictions_section(file, run);
  return run;
}

void print_predictions(std::ostream& out, const PredictionFile& file, const Report& report) {
  if (!file.error.empty()) {
    out << "\nYour predictions could not be read: " << file.error << "\n";
    return;
  }
  if (file.questions.empty()) return;
  const nlohmann::json run = report.to_json();
  int blank = 0;
  out << "\nYour predictions (" << file.path << ")\n";
  Table table("");
  table.left("id.field", 48).left("your prediction", 20).left("measured", 20).left("", 0).underline(125);
  table.print_header(out);
  for (const auto& p : file.questions) {
    const auto c = compare_prediction(p, run);
    const std::string name = p.id + (p.field.empty() ? "" : "." + p.field);
    if (c.status == Comparison::Status::blank) {
      ++blank;
      continue;
    }
    const char* mark = c.status == Comparison::Status::close ? "close"
                       : c.status == Comparison::Status::off ? "OFF"
                                                             : "-";
    table.print_row(out, {name, shown_answer(p).substr(0, 19), shown_measured(c, p.unit).substr(0, 19),
                          std::string(mark) + ": " + c.detail});
    // The hint explains the measurement, so it comes after the run, never beside the question in the lesson.
    if (!p.why.empty() && c.status != Comparison::Status::unmeasured) out << "    why: " << p.why << "\n";
  }
  if (blank > 0) {
    out << blank << " of " << file.questions.size() << " questions not answered yet: write your answers in "
        << file.path << " before you run the lab\n";
  }
}

}  // namespace speedlabs
