// The predictions column of a lab's table (common/predictions): reading predictions.toml with toml++, every
// malformed file named by its line, each tolerance's close and off, the rows print_predictions writes, and the
// --json output's "predictions" section ./lab check and ./lab grade read (the official questions, a student's
// answers).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/predictions.h"

namespace {

using speedlabs::Comparison;
using speedlabs::Tolerance;

std::string write(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("speedlabs-predictions-" + name + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

const char* const kGood = R"(# a comment
[[question]]
id = "speedup"
question = "How many times faster?"
unit = "x"
answer = 3
factor = 2

[[question]]
id = "table"
field = "fp16.max"
question = "The largest fp16?"
unit = ""
answer = ""
relative = 0.01

[[question]]
id = "bound"
field = "bound"
question = "Memory or compute bound?"
unit = ""
answer = "Memory"
why = "one multiply per byte"
)";

speedlabs::Report report() {
  speedlabs::Report r("01_test", "cpu");
  r.check("speedup", "faster", 7.5, "> 1", true);
  r.check("table", "table", nlohmann::json{{"fp16", {{"max", 65504.0}}}}, "", true);
  r.check("bound", "bound", nlohmann::json{{"bound", "memory"}}, "", true);
  return r;
}

TEST(Predictions, ReadsEveryQuestion) {
  const auto file = speedlabs::read_predictions(write("good", kGood));
  ASSERT_EQ(file.error, "");
  ASSERT_EQ(file.questions.size(), 3u);
  EXPECT_EQ(file.questions[0].answer, 3.0);
  EXPECT_EQ(file.questions[0].tolerance.kind, Tolerance::Kind::factor);
  EXPECT_EQ(file.questions[0].line, 2);
  EXPECT_TRUE(file.questions[1].answer.is_null()) << "answer = \"\" is blank";
  EXPECT_EQ(file.questions[1].field, "fp16.max");
  EXPECT_EQ(file.questions[2].tolerance.kind, Tolerance::Kind::exact);
  EXPECT_EQ(file.questions[2].why, "one multiply per byte");
}

TEST(Predictions, AMissingFileHasNoQuestionsAndNoError) {
  const auto file = speedlabs::read_predictions("/nonexistent/predictions.toml");
  EXPECT_EQ(file.error, "");
  EXPECT_TRUE(file.questions.empty());
}

TEST(Predictions, EveryMalformedFileIsNamedByItsLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"[[question]]\nid = \"a\"\nquestion = \"q\"\nunit = \"x\"\nanswer = 1\nrelative = \n", ":6:"},  // TOML syntax
      {"[[question]]\nid = \"a\"\nquestion = \"q\"\nunit = \"x\"\nanswer = 1\ncolour = 2\n",
       ":6: unknown key 'colour'"},
      {"[[question]]\nid = \"a\"\nunit = \"x\"\nanswer = 1\n", ":1: the question has no 'question'"},
      {"[[question]]\nid = \"a\"\nquestion = \"q\"\nunit = \"x\"\n", ":1: the question has no 'answer'"},
      {"[[question]]\nid = 3\nquestion = \"q\"\nunit = \"x\"\nanswer = 1\n", ":2: 'id' must be a string"},
      {"[[question]]\nid = \"a\"\nquestion = \"q\"\nunit = \"x\"\nanswer = [1]\n", ":5: 'answer' must be"},
      {"[[question]]\nid = \"a\"\nquestion = \"q\"\nunit = \"x\"\nanswer = 1\nfactor = 0.5\n", ":6: 'factor' must be"},
      {"[[question]]\nid = \"a\"\nquestion = \"q\"\nunit = \"x\"\nanswer = 1\nrelative = 0.1\nabsolute = 1\n",
       ":1: give one tolerance"},
      {"title = \"x\"\n", ":1: unknown key 'title'"},
      {"question = 3\n", ":1: 'question' must be [[question]] tables"},
  };
  int index = 0;
  for (const auto& [text, expected] : cases) {
    const auto file = speedlabs::read_predictions(write("bad" + std::to_string(index++), text));
    EXPECT_NE(file.error.find(expected), std::string::npos) << "file:\n" << text << "error: " << file.error;
    EXPECT_TRUE(file.questions.empty());
  }
}

