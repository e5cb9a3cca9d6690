#!/usr/bin/env python3
"""./lab new NN topic: a new lab that builds, runs, passes its tests and shows in the docs (standard library only).

    new_lab.py NN topic     NN: two digits, 01 to 99, no lab's yet; topic: [a-z0-9_]+

It makes three folders and nothing else, so removing them leaves the tree as it was:
  labs/NN_topic/       the student's files: exercise.h and exercise.cpp (the stub, TODO(labNN)), README.md.in (the
                       lesson's skeleton) and README.md (rendered from it); CMakeLists.txt (speedlabs_add_lab)
  labs/NN_topic/src/   the lab's own: main.cpp (run_lab), experiment.h (Config and its knobs) and experiment.cpp
                       (one observation)
  solutions/NN_topic/  exercise.cpp (the reference answer)
  tests/labNN/         points.tsv (one exercise), graded.cpp (suite LabNN_<function>), test_<topic>.cpp (the
                       observation, read from the smoke run)
Each file is a template below with the number and the topic filled in: a placeholder exercise (a sum of squares,
checked against libtorch's) to replace with the lab's own. Then labs/CMakeLists.txt is touched, so the next build
configures again and its glob finds the folder. docs/adding-a-lab.md says what each file is for and what to fill in.

Bad input (not two arguments, NN not two digits or a lab's already, a topic not [a-z0-9_]+, one of the three
folders already there, a copy without solutions/) stops with a message and exit 2, before anything is written; a
failure while writing removes what was made (exit 3).
"""
import os
import pathlib
import re
import shutil
import string
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from page_render import rendered  # noqa: E402  (README.md is what ./lab docs --render would write)
from placeholders import exercise_table  # noqa: E402  (the graded exercises' tables: points.tsv's header)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUNCTION = "sum_of_squares"  # the placeholder exercise

CMAKE = """\
# Lab ${NN}: ${TITLE}. (Made by ./lab new; cmake/SpeedLab.cmake explains every argument.)
speedlabs_add_lab(ID ${NN}
  SOURCES experiment.cpp
  EXERCISE
  TESTS tests/lab${NN}/test_${TOPIC}.cpp
  GRADED_TESTS tests/lab${NN}/graded.cpp
  BAD_ARGS "--size 0" "--size many" "--size 10000001" "--seed -1")
"""

MAIN = """\
// Lab ${NN}: ${TITLE}. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab${NN}::Config> knobs = lab${NN}::knobs();
  return speedlabs::run_lab(
      argc, argv, {"${NN}", "${FOLDER}", "${TITLE}: your sum of squares against libtorch's", true},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab${NN}::run(knobs.configure(context), report);
      });
}
"""

EXPERIMENT_H = """\
/// @file labs/${FOLDER}/src/experiment.h
/// @brief Lab ${NN}: ${TITLE}. One observation: your ${FUNCTION} (exercise.h) against libtorch's.
#pragma once
#include <cstdint>

#include "common/cli.h"
#include "common/observations.h"

namespace lab${NN} {

/// The experiment's knobs.
struct Config {
  int size = 1'000'000;  ///< how many random values the sum of squares runs on (1 to 10000000)
  uint64_t seed = 0;     ///< the random values' seed
};

/// The lab's knobs, each declared once: its flag, its help, its --quick value and its checks.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.flag("--size", "how many random values the sum of squares runs on", &Config::size)
      .quick(10'000)
      .check(CLI::Range(1, 10'000'000));
  knobs.seed_flag(&Config::seed);
  return knobs;
}

/// Runs your ${FUNCTION} on random values and records the observation yours_matches_libtorch.
/// @param config  the knobs
/// @param report  where the observation goes
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab${NN}
"""

EXPERIMENT_CPP = """\
#include "experiment.h"

#include <torch/types.h>

#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "exercise.h"

namespace lab${NN} {

namespace {

std::vector<float> random_values(int size, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(size);
  for (float& value : values) value = uniform(engine);
  return values;
}

// Your answer against libtorch's on the same values: the lab runs the student's code, a library checks it.
void observe_yours_matches_libtorch(const Config& config, speedlabs::Report& report) {
  const std::vector<float> values = random_values(config.size, config.seed);
  const double yours = ${FUNCTION}(values);
  const double libtorch = torch::tensor(values).to(torch::kDouble).square().sum().item<double>();
  const double difference = std::abs(yours - libtorch);
  const double relative = libtorch == 0 ? difference : difference / std::abs(libtorch);
  std::cout << "sum of squares of " << values.size() << " values: yours = " << yours << ", libtorch = " << libtorch
            << "\\n";
  report.check("yours_matches_libtorch",
               "your ${FUNCTION} (exercise.cpp) gives libtorch's sum of squares of the same values",
               {{"values", values.size()}, {"yours", yours}, {"libtorch", libtorch}, {"relative_difference", relative}},
               "relative difference <= 1e-9", relative <= 1e-9);
}

}  // namespace

void run(const Config& config, speedlabs::Report& report) { observe_yours_matches_libtorch(config, report); }

}  // namespace lab${NN}
"""

