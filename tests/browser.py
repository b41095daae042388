"""A real browser for tests: headless Chromium (Debian's `chromium` package) driven through the
DevTools protocol over a pipe (`--remote-debugging-pipe`: JSON messages ending in NUL on fds 3 and 4),
so no websocket library and no port are needed.

    with Browser() as browser:
        tab = browser.open("file:///.../index.html", javascript=False)
        tab.text()                      # document.body.innerText: what is rendered, as a reader sees it
        tab.evaluate("document.title")
        tab.screenshot(Path("page.png"), width=1200, max_height=1800)

`python -m tests.browser URL PNG [--width W] [--max-height H]` saves a screenshot (for docs/).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """$ENGINEWRIGHT_CHROMIUM, else the first of NAMES on PATH."""
    chosen = os.environ.get("ENGINEWRIGHT_CHROMIUM")
    if chosen:
        return chosen
    return next((found for found in map(shutil.which, NAMES) if found), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str | None = None, timeout: float = 30.0):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError(
                f"no Chromium found (tried $ENGINEWRIGHT_CHROMIUM, {', '.join(NAMES)}); "
                f"install Debian's package: apt-get install chromium"
            )
        self.timeout, self._id, self._buffer = timeout, 0, b""

    def __enter__(self) -> "Browser":
        self.profile = tempfile.mkdtemp(prefix="enginewright-chromium-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def fds() -> None:  # in the child: the protocol's fds 3 (commands in) and 4 (replies out)
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        # --no-sandbox: tests run as root here, where Chromium's sandbox refuses to start.
        self.process = subprocess.Popen(
            [
                self.binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """One protocol command; returns its result (events in between are dropped)."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buffer:
                if time.monotonic() > deadline:
                    raise BrowserError(f"{method}: no reply in {self.timeout:.0f}s")
                chunk = os.read(self._read, 1 << 16)
                if not chunk:
                    raise BrowserError(f"{method}: Chromium closed the pipe (exit {self.process.poll()})")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str, *, javascript: bool = True) -> "Tab":
        """A new tab showing `url`, once the document and its subresources have loaded."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Tab(self, session)
        if not javascript:
            self.send("Emulation.setScriptExecutionDisabled", {"value": True}, session)
        self.send("Page.navigate", {"url": url}, session)
        deadline = time.monotonic() + self.timeout
        while tab.evaluate("document.readyState + ' ' + location.href") != f"complete {url}":
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not finish loading in {self.timeout:.0f}s")
            time.sleep(0.05)
        return tab


class Tab:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (DevTools evaluates it even where the
        page's own scripts are disabled)."""
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        """The page's rendered text (innerText: what is laid out and visible)."""
        return self.evaluate("document.body.innerText")

    def screenshot(self, path: Path, *, width: int = 1200, max_height: int = 2000) -> Path:
        """A PNG of the page at `width` CSS pixels, as tall as its content up to `max_height`."""
        send = self.browser.send
        send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": False},
            self.session,
        )
        height = min(max_height, int(self.evaluate("document.documentElement.scrollHeight")))
        send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            self.session,
        )
        shot = send("Page.captureScreenshot", {"format": "png"}, self.session)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="save a screenshot of a page with headless Chromium")
    parser.add_argument("url")
    parser.add_argument("png")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--max-height", type=int, default=2000)
    args = parser.parse_args(argv)
    url = args.url if "://" in args.url else Path(args.url).resolve().as_uri()
    with Browser() as browser:
        browser.open(url, javascript=False).screenshot(Path(args.png), width=args.width, max_height=args.max_height)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
