#!/usr/bin/env python3
"""The tour's --json report: every lab's report of this tour in one file.

  tour_report.py PATH LAB_FOLDER...   writes {"tour": [report, ...]} to PATH atomically (a temporary file
                                      beside it, then a rename); a lab that wrote no report is
                                      {"lab": "NN", "report": null}

Each report is the lab's own --json output, kept by the tour in build/runs/labNN.json.
Standard library only.
"""
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def report_of(folder):
    lab = Path(folder).name[:2]
    try:
        return json.loads((ROOT / "build" / "runs" / f"lab{lab}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"lab": lab, "report": None}


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[1])
    text = json.dumps({"tour": [report_of(f) for f in argv[2:]]}, indent=1) + "\n"
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, target)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        print(f"[lab] error: {target}: {error.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
