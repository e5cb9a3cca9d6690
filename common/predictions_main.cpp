// predictions: a lab's questions answered and compared with a saved run, for ./lab check and ./lab grade
// (grader/predicted.py). The rules are the lab programs' own (common/predictions.cpp): this
// program writes the "predictions" section a lab's --json output carries, for a run made earlier and answers
// given since, or by someone else (a submission graded against this machine's reference run).
//
//   predictions QUESTIONS.toml [ANSWERS.toml] [--run RUN.json]
//
// QUESTIONS.toml: the official questions (labs/NN_topic/predictions.toml); ANSWERS.toml: the answers (default:
// QUESTIONS.toml itself); RUN.json: the lab's --json report (none: every filled answer is unmeasured). The
// section goes to standard output as JSON; exit 2 on a wrong argument or an unreadable run.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/predictions.h"

namespace {

int usage(const std::string& problem) {
  std::cerr << "predictions: " << problem << "\nusage: predictions QUESTIONS.toml [ANSWERS.toml] [--run RUN.json]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::string run_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--run" && i + 1 < argc) {
      run_path = argv[++i];
    } else if (arg.rfind("--", 0) == 0 || files.size() == 2) {
      return usage("unexpected argument '" + arg + "'");
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) return usage("no questions file");
  nlohmann::json run;
  if (!run_path.empty()) {
    std::ifstream in(run_path);
    if (in.is_open()) run = nlohmann::json::parse(in, nullptr, false);
    if (!run.is_object()) return usage("cannot read the run " + run_path);
  }
  const auto questions = speedlabs::read_predictions(files[0]);
  const auto answers = speedlabs::read_predictions(files.size() > 1 ? files[1] : files[0]);
  std::cout << speedlabs::predictions_section(speedlabs::answer_questions(questions, answers), run).dump(2) << "\n";
  return std::cout ? 0 : 1;
}
