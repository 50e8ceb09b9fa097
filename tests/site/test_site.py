"""The built site in a real browser: every page, offline, with working maths, images and scrubbers.

Needs `make book` first (``make test`` runs it before this file) and Debian's
chromium + chromium-driver. Skips with a reason when they are missing, except
under CI=true, where a missing browser is a failure.
"""
import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("PM_SITE", ROOT / "_build" / "html"))
SHOTS = Path(os.environ.get("PM_SCREENSHOTS", ROOT / "_build" / "screenshots"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def _missing():
    if not SITE.joinpath("index.html").exists():
        return f"no built site at {SITE}: run `make book` first"
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        return "Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    return None


REASON = _missing()
if REASON and os.environ.get("CI") == "true":
    raise RuntimeError(f"the browser test is required in CI: {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

PAGES = sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
               if not p.relative_to(SITE).parts[0].startswith("_")) if SITE.exists() else []


@pytest.fixture(scope="module")
def server():
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage", "--window-size=1280,1600",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()


def _typeset(driver):
    """Wait for MathJax to finish (if the page loads it)."""
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const wait = (n) => {
            if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
                MathJax.startup.promise.then(() => done(true), (e) => done(String(e)));
            } else if (n > 100) { done(document.querySelector('.math') ? 'MathJax never loaded' : true); }
            else { setTimeout(() => wait(n + 1), 50); }
        };
        wait(0);""")


def test_there_are_pages():
    names = set(PAGES)
    assert "index.html" in names and len([p for p in names if p.startswith("chapters/")]) >= 9
    assert len([p for p in names if p.startswith("exercises/")]) >= 5


@pytest.mark.parametrize("page", PAGES)
def test_page(page, server, browser):
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{server}/{page}")
    assert _typeset(browser) is True, "MathJax did not finish"

    # 1. nothing from outside this machine: every resource came from the local server
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    foreign = [u for u in resources if urlparse(u).hostname not in ("127.0.0.1", None) and not u.startswith("data:")]
    assert not foreign, f"{page} loads from outside: {foreign}"

    # 2. maths typeset: every math element holds MathJax output, no raw TeX left
    raw = browser.execute_script("""
        return [...document.querySelectorAll('.math')]
            .filter(e => !e.querySelector('mjx-container'))
            .map(e => e.textContent.slice(0, 60))""")
    assert not raw, f"{page} has untypeset maths: {raw[:3]}"
    stray = browser.execute_script(r"""
        const main = document.querySelector('main') || document.body;
        const copy = main.cloneNode(true);
        copy.querySelectorAll('pre, code, .math, mjx-container, script, style, .cell_output, .output')
            .forEach(e => e.remove());
        const m = copy.textContent.match(/.{0,30}(\$|\\\(|\\\[|\\begin\{|\\frac).{0,30}/);
        return m ? m[0] : null""")
    assert stray is None, f"{page} shows raw TeX in its prose: {stray!r}"
    if browser.execute_script("return document.querySelectorAll('.math').length"):
        assert browser.execute_script("return document.querySelectorAll('mjx-container').length") > 0

    # 3. every image loaded and says what it shows
    images = browser.execute_script("""
        return [...document.querySelectorAll('img')].map(i => ({
            src: i.currentSrc.slice(0, 80), ok: i.complete && i.naturalWidth > 0,
            alt: (i.getAttribute('alt') || '').trim()}))""")
    broken = [i["src"] for i in images if not i["ok"]]
    # Sphinx falls back to the file name as alt text: that says nothing, so it counts as missing
    no_alt = [i["src"] for i in images if not i["alt"] or re.search(r"\.(png|jpe?g|svg|gif)$", i["alt"])]
    assert not broken, f"{page}: images that did not load: {broken}"
    assert not no_alt, f"{page}: images without alt text: {no_alt}"

    # 4. every interactive figure responds: driving its slider changes the frame
    scrubbers = browser.execute_script("""
        return [...document.querySelectorAll('input.anim-slider')].map(s => {
            const img = s.closest('.animation').querySelector('img');
            const before = img.src;
            s.value = s.max; s.dispatchEvent(new Event('input'));
            const last = img.src;
            s.value = 0; s.dispatchEvent(new Event('input'));
            return {changed: before !== last, back: img.src === before, frames: Number(s.max) + 1};
        })""")
    for i, s in enumerate(scrubbers):
        assert s["frames"] >= 2 and s["changed"] and s["back"], f"{page}: scrubber {i} does not respond: {s}"

    # 5. no console errors
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"{page}: console errors: {errors}"

    # a screenshot of the whole page, for people to look at
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = min(browser.execute_script("return document.documentElement.scrollHeight"), 12000)
    browser.set_window_size(1280, height)
    browser.save_screenshot(str(SHOTS / (page.replace("/", "__").removesuffix(".html") + ".png")))
    browser.set_window_size(1280, 1600)
