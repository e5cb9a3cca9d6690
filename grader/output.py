#!/usr/bin/env python3
"""The files ./lab grade writes (grader/grade.py): junit.xml with one test case per prediction, and
all of summary.md, results.json and junit.xml written together, or none. Standard library only."""
import os
import xml.etree.ElementTree as ET


def junit_with_predictions(junit, cases):
    """CTest's JUnit with one test case per prediction (suite LabNN_predictions): passed when within its
    tolerance, a failure when off or blank, skipped when this machine did not measure it."""
    tree = ET.parse(junit)
    root = tree.getroot()
    suite = root if root.tag == "testsuite" else (root.find("testsuite") if root.find("testsuite") is not None else root)
    for lab, name, status, line in cases:
        case = ET.SubElement(suite, "testcase", name=f"Lab{lab}_predictions.{name}", classname="predictions",
                             status="run" if status in ("ok", "off", "blank") else "notrun", time="0")
        if status in ("off", "blank"):
            ET.SubElement(case, "failure", message=line)
        elif status == "unmeasured":
            ET.SubElement(case, "skipped", message=line)
        ET.SubElement(case, "system-out").text = line
    return ET.tostring(root, encoding="unicode") + "\n"


def write_all_or_none(out, files):
    """Writes every file to a temporary name first, then renames them into place: a failed write (a full
    disk) leaves none of them, and a reader never sees a mix of this run's files and an earlier one's."""
    out.mkdir(parents=True, exist_ok=True)
    temporaries = {}
    try:
        for name, text in files.items():
            temporary = out / f".{name}.tmp.{os.getpid()}"
            temporaries[name] = temporary
            with open(temporary, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
    except OSError:
        for temporary in temporaries.values():
            temporary.unlink(missing_ok=True)
        raise
    for name in sorted(files, key=lambda n: n == "results.json"):  # results.json, the one Gradescope reads, last
        temporaries[name].replace(out / name)
