"""No code cell or output of a chapter or exercise scrolls sideways at a 1,280-pixel window.

A block that scrolls hides the end of its lines: the reader sees a cut-off
table or a call without its last argument. The check
(``browser.OVERFLOWING_BLOCKS``, with what was measured to size code and tables)
runs on every chapter and exercise page in ``test_site.py::test_page``, which
has the page open at that width already; this file shows that the check sees
a block that scrolls, and that there are pages for it to look at.

Needs Debian's chromium + chromium-driver; skips with the reason otherwise,
except under CI=true.
"""
import os
from pathlib import Path

import pytest

import browser as browser_mod

ROOT = Path(__file__).resolve().parents[3]
SITE = Path(os.environ.get("PM_SITE", ROOT / "_build" / "html"))
WIDTH = 1280


def _missing():
    if not SITE.joinpath("index.html").exists():
        return f"no built site at {SITE}: run `make book` first"
    return browser_mod.missing()


pytestmark = [pytest.mark.browser, pytest.mark.book]
needs_browser = browser_mod.required("the sideways-scrolling check", browser_mod.missing())
needs_site = browser_mod.required("the sideways-scrolling test", _missing())

browser = browser_mod.browser_fixture(f"{WIDTH},1000")


@needs_site
def test_there_are_chapter_and_exercise_pages():
    for folder in ("chapters", "exercises"):
        assert any(SITE.joinpath(folder).rglob("*.html")), f"no page in {SITE / folder}"


@needs_browser
def test_the_check_sees_a_block_that_scrolls(browser, tmp_path):
    """The check itself: a page with one over-long line in a cell is caught, a short one is not."""
    page = tmp_path / "wide.html"
    page.write_text("<html><body style='width: 700px'>"
                    "<div class='cell'><div class='cell_input'><pre style='overflow-x: auto'>short</pre></div>"
                    "<div class='cell_output'><pre style='overflow-x: auto'>" + "x" * 400 + "</pre></div></div>"
                    "</body></html>")
    browser.get(page.as_uri())
    found = browser.execute_script(browser_mod.OVERFLOWING_BLOCKS)
    assert [(b["cell"], b["kind"]) for b in found] == [(1, "output")], found