TEST(Predictions, EachToleranceSaysCloseOrOffAndByHowMuch) {
  auto status = [](nlohmann::json a, nlohmann::json m, Tolerance t) { return speedlabs::compare_values(a, m, t); };
  EXPECT_EQ(status(3.0, 7.5, {Tolerance::Kind::factor, 2}).status, Comparison::Status::off);
  EXPECT_EQ(status(3.0, 7.5, {Tolerance::Kind::factor, 2}).detail, "off by 2.50x (tolerance 2.00x)");
  EXPECT_EQ(status(5.0, 7.5, {Tolerance::Kind::factor, 2}).status, Comparison::Status::close);
  EXPECT_EQ(status(100.0, 104.0, {Tolerance::Kind::relative, 0.05}).status, Comparison::Status::close);
  EXPECT_EQ(status(100.0, 120.0, {Tolerance::Kind::relative, 0.05}).status, Comparison::Status::off);
  EXPECT_EQ(status(9.0, 10.8, {Tolerance::Kind::absolute, 1}).status, Comparison::Status::off);
  EXPECT_EQ(status(10.0, 10.8, {Tolerance::Kind::absolute, 1}).status, Comparison::Status::close);
  EXPECT_EQ(status(1.5, 3.0, {Tolerance::Kind::side_of, 1}).status, Comparison::Status::close);
  EXPECT_EQ(status(0.5, 3.0, {Tolerance::Kind::side_of, 1}).detail, "other side of 1");
  // A side_of question takes the words it offers as well as a number.
  EXPECT_EQ(status("more", 595.7, {Tolerance::Kind::side_of, 10}).status, Comparison::Status::close);
  EXPECT_EQ(status("Above", 3.0, {Tolerance::Kind::side_of, 1}).status, Comparison::Status::close);
  EXPECT_EQ(status("less", 595.7, {Tolerance::Kind::side_of, 10}).status, Comparison::Status::off);
  EXPECT_EQ(status("below", 0.4, {Tolerance::Kind::side_of, 1}).status, Comparison::Status::close);
  EXPECT_EQ(status("more", 595.7, {Tolerance::Kind::side_of, 10}).detail, "same side of 10: measured above it");
  EXPECT_EQ(status("maybe", 3.0, {Tolerance::Kind::side_of, 1}).status, Comparison::Status::off);
  EXPECT_EQ(status("maybe", 3.0, {Tolerance::Kind::side_of, 1}).detail,
            "answer a number, or above or below (more or less) 1");
  EXPECT_EQ(status("x", 1000.5, {}).detail, "measured 1000.5") << "1000.5 never reads as 1000";
  EXPECT_EQ(status(INFINITY, "inf", {}).status, Comparison::Status::close)
      << "inf as TOML writes it, inf as the labs do";
  EXPECT_EQ(status("MEMORY", "memory", {}).status, Comparison::Status::close);
  EXPECT_EQ(status(true, false, {}).status, Comparison::Status::off);
  EXPECT_EQ(status(nullptr, 3.0, {}).status, Comparison::Status::blank);
  EXPECT_EQ(status(3.0, nlohmann::json::object(), {}).status, Comparison::Status::unmeasured);
}

TEST(Predictions, TheTableShowsYourPredictionBesideTheMeasurement) {
  const auto file = speedlabs::read_predictions(write("table", kGood));
  std::ostringstream out;
  speedlabs::print_predictions(out, file, report());
  const std::string text = out.str();
  EXPECT_NE(text.find("your prediction"), std::string::npos) << text;
  EXPECT_NE(text.find("measured"), std::string::npos) << text;
  EXPECT_NE(text.find("speedup"), std::string::npos) << text;
  EXPECT_NE(text.find("OFF: off by 2.50x"), std::string::npos) << text;
  EXPECT_NE(text.find("close: exact"), std::string::npos) << text;  // "Memory" against "memory"
  EXPECT_NE(text.find("1 of 3 questions not answered yet"), std::string::npos) << text;
  EXPECT_NE(text.find("why: one multiply per byte"), std::string::npos) << text;  // the hint after the run
}