EXERCISE_H = """\
/// @file labs/${FOLDER}/exercise.h
/// @brief Lab ${NN} exercise: the sum of squares of a vector (the placeholder ./lab new made: replace it).
///
/// Stubs live in labs/${FOLDER}/exercise.cpp, the reference in solutions/${FOLDER}/exercise.cpp.
#pragma once
#include <vector>

namespace lab${NN} {

/// The sum of the squares of @p values, accumulated in double.
/// @param values  any floats; none gives 0
/// @return        values[0]^2 + values[1]^2 + ...
double ${FUNCTION}(const std::vector<float>& values);

}  // namespace lab${NN}
"""

STUB = """\
// Lab ${NN} exercise: the sum of squares. Replace the body, then check your work with ./lab check ${NN}.
#include "exercise.h"

#include "common/errors.h"

namespace lab${NN} {

// Why: the lab's one observation runs this on random values and holds it against libtorch's sum.
//
// Hints:
//  - Accumulate in double: a float sum stops growing by 1 once it reaches 2^24.
double ${FUNCTION}(const std::vector<float>& /*values*/) {
  // TODO(lab${NN}): the sum of the squares of values, in double.
  speedlabs::not_implemented("${NN}", "${FOLDER}", "${FUNCTION}");
}

}  // namespace lab${NN}
"""

SOLUTION = """\
// Lab ${NN} reference answer (labs/${FOLDER}/exercise.cpp holds the stub).
#include "exercise.h"

namespace lab${NN} {

double ${FUNCTION}(const std::vector<float>& values) {
  double sum = 0;
  for (const float value : values) sum += static_cast<double>(value) * value;
  return sum;
}

}  // namespace lab${NN}
"""

README = """\
# Lab ${NN}: ${TITLE} {#lab${NN}}

**What it teaches.** The claim this lab checks on the reader's machine, and why it matters for training speed.
(A skeleton made by `./lab new`: replace every paragraph, and docs/adding-a-lab.md says what goes where.)

## Key concepts / APIs

- `lab${NN}::${FUNCTION}` (the exercise) against libtorch's `Tensor::square` and `Tensor::sum`.
- speedlabs: `speedlabs::Report::check` (an observation and its verdict), `speedlabs::Knobs` (the lab's flags).

## Run it

```
./lab run ${NN}
./lab run ${NN} --quick
./lab run ${NN} --size 1000 --seed 7
./lab run ${NN} --help
```

## What you should observe, and why

| id | claim | must hold |
|---|---|---|
| `yours_matches_libtorch` | your `${FUNCTION}` gives libtorch's sum of squares of the same values, within 1e-9 relative | yes |

Why each claim holds, with its figures filled from the kept run (`{{run:${NN}:yours_matches_libtorch.libtorch}}`)
once `./lab docs --refresh-results ${NN}` has made it.

## The exercise

`exercise.h` declares `${FUNCTION}(values)`; in the student build it is a stub that stops the program with
`not implemented yet: TODO(lab${NN}) ...`. Check your work with `./lab check ${NN}`: the graded tests
(`Lab${NN}_${FUNCTION}`, points in `tests/lab${NN}/points.tsv`). The reference is in
`solutions/${FOLDER}/exercise.cpp`.
"""

POINTS = "\t".join(exercise_table.COLUMNS) + "\n${FUNCTION}\t10\tthe-exercise\t10\n"

GRADED = """\
// Lab ${NN} graded tests: your ${FUNCTION} (labs/${FOLDER}/exercise.cpp). Run them with ./lab check ${NN}.
#include <gtest/gtest.h>

#include <vector>

#include "exercise.h"

namespace {

TEST(Lab${NN}_${FUNCTION}, SmallCases) {
  EXPECT_EQ(lab${NN}::${FUNCTION}({}), 0.0);
  EXPECT_EQ(lab${NN}::${FUNCTION}({3.0f}), 9.0);
  EXPECT_EQ(lab${NN}::${FUNCTION}({1.0f, -2.0f, 3.0f}), 14.0);
}

// 4096^2 = 2^24, past which a float no longer holds every integer: a float accumulator loses the 1.
TEST(Lab${NN}_${FUNCTION}, AccumulatesInDouble) { EXPECT_EQ(lab${NN}::${FUNCTION}({4096.0f, 1.0f}), 16777217.0); }

}  // namespace
"""

OBSERVATION_TEST = """\
// Lab ${NN}'s observation, from the smoke run's --quick report (tests/support/smoke_run.h); the exercise is graded
// in graded.cpp.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "tests/support/smoke_run.h"

namespace {

// ctest -R lab${NN}.smoke runs `lab${NN} --quick`; CTest runs it first (the fixture lab${NN}_json).
TEST(Lab${NN}Observations, FromTheSmokeRunEveryClaimHolds) {
  const speedlabs::Report report = speedlabs::testing::smoke_report("${NN}");
  EXPECT_EQ(report.at("yours_matches_libtorch").verdict, speedlabs::Verdict::holds);
  EXPECT_LE(report.at("yours_matches_libtorch").measured["relative_difference"].get<double>(), 1e-9);
  EXPECT_EQ(report.exit_code(), speedlabs::kExitOk);
}

}  // namespace
"""


