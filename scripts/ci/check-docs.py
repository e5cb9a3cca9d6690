#!/usr/bin/env python3
"""Opens every lesson page of the generated HTML docs in headless Chromium and fails on an image that does
not load (naturalWidth == 0) or a relative link to a missing file; keeps screenshots of the main page and of
lab 05's page.

    scripts/ci/check-docs.py [HTML_DIR] [--screenshots DIR]     (defaults: build/docs/html, build/docs/screenshots)

How: Chromium's DevTools protocol over --remote-debugging-pipe (file descriptors 3 and 4, JSON messages ended
by a NUL byte), so the standard library is enough: no websocket client, no Node, no pip package. Only a real
browser can say whether an image loaded (an <img> or Doxygen's <object> for SVG that points nowhere is still
valid HTML), and the same session takes the screenshots. Debian's `chromium` package; CHROMIUM overrides
the program. The lesson pages are the main page and every page the sidebar lists before the API reference.
"""
import base64
import fcntl
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

# scripts/driver/lab_list.py: the lab folders, from the one list the driver keeps
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "driver"))
import lab_list  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIDTH, HEIGHT, MAX_HEIGHT = 1280, 900, 16000
SCREENSHOTS = {"index.html": "main-page.png", "lab05.html": "lab05.png"}

# Runs in the page after its load event: the loaded state of every image (an <img>, and an <object> showing
# an image, loaded again as an Image to read its natural width) and every link as written and as resolved.
PAGE_PROBE = r"""
(async () => {
  const settle = (img) => img.complete ? Promise.resolve() :
      new Promise(done => { img.onload = img.onerror = () => done(); });
  const images = [];
  for (const img of document.images) { await settle(img); images.push({src: img.getAttribute('src'), width: img.naturalWidth}); }
  for (const obj of document.querySelectorAll('object[data]')) {
    if (!/^image\//.test(obj.type) && !/\.(svg|png|jpe?g|gif|webp)$/i.test(obj.data)) continue;
    const probe = new Image();
    probe.src = obj.data;
    await settle(probe);
    images.push({src: obj.getAttribute('data'), width: probe.naturalWidth});
  }
  const links = [...document.querySelectorAll('a[href]')].map(a => ({raw: a.getAttribute('href'), url: a.href}));
  const content = document.querySelector('#doc-content');
  return {images, links, height: Math.max(document.documentElement.scrollHeight, content ? content.scrollHeight : 0)};
})()
"""


def above_9(fd):
    """fd moved above 9, so that placing the pipes on 3 and 4 in the child never overwrites one of them."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """One headless Chromium, driven over the DevTools pipe."""

    def __init__(self, program, profile):
        to_chrome_r, self.to_chrome, self.from_chrome, from_chrome_w = (above_9(fd) for fd in (*os.pipe(), *os.pipe()))

        def give_pipes():  # the browser reads commands on fd 3 and writes replies on fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)
        argv = [program, "--headless=new", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--hide-scrollbars", "--mute-audio", f"--user-data-dir={profile}",
                "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox (CI containers)
        self.process = subprocess.Popen(argv, preexec_fn=give_pipes, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer, self.next_id, self.events = b"", 0, []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium exited: " + self.process.stderr.read().decode(errors="replace")[-2000:])
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=False, timeout=60):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self.read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for_event(self, method, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    del self.events[: i + 1]
                    return event
            self.events.append(self.read_message(deadline))

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for_event("Page.loadEventFired")
        result = self.call("Runtime.evaluate", {"expression": PAGE_PROBE, "awaitPromise": True,
                                                "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{url}: the probe failed: {result['exceptionDetails']}")
        return result["result"]["value"]

    def screenshot(self, height, path):
        """The whole page: the viewport made as tall as the content (Doxygen's content scrolls in a div)."""
        height = min(max(height, HEIGHT), MAX_HEIGHT)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)
        time.sleep(0.5)  # the tree view lays itself out again on resize
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def lesson_pages(html):
    """index.html and every page the sidebar lists at its top level before the API reference."""
    tree = (html / "navtreedata.js").read_text(encoding="utf-8")
    pages = ["index.html"]
    for title, target in re.findall(r'^    \[ "((?:[^"\\]|\\.)*)", "([^"#]+)"', tree, flags=re.M):
        if not title.startswith("API:") and target not in pages:
            pages.append(target)
    return pages


def markdown_images(readme):
    return len(re.findall(r"!\[[^\]]*\]\([^)]+\)", readme.read_text(encoding="utf-8")))


def main(argv):
    html = pathlib.Path(argv[0] if argv and not argv[0].startswith("--") else ROOT / "build/docs/html").resolve()
    shots = ROOT / "build/docs/screenshots"
    if "--screenshots" in argv:
        shots = pathlib.Path(argv[argv.index("--screenshots") + 1]).resolve()
    program = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    if not program:
        sys.exit("check-docs: no chromium: install Debian's chromium package (./lab setup)")
    if not (html / "index.html").exists():
        sys.exit(f"check-docs: {html}/index.html not found: run ./lab docs first")
    shots.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    pages = lesson_pages(html)
    problems, image_count, link_count = [], 0, 0
    # Every lab has its page, showing at least as many images as its README does.
    for folder in lab_list.lab_folders(ROOT):
        first = (folder / "README.md").read_text(encoding="utf-8").splitlines()[0]
        anchor = re.search(r"\{#([\w-]+)\}", first)
        if not anchor or f"{anchor.group(1)}.html" not in pages:
            problems.append(f"labs/{folder.name}/README.md has no page in the sidebar")
    # The claims ledger (docs/claims.md, generated from docs/claims.json and the kept runs) is opened too.
    for required in ("claims.html", "maintainers.html"):
        if required not in pages:
            problems.append(f"{required} is not in the sidebar (a @subpage of the main page)")
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(program, profile)
        try:
            for page in pages:
                result = browser.open((html / page).as_uri())
                for image in result["images"]:
                    image_count += 1
                    if image["width"] == 0:
                        problems.append(f"{page}: image {image['src']} does not load (naturalWidth == 0)")
                for link in result["links"]:
                    raw = link["raw"]
                    if raw.startswith("#") or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", raw):
                        continue  # in-page anchors, and http:, mailto:, javascript: ...
                    link_count += 1
                    target = pathlib.Path(urllib.parse.unquote(urllib.parse.urlsplit(link["url"]).path))
                    if not target.exists():
                        problems.append(f"{page}: link {raw} points to a missing file")
                folder = next((f for f in lab_list.lab_folders(ROOT)
                               if f"{{#{page[:-5]}}}" in (f / "README.md").read_text(encoding="utf-8").split("\n")[0]), None)
                if folder and len(result["images"]) < markdown_images(folder / "README.md"):
                    problems.append(f"{page}: shows {len(result['images'])} images, its README "
                                    f"{markdown_images(folder / 'README.md')}")
                if page in SCREENSHOTS:
                    browser.screenshot(result["height"], shots / SCREENSHOTS[page])
        finally:
            browser.close()
    seconds = time.monotonic() - started
    for problem in problems:
        print(f"check-docs: {problem}", file=sys.stderr)
    print(f"check-docs: {len(pages)} pages, {image_count} images, {link_count} relative links in {seconds:.1f} s; "
          f"screenshots in {shots}")
    if problems:
        print(f"check-docs: FAILED: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
