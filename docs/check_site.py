"""Check the built HTML in headless Chromium: the diagram rendered, no broken internal link.

Run by ``nox -s docs`` after the build: ``python docs/check_site.py docs/_build/html``.
Chromium is driven through its DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so nothing but the
standard library and the browser is needed, and no network port is opened.

For every ``*.html`` page the browser loads the page from ``file://`` and reports the
``href`` of every link (resolved by the browser) and every element ``id``. Then:

- the guide must contain an ``<svg>`` element that the browser laid out with a
  non-zero size and whose text holds the name of every Stage-1 phase
  (``kiln_rewrite.PHASES``) and of the default backend;
- every link to a local file must point to an existing file, and a link with a
  fragment (``page.html#section``) to an element with that ``id`` in that page.

Exits 1 with the list of failures, 0 when all pass; 2 if Chromium is missing.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urlparse

REPLY_TIMEOUT_S = 60
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)
COLLECT = """(() => ({
  ready: document.readyState,
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
  svgs: Array.from(document.querySelectorAll('svg')).map(s => {
    const r = s.getBoundingClientRect();
    return {width: r.width, height: r.height, text: s.textContent};
  }),
}))()"""


class Browser:
    """A headless Chromium driven over ``--remote-debugging-pipe``."""

    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="kiln-docs-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser reads commands on its fd 3 and writes replies on its fd 4. Copies of
        # the child's ends at numbers above 4 make the two dup2 calls in the child safe.
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)

        def child_fds() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self._proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child_fds,
        )
        os.close(child_in)
        os.close(child_out)
        self._buffer = b""
        self._next_id = 0
        self.session = self._attach()

    def _send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], REPLY_TIMEOUT_S)
            if not ready:
                raise RuntimeError(f"Chromium sent no reply in {REPLY_TIMEOUT_S} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _attach(self) -> str:
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})
        return session["sessionId"]

    def evaluate(self, expression: str) -> Any:
        """Return the value of a JavaScript expression in the page."""
        result = self._send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            self.session,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, url: str, timeout: float = 30.0) -> dict[str, Any]:
        """Navigate to ``url``, wait until it is loaded, and return what COLLECT reports."""
        self._send("Page.navigate", {"url": url}, self.session)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.evaluate(COLLECT)
            if info and info["ready"] == "complete" and self.evaluate("location.href") == url:
                return info
            time.sleep(0.05)
        raise RuntimeError(f"{url} did not finish loading in {timeout} s")

    def close(self) -> None:
        """Close the browser and remove its profile folder."""
        try:
            self._send("Browser.close")
        except Exception:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)


def find_browser() -> str | None:
    """Return the path of a Chromium executable on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def check(site: Path, browser: Browser, guide: str, must_show: list[str]) -> list[str]:
    """Return the failures found in the built site ``site``."""
    failures: list[str] = []
    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)
    if not pages:
        return [f"no HTML page under {site}"]
    seen: dict[Path, dict[str, Any]] = {}
    for page in pages:
        seen[page.resolve()] = browser.load(page.resolve().as_uri())
    guide_info = seen.get((site / guide).resolve())
    if guide_info is None:
        failures.append(f"the guide {guide} was not built")
    else:
        shown = [
            s
            for s in guide_info["svgs"]
            if s["width"] > 0 and s["height"] > 0 and all(name in s["text"] for name in must_show)
        ]
        if not shown:
            failures.append(
                f"{guide}: no rendered <svg> (non-zero size) showing all of {must_show}; "
                f"found {[(round(s['width']), round(s['height'])) for s in guide_info['svgs']]}"
            )
    for page, info in seen.items():
        name = page.relative_to(site.resolve())
        for href in info["links"]:
            url, fragment = urldefrag(href)
            parsed = urlparse(url)
            if parsed.scheme != "file":
                continue  # external links are not followed (no network here)
            target = Path(unquote(parsed.path))
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                failures.append(f"{name}: broken link {href}")
                continue
            if fragment and target.suffix == ".html":
                ids = seen.get(target.resolve(), {}).get("ids", [])
                if unquote(fragment) not in ids:
                    failures.append(f"{name}: link {href}: no element with id {fragment!r}")
    return failures


def main(argv: list[str] | None = None) -> int:
    """Check the site given on the command line; print the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built HTML folder (docs/_build/html)")
    parser.add_argument("--guide", default="guide.html", help="the page with the diagram")
    args = parser.parse_args(argv)
    executable = find_browser()
    if executable is None:
        print(
            "check_site: Chromium is not installed (Debian: apt-get install chromium); "
            "the docs are checked in a real browser",
            file=sys.stderr,
        )
        return 2
    from kiln_compile._linkers import resolve_linker_name
    from kiln_rewrite import PHASES

    must_show = [*PHASES, resolve_linker_name("auto", warn=False)]
    browser = Browser(executable)
    start = time.perf_counter()
    try:
        failures = check(args.site, browser, args.guide, must_show)
    finally:
        browser.close()
    pages = sum(1 for p in args.site.rglob("*.html") if "_static" not in p.parts)
    if failures:
        print(f"check_site: {len(failures)} failure(s) in {pages} pages:")
        for failure in failures:
            print(f"  {failure}")
        return 1
    print(
        f"check_site: {pages} pages loaded in Chromium in {time.perf_counter() - start:.1f} s: "
        f"the pipeline diagram is rendered with {must_show}, and every internal link resolves"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
