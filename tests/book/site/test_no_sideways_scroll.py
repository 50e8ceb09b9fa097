"""No code cell or output of a chapter or exercise scrolls sideways at a 1,280-pixel window.

A block that scrolls hides the end of its lines: the reader sees a cut-off
table or a call without its last argument. Measured here (sphinx-book-theme
1.3, Chromium, 1,280-px window): a code cell's box is 672 px wide, 654 px in
a collapsed (hide-input) cell, and holds 75 characters of code (73 in the
collapsed one: 8.5 px a character, 27 px of padding). So code is formatted with ruff at 74 characters (72
in hide-input cells) and tables are printed to fit. This test looks at the
built pages in Chromium and names every block that still overflows its
column, page by page.

Needs a built site (`make book`, or PM_SITE pointing at one) and Debian's
chromium + chromium-driver; skips with the reason otherwise, except under
CI=true.
"""
import os
from pathlib import Path

import browser as browser_mod
import pytest

ROOT = Path(__file__).resolve().parents[3]
SITE = Path(os.environ.get("PM_SITE", ROOT / "_build" / "html"))
WIDTH = 1280


def _missing():
    if not SITE.joinpath("index.html").exists():
        return f"no built site at {SITE}: run `make book` first"
    return browser_mod.missing()


needs_browser = browser_mod.required("the sideways-scrolling check", browser_mod.missing())
needs_site = browser_mod.required("the sideways-scrolling test", _missing())

PAGES = sorted(str(p.relative_to(SITE)) for folder in ("chapters", "exercises")
               for p in SITE.joinpath(folder).rglob("*.html")) if SITE.exists() else []

# Every visible block of code or output that is wider than its box. A block
# hidden by a toggle (hide-input) has no layout box and cannot scroll.
OVERFLOWING = """
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


browser = browser_mod.browser_fixture(f"{WIDTH},1000")


@needs_site
def test_there_are_chapter_and_exercise_pages():
    assert any(p.startswith("chapters/") for p in PAGES) and any(p.startswith("exercises/") for p in PAGES)


@needs_browser
def test_the_check_sees_a_block_that_scrolls(browser, tmp_path):
    """The check itself: a page with one over-long line in a cell is caught, a short one is not."""
    page = tmp_path / "wide.html"
    page.write_text("<html><body style='width: 700px'>"
                    "<div class='cell'><div class='cell_input'><pre style='overflow-x: auto'>short</pre></div>"
                    "<div class='cell_output'><pre style='overflow-x: auto'>" + "x" * 400 + "</pre></div></div>"
                    "</body></html>")
    browser.get(page.as_uri())
    found = browser.execute_script(OVERFLOWING)
    assert [(b["cell"], b["kind"]) for b in found] == [(1, "output")], found


@needs_site
@pytest.mark.parametrize("page", PAGES)
def test_no_block_scrolls_sideways(page, browser):
    browser.set_window_size(WIDTH, 1000)
    browser.get(SITE.joinpath(page).as_uri())
    found = browser.execute_script(OVERFLOWING)
    assert not found, f"{page}: blocks wider than the column at a {WIDTH} px window:\n" + "\n".join(
        f"  cell {b['cell']} {b['kind']}: {b['scroll']} px in {b['width']} px, longest line {b['longest']!r}"
        for b in found)
