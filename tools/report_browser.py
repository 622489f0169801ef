#!/usr/bin/env python3
"""Open a report.html in headless Chromium (Debian's `chromium`, which
`./scons test` installs) and say what a person would see: whether it
rendered, the console errors, the page's text, and screenshots.

    .venv/bin/python tools/report_browser.py generated/stm32h7/mbv1_025_128/report.html \\
        --shot "" top.png --shot "Per step" steps.png [--width 1280 --height 1000]

(--shot HEADING PNG, as many as wanted: the view scrolled to the heading
that starts with HEADING, '' for the top.)

Talks to the browser over the DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages ended by NUL on file descriptors 3
and 4), so nothing but Chromium and the standard library is needed. Exit
status 1 when the page logged an error or an exception.
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--disable-extensions", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe"]


def _above_four(fd):
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class Browser:
    """One headless Chromium, driven over the DevTools pipe."""

    def __init__(self, exe=None):
        exe = exe or shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium; "
                                    "`./scons test` installs it)")
        self.profile = tempfile.mkdtemp(prefix="tessera-chromium-")
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()
        # the child's ends above 4, so the redirections below never clobber each other
        for fd in (to_child_r, from_child_w):
            os.set_inheritable(fd, False)
        to_child_r, from_child_w = (_above_four(fd) for fd in (to_child_r, from_child_w))

        # the pipe's ends become the browser's descriptors 3 and 4 (bash's redirections: dash takes one digit)
        cmd = ["bash", "-c", f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w}', exe, *FLAGS,
               f"--user-data-dir={self.profile}", "about:blank"]
        self._log = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._log, pass_fds=(to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _read(self):
        while b"\0" not in self._buf:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                with open(self._log.name, errors="replace") as f:
                    tail = " | ".join(f.read().strip().splitlines()[-3:])
                raise RuntimeError(f"chromium closed the DevTools pipe ({tail or 'no output'})")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=False):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait(self, event):
        while not any(e.get("method") == event for e in self.events):
            self.events.append(self._read())

    def open(self, path, width=1280, height=1000):
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=True)
        self.events = []
        self.call("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=True)
        self.wait("Page.loadEventFired")
        # a round trip after the load event: console messages logged while loading are in
        self.evaluate("1")

    def evaluate(self, expr):
        res = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expr}: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def errors(self):
        """Console errors, uncaught exceptions and failed loads the page logged."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("text", "exception"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def screenshot(self, png, at=None):
        """A PNG of the viewport, scrolled to the first element whose text
        starts with `at` (an h2) when given."""
        if at is not None:
            found = self.evaluate(
                "(() => { for (const h of document.querySelectorAll('h1,h2,h3')) {"
                f" if (h.textContent.startsWith({json.dumps(at)})) {{ h.scrollIntoView(); return true; }} }}"
                " return false; })()")
            if not found:
                raise RuntimeError(f"no heading starting with {at!r}")
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        with open(png, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._r, self._w):
            os.close(fd)
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--shot", nargs=2, action="append", default=[], metavar=("HEADING", "PNG"),
                    help="a screenshot scrolled to the heading that starts with HEADING ('' for the top)")
    args = ap.parse_args(argv)
    with Browser() as b:
        b.open(args.page, args.width, args.height)
        text = b.evaluate("document.body.innerText")
        height = b.evaluate("document.documentElement.scrollHeight")
        for at, png in args.shot:
            b.screenshot(png, at or None)
            print(f"screenshot {png} ({at or 'top'})")
        errs = b.errors()
    print(f"{args.page}: rendered, {len(text)} characters of text, {height} px tall, {len(errs)} console errors")
    for e in errs:
        print(f"  error: {e}")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