def files(number, topic):
    """{path relative to the root: text} of the new lab's files, README.md left out (rendered once written)."""
    folder = f"{number}_{topic}"
    fill = {"NN": number, "TOPIC": topic, "FOLDER": folder, "TITLE": topic.replace("_", " "), "FUNCTION": FUNCTION}
    templates = {
        f"labs/{folder}/CMakeLists.txt": CMAKE, f"labs/{folder}/src/main.cpp": MAIN,
        f"labs/{folder}/src/experiment.h": EXPERIMENT_H, f"labs/{folder}/src/experiment.cpp": EXPERIMENT_CPP,
        f"labs/{folder}/exercise.h": EXERCISE_H, f"labs/{folder}/exercise.cpp": STUB,
        f"labs/{folder}/README.md.in": README, f"solutions/{folder}/exercise.cpp": SOLUTION,
        f"tests/lab{number}/points.tsv": POINTS, f"tests/lab{number}/graded.cpp": GRADED,
        f"tests/lab{number}/test_{topic}.cpp": OBSERVATION_TEST,
    }
    return {path: string.Template(text).substitute(fill) for path, text in templates.items()}


def refuse(message):
    print(f"[lab] error: {message}", file=sys.stderr)
    sys.exit(2)


def check(argv):
    """(NN, topic) when @p argv asks for a lab that can be made here; else refuse() says why (exit 2)."""
    if len(argv) != 2:
        refuse("usage: ./lab new NN topic (NN: two digits not yet a lab's; topic: lowercase letters, digits and _)")
    number, topic = argv
    if not re.fullmatch(r"[0-9]{2}", number) or number == "00":
        refuse(f"'{number}' is not a lab number: give two digits, 01 to 99 (./lab list shows those taken)")
    if not re.fullmatch(r"[a-z0-9_]+", topic):
        refuse(f"'{topic}' is not a topic: use lowercase letters, digits and _ only (e.g. float16_limits)")
    if not (ROOT / "solutions").is_dir():
        refuse("this copy has no solutions/ (a student release): add a lab in the course's own checkout")
    taken = sorted(p.relative_to(ROOT).as_posix() for p in [*ROOT.glob(f"labs/{number}_*"),
                                                           *ROOT.glob(f"solutions/{number}_*"),
                                                           ROOT / "tests" / f"lab{number}"] if p.exists())
    if taken:
        refuse(f"lab {number} is taken ({', '.join(taken)} exist): nothing is written over an existing folder "
               f"(./lab list shows the labs; a lab is removed by deleting its three folders)")
    return number, topic


def write(number, topic):
    """Writes the three folders, each made afresh (never an existing one); on any failure removes them all."""
    folder = f"{number}_{topic}"
    made = []
    try:
        for top in (ROOT / "labs" / folder, ROOT / "solutions" / folder, ROOT / "tests" / f"lab{number}"):
            top.mkdir()  # FileExistsError if it appeared since check(): never written into
            made.append(top)
        for path, text in files(number, topic).items():
            (ROOT / path).parent.mkdir(exist_ok=True)  # src/, inside a folder made above
            (ROOT / path).write_text(text, encoding="utf-8")
        # The lesson only: the project's README (its labs table, its counts) is rendered once the lab has its row
        # in labs/README.md, so that deleting the three folders leaves the tree as it was.
        lesson = ROOT / "labs" / folder / "README.md.in"
        lesson.with_name("README.md").write_text(rendered(lesson), encoding="utf-8")
    except BaseException as error:
        for top in made:
            shutil.rmtree(top, ignore_errors=True)
        if isinstance(error, FileExistsError):
            refuse(f"{error.filename} appeared meanwhile: nothing written")
        if isinstance(error, Exception):
            print(f"[lab] error: could not write lab {number} ({error}): removed what was made", file=sys.stderr)
            sys.exit(3)
        raise
    # The glob in labs/CMakeLists.txt is read when CMake configures: a newer file makes the next build do so.
    if (ROOT / "labs" / "CMakeLists.txt").exists():
        os.utime(ROOT / "labs" / "CMakeLists.txt")
    return made


def main(argv):
    number, topic = check(argv)
    made = write(number, topic)
    print(f"[lab] made lab {number}: " + ", ".join(p.relative_to(ROOT).as_posix() + "/" for p in made))
    print(f"[lab] next: cmake --build --preset default --target lab{number} test_lab{number} test_lab{number}_graded\n"
          f"      build/bin/lab{number} --quick && ctest --test-dir build -L lab{number}\n"
          f"      then replace the placeholder exercise and lesson, give the lab its row in labs/README.md and\n"
          f"      ./lab docs --render (the README's table and counts): docs/adding-a-lab.md")


if __name__ == "__main__":
    main(sys.argv[1:])