TEST(Predictions, AWordAnswerIsShownWithoutTheUnit) {
  const auto file = speedlabs::read_predictions(write("word", R"([[question]]
id = "speedup"
question = "More or less than 10x?"
unit = "x"
answer = "more"
side_of = 10
)"));
  std::ostringstream out;
  speedlabs::print_predictions(out, file, report());
  EXPECT_NE(out.str().find("more  "), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("more x"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("OFF: other side of 10: measured at or below it"), std::string::npos) << out.str();
}

TEST(Predictions, AMalformedFileIsSaidInTheTableAndNothingElse) {
  std::ostringstream out;
  speedlabs::print_predictions(out, speedlabs::read_predictions(write("broken", "[[question]\n")), report());
  EXPECT_NE(out.str().find("could not be read"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(":1:"), std::string::npos) << out.str();
}

TEST(Predictions, AnUnmeasuredObservationIsNeitherCloseNorOff) {
  speedlabs::Prediction p;
  p.id = "absent";
  p.answer = 2.0;
  EXPECT_EQ(speedlabs::compare_prediction(p, report().to_json()).status, Comparison::Status::unmeasured);
  p.id = "table";
  p.field = "fp16.min";
  EXPECT_EQ(speedlabs::compare_prediction(p, report().to_json()).status, Comparison::Status::unmeasured);
}

TEST(Predictions, AnObservationTheRunCouldNotDecideGradesNothing) {
  // A busy machine's ratio: the run refused to decide it, so a prediction is neither close nor off.
  speedlabs::Report busy("00_test", "cpu");
  speedlabs::Evidence evidence(speedlabs::summarize_samples({3.0, 3.0, 3.0}), {}, speedlabs::LoadEffect::unknown);
  evidence.contention.wall_s = 1;
  evidence.contention.cores = 2;
  evidence.contention.others_cores = 1.5;
  busy.decide("ratio", "a ratio", 3.0, "> 1", evidence, [](double r) { return r > 1; });
  speedlabs::Prediction p;
  p.id = "ratio";
  p.answer = 0.5;
  p.tolerance = {speedlabs::Tolerance::Kind::side_of, 1.0};
  const auto c = speedlabs::compare_prediction(p, busy.to_json());
  EXPECT_EQ(c.status, Comparison::Status::unmeasured);
  EXPECT_NE(c.detail.find("could not decide"), std::string::npos) << c.detail;
}

TEST(Predictions, TheJsonSectionCarriesEachVerdictWithItsRule) {
  const auto file = speedlabs::read_predictions(write("section", kGood));
  const auto section = speedlabs::predictions_section(file, report().to_json());
  ASSERT_EQ(section["questions"].size(), 3u) << section.dump(2);
  const auto& speedup = section["questions"][0];
  EXPECT_EQ(speedup["name"], "speedup");
  EXPECT_EQ(speedup["answer"], 3.0);
  EXPECT_EQ(speedup["measured"], 7.5);
  EXPECT_EQ(speedup["rule"], (nlohmann::json{{"kind", "factor"}, {"value", 2.0}}));
  EXPECT_EQ(speedup["verdict"], "off");
  EXPECT_EQ(speedup["detail"], "off by 2.50x (tolerance 2.00x)");
  EXPECT_EQ(speedup["yours"], "3 x");
  EXPECT_EQ(speedup["machine_dependent"], true);
  EXPECT_EQ(section["questions"][1]["name"], "table.fp16.max");
  EXPECT_EQ(section["questions"][1]["verdict"], "blank");
  EXPECT_EQ(section["questions"][2]["verdict"], "ok");
  EXPECT_EQ(section["questions"][2]["yours"], "Memory") << "a word answer carries no unit";
  EXPECT_EQ(section["questions"][2]["machine_dependent"], false);
  EXPECT_EQ(section["error"], "");
}

TEST(Predictions, ALabRunsJsonCarriesThePredictionsSection) {
  const auto file = speedlabs::read_predictions(write("report", kGood));
  const auto run = speedlabs::report_with_predictions(report(), file);
  EXPECT_EQ(run["observations"], report().to_json()["observations"]);
  EXPECT_EQ(run["predictions"], speedlabs::predictions_section(file, report().to_json()));
}

TEST(Predictions, AnInfiniteAnswerTravelsAsAWord) {
  const auto file = speedlabs::read_predictions(write("inf", R"([[question]]
id = "top"
question = "70000 in fp16?"
unit = ""
answer = inf
)"));
  speedlabs::Report r("01_test", "cpu");
  r.check("top", "inf", "inf", "inf", true);
  const auto q = speedlabs::predictions_section(file, r.to_json())["questions"][0];
  EXPECT_EQ(q["answer"], "inf") << "JSON has no inf: it would read as null, a blank answer";
  EXPECT_EQ(q["verdict"], "ok");
}

TEST(Predictions, WithoutARunEveryFilledAnswerIsUnmeasured) {
  const auto section = speedlabs::predictions_section(speedlabs::read_predictions(write("norun", kGood)), nullptr);
  EXPECT_EQ(section["questions"][0]["verdict"], "unmeasured");
  EXPECT_EQ(section["questions"][0]["detail"], "no run of this lab to compare with");
  EXPECT_EQ(section["questions"][1]["verdict"], "blank");
}

TEST(Predictions, TheOfficialQuestionsSetTheRulesAndTheAnswersOnlyAnswer) {
  const auto official = speedlabs::read_predictions(write("official", kGood));
  // A student's file that widens a tolerance, adds a question and leaves one out: only its answers count.
  const auto answers = speedlabs::read_predictions(write("answers", R"([[question]]
id = "speedup"
question = "How many times faster?"
unit = "x"
answer = 3
factor = 100

[[question]]
id = "mine"
question = "Mine?"
unit = ""
answer = 1
)"));
  const auto answered = speedlabs::answer_questions(official, answers);
  ASSERT_EQ(answered.questions.size(), 3u);
  const auto section = speedlabs::predictions_section(answered, report().to_json());
  EXPECT_EQ(section["questions"][0]["verdict"], "off") << "the official factor 2, not the file's 100";
  EXPECT_EQ(section["questions"][2]["verdict"], "blank");
  EXPECT_EQ(section["questions"][2]["detail"], "not in your file");
  EXPECT_EQ(section["file"], answers.path);
  const auto broken = speedlabs::answer_questions(official, speedlabs::read_predictions(write("broken2", "[[q\n")));
  EXPECT_TRUE(broken.questions.empty());
  EXPECT_NE(broken.error.find(":1:"), std::string::npos) << broken.error;
}

TEST(Predictions, ANumberInQuotesIsComparedAsANumber) {
  // "1000" is not the measured 1000.5 under an exact rule, however few digits a table shows them with.
  const Tolerance exact{Tolerance::Kind::exact, 0};
  EXPECT_EQ(speedlabs::compare_values("1000", 1000.5, exact).status, Comparison::Status::off);
  EXPECT_EQ(speedlabs::compare_values("1000.5000001", 1000.5, exact).status, Comparison::Status::off);
  EXPECT_EQ(speedlabs::compare_values(" 1.0005e3 ", 1000.5, exact).status, Comparison::Status::close);
  EXPECT_EQ(speedlabs::compare_values("1000", 1000.0, exact).status, Comparison::Status::close);
  // A quoted number takes the question's tolerance, as the number would.
  const Tolerance relative{Tolerance::Kind::relative, 0.01};
  EXPECT_EQ(speedlabs::compare_values("1005", 1000.0, relative).status, Comparison::Status::close);
  EXPECT_EQ(speedlabs::compare_values("1100", 1000.0, relative).status, Comparison::Status::off);
  EXPECT_EQ(speedlabs::compare_values("1e", 1000.0, exact).status, Comparison::Status::off);
}

TEST(Predictions, AFileThatIsNoRegularFileIsRefusedWithoutReadingIt) {
  const auto base = std::filesystem::temp_directory_path() / ("speedlabs-predictions-odd-" + std::to_string(getpid()));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base / "folder.toml");
  ASSERT_EQ(mkfifo((base / "fifo.toml").c_str(), 0600), 0);          // opening it would wait for a writer forever
  std::filesystem::create_symlink("/dev/zero", base / "zero.toml");  // reading it would never end
  std::ofstream(base / "big.toml") << std::string((1 << 20) + 1, '#');
  const std::pair<const char*, const char*> cases[] = {
      {"folder.toml", "is a folder"}, {"fifo.toml", "a FIFO"}, {"zero.toml", "a device"}, {"big.toml", "at most"}};
  for (const auto& [name, said] : cases) {
    const auto file = speedlabs::read_predictions((base / name).string());
    EXPECT_TRUE(file.questions.empty()) << name;
    EXPECT_NE(file.error.find(said), std::string::npos) << name << ": " << file.error;
    EXPECT_NE(file.error.find(name), std::string::npos) << file.error;
  }
  std::filesystem::remove_all(base);
}

}  // namespace
