"""Headless Chromium for the tests that look at pages: the site, JupyterLab, feedback.

Debian's ``chromium`` and ``chromium-driver`` with the flags measured to work here
(no sandbox, GPU, background networking or first-run chores) and a fresh profile.
"""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        return "Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    return None


def required(what: str, reason: str | None):
    """A skip mark for a browser test that cannot run (``reason``), except under CI=true,
    where it runs, and fails saying why."""
    return pytest.mark.skipif(reason is not None and os.environ.get("CI") != "true",
                              reason=f"{what} skips: {reason}")


def chrome(profile: Path, size: str, *flags: str, logs: bool = False):
    """A headless Chromium driver with a fresh ``profile`` folder, a window of ``size`` ("W,H")."""
    if missing():
        raise RuntimeError(f"no browser for this test: {missing()}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={size}", *flags, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    if logs:
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver



def browser_fixture(size: str, logs: bool = False):
    """A module-scoped pytest fixture ``browser``: a headless Chromium with a window of ``size``
    ("W,H"), quit when the module's tests are done. ``browser = browser_fixture("1280,1600")``."""

    @pytest.fixture(scope="module")
    def browser(tmp_path_factory):
        driver = chrome(tmp_path_factory.mktemp("chromium-profile"), size, logs=logs)
        yield driver
        driver.quit()

    return browser

# Resolves true once MathJax has typeset the page; without MathJax, true if the page has no
# maths (``optional``) and the reason otherwise.
WAIT_FOR_MATHJAX = """
    const [optional, polls, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
    const wait = (n) => {
        if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
            MathJax.startup.promise.then(() => done(true), (e) => done(String(e)));
        } else if (n > polls) { done(optional && !document.querySelector('.math') ? true : 'MathJax never loaded'); }
        else { setTimeout(() => wait(n + 1), 50); }
    };
    wait(0);"""


def typeset(driver, optional: bool = False):
    """Wait for MathJax on the open page (5 s for it to appear where it is ``optional``, else 10 s):
    True, or why not."""
    return driver.execute_async_script(WAIT_FOR_MATHJAX, optional, 100 if optional else 200)


# What a page's maths looks like once the browser has laid it out: MathML elements and their
# sizes, and any TeX left as text (``$...$``, ``\(...\)``, ``\[...\]``, ``\frac`` and the like).
MATHS_ON_PAGE = r"""
    const maths = [...document.querySelectorAll('math')];
    const sizes = maths.map((m) => { const r = m.getBoundingClientRect(); return [r.width, r.height]; });
    const text = document.body.innerText;
    const tex = text.match(/\$[^$\n]+\$|\\\(|\\\[|\\(frac|sqrt|alpha|beta|mathbf|sum)\b/g) || [];
    return {maths: maths.length, empty: sizes.filter(([w, h]) => !(w > 0 && h > 0)).length,
            tex: tex.slice(0, 10), scripts: document.querySelectorAll('script[src]').length};"""


# Every visible block of code or output of a chapter or exercise that is wider than its box
# (a block that scrolls hides the end of its lines: a cut-off table, a call without its last
# argument). A block hidden by a toggle (hide-input) has no layout box and cannot scroll.
# Measured here (sphinx-book-theme 1.3, Chromium, 1,280-px window): a code cell's box is 672 px
# wide, 654 px in a collapsed (hide-input) cell, and holds 75 characters of code (73 in the
# collapsed one: 8.5 px a character, 27 px of padding); so code is formatted with ruff at 74
# characters (72 in hide-input cells) and tables are printed to fit.
OVERFLOWING_BLOCKS = """
    const blocks = [];
    document.querySelectorAll('div.cell').forEach((cell, n) => {
        const parts = [['code', cell.querySelectorAll('.cell_input pre')],
                       ['output', cell.querySelectorAll('.cell_output pre, .cell_output .output, .cell_output table')]];
        for (const [kind, els] of parts) {
            els.forEach(e => {
                if (e.offsetParent === null) return;  // not displayed
                if (e.scrollWidth > e.clientWidth + 1) {
                    const line = (e.textContent || '').split('\\n').reduce((a, b) => b.length > a.length ? b : a, '');
                    blocks.push({cell: n + 1, kind: kind, scroll: e.scrollWidth, width: e.clientWidth,
                                 longest: line.trim().slice(0, 60)});
                }
            });
        }
    });
    return blocks;"""

def maths_offline(driver, page: Path) -> dict:
    """Open ``page`` with the network off and no script of its own needed: how its maths came out
    (``maths``: MathML elements, ``empty``: those with no size, ``tex``: raw TeX left in the text,
    ``scripts``: scripts it loads)."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    driver.get(page.as_uri())
    return driver.execute_script(MATHS_ON_PAGE)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path) -> http.server.ThreadingHTTPServer:
    """Serve ``directory`` on a free loopback port, in a daemon thread; ``shutdown()`` stops it."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd
