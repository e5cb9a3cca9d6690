#!/usr/bin/env python3
"""The outside checks tried on the reference's own programs (CTests of the reference build; cmake/SpeedLab.cmake):

  selftest.py check PROGRAM   for each exercise PROGRAM lists, its outputs read back pass, one changed byte, a cut
                              file and a bad seed do not (grader/outside_check.py)
  selftest.py timed PROGRAM   the same for its timed speed exercises (grader/outside_timing.py)
  selftest.py raced PROGRAM   its raced speed exercises: a race and the judge (grader/outside_race.py)
Standard library only.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import outside_check  # noqa: E402
import outside_race  # noqa: E402
import outside_timing  # noqa: E402

KINDS = {"check": outside_check.selftest, "timed": outside_timing.selftest, "raced": outside_race.selftest}

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in KINDS:
        sys.exit(KINDS[sys.argv[1]](Path(sys.argv[2]).resolve()))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
