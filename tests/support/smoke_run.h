/// @file tests/support/smoke_run.h
/// @brief The observations of a lab's smoke run, for the tests that check them: each lab's --quick run is made
/// once per test run, by its CTest test labNN.smoke (cmake/SpeedLab.cmake), never again inside a test.
///
/// The smoke run writes its report to <build>/labs/<NN_folder>/labNN.smoke.json and is the CTest fixture
/// labNN_json; a GoogleTest test whose name contains FromTheSmokeRun requires that fixture, so CTest runs the
/// smoke run first, and the test reads its report back with smoke_report("NN").
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "common/build_paths.h"
#include "common/observations.h"

namespace speedlabs::testing {

/// The verdict named @p name, as Report::to_json() writes it (speedlabs::to_string(Verdict)); throws
/// std::runtime_error for any other name.
inline speedlabs::Verdict verdict_from_string(const std::string& name) {
  using speedlabs::Verdict;
  for (const Verdict v : {Verdict::holds, Verdict::fails, Verdict::not_applicable, Verdict::inconclusive}) {
    if (speedlabs::to_string(v) == name) return v;
  }
  throw std::runtime_error("'" + name + "' is not a verdict (holds, fails, not_applicable or inconclusive)");
}

/// The report of lab @p number's smoke run ("03": ctest -R lab03.smoke), rebuilt from the JSON it wrote:
/// every observation with its id, claim, measured value, expectation, verdict, must_hold, reason and evidence.
/// Throws std::runtime_error (a failure of the test that asked, saying what to run) when the smoke run's report is
/// missing, older than the lab's program (the program was rebuilt since) or not a report.
inline speedlabs::Report smoke_report(const std::string& number) {
  namespace fs = std::filesystem;
  const std::string program = "lab" + number;
  const fs::path program_file = speedlabs::program_path(program);
  const fs::path labs = program_file.parent_path().parent_path() / "labs";  // <build>/bin/labNN -> <build>/labs
  const std::string rerun = "run the smoke run first: ctest --preset default -R " + program +
                            ".smoke (ctest runs it by itself before any test that requires the fixture " + program +
                            "_json)";
  fs::path json_path;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(labs, error)) {
    if (entry.is_directory() && entry.path().filename().string().rfind(number + "_", 0) == 0) {
      json_path = entry.path() / (program + ".smoke.json");
      break;
    }
  }
  if (json_path.empty()) {
    throw std::runtime_error("no folder " + number + "_* in " + labs.string() + " for lab " + number +
                             "'s smoke run: " + rerun);
  }
  if (!fs::exists(json_path)) {
    throw std::runtime_error("lab " + number + "'s smoke run wrote no report (" + json_path.string() + "): " + rerun);
  }
  if (fs::exists(program_file) && fs::last_write_time(json_path) < fs::last_write_time(program_file)) {
    throw std::runtime_error(json_path.string() + " is older than " + program_file.string() +
                             ": it is the report of an earlier build; " + rerun);
  }
  try {
    std::ifstream in(json_path);
    const nlohmann::json json = nlohmann::json::parse(in);
    speedlabs::Report report(json.at("lab").get<std::string>(), json.at("device").get<std::string>());
    for (const auto& item : json.at("observations")) {
      // (the JSON leaves out a reason a verdict does not need, and the evidence of an untimed observation)
      const auto optional = [&](const char* key) { return item.contains(key) ? item.at(key) : nlohmann::json(); };
      report.add({item.at("id").get<std::string>(), item.at("claim").get<std::string>(), optional("measured"),
                  item.at("expected").get<std::string>(), verdict_from_string(item.at("verdict").get<std::string>()),
                  item.at("must_hold").get<bool>(), item.value("reason", std::string()), optional("evidence")});
    }
    return report;
  } catch (const std::exception& e) {
    throw std::runtime_error(json_path.string() + " is not a lab's report (" + e.what() + "): " + rerun);
  }
}

/// True when @p report was observed on the CPU ("cpu (2 threads)"): a smoke run without --device runs on a GPU
/// where there is one.
inline bool observed_on_cpu(const speedlabs::Report& report) { return report.device().rfind("cpu", 0) == 0; }

}  // namespace speedlabs::testing
