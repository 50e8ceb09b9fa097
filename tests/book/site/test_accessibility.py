"""WCAG 2.1 AA on the built site: axe-core on every page in both themes, the keyboard, and reflow.

* axe-core (pinned on npm, installed by ``make test`` beside the browser) runs its
  WCAG 2.0/2.1 A and AA rules on every page of the site, in the light and the dark
  theme, and on each page of the course edition (where it was built) that is not the
  web edition's page in other words (the same elements and attributes, the same
  styles): its student versions, and outputs printed otherwise. Any violation fails,
  naming the rule, the elements and the page. A page with a nameless button shows
  the check can fail.
* Keyboard: each interactive figure is reached with Tab alone, shows its focus, and
  the arrow keys move it: the frame and its text alternative change.
* Reflow (WCAG 1.4.10): at 320 CSS pixels nothing but a code block is wider than
  the screen, and the page itself never scrolls sideways: each page of the web edition,
  as it is open for axe-core, narrowed to 320 px (a 1280-px window zoomed to 400 %).
"""
from __future__ import annotations

import functools
import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import browser as browser_mod
import pytest

ROOT = Path(__file__).resolve().parents[3]
SITE = Path(os.environ.get("PM_SITE", ROOT / "_build" / "html"))
COURSE_SITE = Path(os.environ.get("PM_COURSE_SITE", ROOT / "course" / "book" / "_build" / "html"))
AXE = Path(os.environ.get("PM_AXE", ROOT / ".venv" / "axe" / "node_modules" / "axe-core" / "axe.min.js"))
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def _missing():
    if not SITE.joinpath("index.html").exists():
        return f"no built site at {SITE}: run `make book` first"
    if not AXE.exists():
        return f"axe-core is not installed at {AXE} (make browser installs it with npm)"
    return browser_mod.missing()


pytestmark = [pytest.mark.browser, pytest.mark.book, browser_mod.required("the accessibility test", _missing())]


def _pages(site: Path) -> list[str]:
    if not site.exists():
        return []
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith("_"))


EDITIONS = {"site": SITE}
if COURSE_SITE.joinpath("index.html").exists() or os.environ.get("CI") == "true":
    EDITIONS["course"] = COURSE_SITE  # make test builds it (make pdf EDITION=course) before this file

_HASHES = re.compile(r"\?v=[0-9a-f]+")  # cache-busting suffixes, which differ between two builds
_IDS = re.compile(r"[0-9a-f]{32,}")  # the ids an animation draws at random, content hashes
_NAMES = {"alt", "title", "aria-label", "value", "content"}  # their words differ; that they are there counts


class _Skeleton(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list = []

    def handle_starttag(self, tag, attrs):
        def kept(k, v):  # a name: whether there is one; anything else: as written, ids and hashes aside
            return bool(v and v.strip()) if k in _NAMES else _IDS.sub("#", _HASHES.sub("", v or ""))
        self.out.append((tag, tuple((k, kept(k, v)) for k, v in attrs)))

    def handle_endtag(self, tag):
        self.out.append(("/", tag))

    def handle_data(self, data):
        if data.strip() and self.out[-1:] != ["text"]:
            self.out.append("text")


# Where a cell's printed lines end one block and the next begins: how the kernel happened to flush them
# (a block per line or one for all) differs between two runs; axe-core sees the same lines, in one style.
_SPLIT_STREAM = re.compile(r'</pre></div>\s*</div>\s*<div class="output stream highlight-myst-ansi notranslate">'
                           r'<div class="highlight"><pre><span></span>')


def skeleton(html: str) -> list:
    """What axe-core's WCAG rules see of a page, given its styles: every element with its attributes
    (names and alternatives only as present or empty), and where there is text, not its words; a cell's
    printed lines as one block, however many the kernel sent them in."""
    parser = _Skeleton()
    parser.feed(_SPLIT_STREAM.sub("", html))
    return parser.out


@functools.cache
def _course_pages() -> list[str]:
    """The course edition's pages that are not the web edition's page in other words (the same skeleton,
    and the same styles: test_the_editions_share_their_styles): exercises, and outputs printed otherwise."""
    if "course" not in EDITIONS:
        return []
    return [p for p in _pages(COURSE_SITE) if not SITE.joinpath(p).exists()
            or skeleton(SITE.joinpath(p).read_text(encoding="utf-8"))
            != skeleton(COURSE_SITE.joinpath(p).read_text(encoding="utf-8"))]


def test_the_course_edition_was_built():
    assert COURSE_SITE.joinpath("index.html").exists() or os.environ.get("CI") != "true", \
        f"no course edition at {COURSE_SITE}: make pdf EDITION=course builds it"
CASES = [("site", page) for page in _pages(SITE)] + [("course", page) for page in _course_pages()]



THEMES = ("light", "dark")


@pytest.fixture(scope="module")
def servers():
    """Each edition served twice, once per theme: the browser keeps a reader's saved theme per origin
    (host and port), so every page of a theme's origin opens in that theme from its first paint."""
    running = {(edition, theme): browser_mod.serve(site) for edition, site in EDITIONS.items() for theme in THEMES}
    urls = {key: f"http://127.0.0.1:{h.server_address[1]}" for key, h in running.items()}
    yield {edition: {theme: urls[edition, theme] for theme in THEMES} for edition in EDITIONS}
    for h in running.values():
        h.shutdown()


browser = browser_mod.browser_fixture("1280,1600")


RUN_AXE = """
    const [tags, done] = [arguments[0], arguments[arguments.length - 1]];
    axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
       .then(r => done(r.violations.map(v => ({
            rule: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 6), count: v.nodes.length}))),
             e => done(String(e)));"""


def landed(driver, settle: float = 0.3, timeout: float = 5.0) -> str:
    """The page's address once any redirect has run: loaded, and unchanged for ``settle`` s."""
    from selenium.common.exceptions import WebDriverException

    last, since = driver.current_url, time.monotonic()
    while time.monotonic() - since < timeout:
        time.sleep(0.1)
        try:
            ready = driver.execute_script("return document.readyState") == "complete"
        except WebDriverException:  # the page is being replaced
            ready = False
        now = driver.current_url
        if now != last or not ready:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle:
            break
    return last


_SAVED: set[str] = set()  # the origins where this browser has saved a theme


def open_in(driver, origin: str, page: str, theme: str) -> None:
    """Open ``page`` of ``origin`` as a reader who chose ``theme`` earlier on that site: the theme
    reads the saved choice as the page loads (switching on an open page would measure colours
    mid-transition). The choice is saved once per origin, on its first page."""
    url, first = f"{origin}/{page}", origin not in _SAVED
    driver.get(url)
    if first:
        # a redirect page (index.html: a meta refresh to intro.html) moves on after get() returns:
        # the choice is saved where it lands, not into the redirect's race, and that page loaded again
        url = landed(driver)
        driver.execute_script("localStorage.setItem('mode', arguments[0]);", theme)
        _SAVED.add(origin)
        driver.get(url)
    if driver.execute_script("return document.querySelector('meta[http-equiv=refresh]') !== null"):
        landed(driver)  # measure the page the redirect shows
    assert browser_mod.typeset(driver, optional=True) is True, "MathJax did not finish"
    # the theme applies the saved mode once its script has run; where that may have changed the
    # page's theme after its first paint (the first page of an origin, or a late switch), its 0.15 s
    # transitions end first
    shown = driver.execute_script("""
        const [theme, first] = arguments;
        return new Promise(done => { const wait = (n) =>
            document.documentElement.dataset.theme === theme
                ? setTimeout(() => done(theme), first || n ? 300 : 0)
                : n > 60 ? done(document.documentElement.dataset.theme) : setTimeout(() => wait(n + 1), 50);
            wait(0); });""", theme, first)
    assert shown == theme, f"{url}: asked for the {theme} theme, the page shows {shown}"


def violations(driver):
    """axe-core's WCAG A/AA violations on the open page."""
    if not driver.execute_script("return typeof axe !== 'undefined'"):
        driver.execute_script(AXE.read_text(encoding="utf-8"))
    found = driver.execute_async_script(RUN_AXE, WCAG_TAGS)
    assert not isinstance(found, str), f"axe-core failed: {found}"
    return found


def _say(found) -> str:
    return "; ".join(f"{v['rule']} ({v['impact']}, {v['count']}×: {v['help']}) at {v['nodes']}" for v in found)


@pytest.mark.parametrize(("edition", "page"), CASES, ids=[f"{e}:{p}" for e, p in CASES])
def test_no_axe_violations_and_reflow(edition, page, servers, browser):
    """axe-core in both themes; then, on the page as it is open, reflow at 320 px (web edition)."""
    for theme in THEMES:
        open_in(browser, servers[edition][theme], page, theme)
        found = violations(browser)
        assert not found, f"{edition} {page}, {theme} theme: {_say(found)}"
    if edition == "site":
        found = reflowed(browser)
        assert found["page"] <= 1 and not found["elements"], \
            f"{page} at 320 px: the page scrolls sideways by {found['page']} px; too wide: {found['elements']}"


@pytest.mark.skipif("course" not in EDITIONS, reason="the course edition was not built")
def test_the_editions_share_their_styles():
    """A course-edition page with the web edition's skeleton is not checked again: the two editions'
    styles, scripts and fonts must then be the same files."""
    def files(site):
        return {str(p.relative_to(site)): p.read_bytes() for p in (site / "_static").rglob("*")
                if p.is_file() and p.suffix in {".css", ".js", ".woff", ".woff2", ".ttf"}}
    web, course = files(SITE), files(COURSE_SITE)
    assert web.keys() == course.keys() and all(web[k] == course[k] for k in web), \
        sorted(k for k in web.keys() | course.keys() if web.get(k) != course.get(k))[:10]
    assert len(_course_pages()) < len(_pages(COURSE_SITE))  # pages are left out, and
    assert any(p.startswith("exercises/") for p in _course_pages())  # the student versions are not


def test_a_skeleton_tells_markup_from_words():
    page = '<p class="x">Some words <img alt="a plot" src="a.png?v=1f"></p>'
    assert skeleton(page) == skeleton('<p class="x">Other words <img alt="another plot" src="a.png?v=2e"></p>')
    assert skeleton(page) != skeleton('<p class="x">Some words <img alt="" src="a.png"></p>')  # no alternative
    assert skeleton(page) != skeleton('<p class="y">Some words <img alt="a plot" src="a.png"></p>')  # other colours
    assert skeleton(page) != skeleton('<p class="x">Some words <img alt="a plot" src="a.png"><button></button></p>')
    block = ('<div class="output stream highlight-myst-ansi notranslate"><div class="highlight"><pre><span></span>'
             '{}</pre></div>\n</div>\n')
    one, two = block.format("a = 1\nb = 2\n"), block.format("a = 1\n") + block.format("b = 2\n")
    assert skeleton(one) == skeleton(two) != skeleton(block.format("a = 1\n") + "<p>b</p>" + block.format("b = 2\n"))


def test_axe_finds_a_broken_page(tmp_path, browser):
    """The check can fail: a copy of a real page with a button that has no name."""
    page = next(iter(_pages(SITE)))
    broken = tmp_path / "broken"
    broken.mkdir()
    html = SITE.joinpath(page).read_text(encoding="utf-8")
    (broken / "page.html").write_text(html.replace("<main", '<button class="pm-broken"></button><main', 1),
                                      encoding="utf-8")
    httpd = browser_mod.serve(broken)
    try:
        browser.get(f"http://127.0.0.1:{httpd.server_address[1]}/page.html")
        rules = {v["rule"] for v in violations(browser)}
    finally:
        httpd.shutdown()
    assert "button-name" in rules, rules


FIGURE_PAGES = [p for p in _pages(SITE) if 'class="anim-slider"' in SITE.joinpath(p).read_text(encoding="utf-8")]

# What the reader's browser shows of the focused element and of the first figure's state.
FOCUS_STATE = """
    const a = document.activeElement;
    const style = getComputedStyle(a);
    const fig = a.closest ? a.closest('.animation') : null;
    const img = fig ? fig.querySelector('img') : null;
    return {slider: a.classList.contains('anim-slider'), value: a.value,
            outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0,
            shadow: style.boxShadow !== 'none',
            src: img ? img.src.slice(-80) : null, alt: img ? img.alt : null,
            live: fig ? (fig.closest('.pm-scrubber') || fig).querySelector('[aria-live]')?.textContent : null}"""


@pytest.mark.parametrize("page", FIGURE_PAGES)
def test_interactive_figures_work_from_the_keyboard(page, servers, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{servers['site']['light']}/{page}")
    n_figures = browser.execute_script("return document.querySelectorAll('input.anim-slider').length")
    reached = 0
    body = browser.find_element("tag name", "body")
    body.click()
    for _ in range(400):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        state = browser.execute_script(FOCUS_STATE)
        if not state["slider"]:
            continue
        reached += 1
        assert state["outline"] or state["shadow"], f"{page}: figure {reached} shows no focus: {state}"
        ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
        after = browser.execute_script(FOCUS_STATE)
        assert after["value"] != state["value"] and after["src"] != state["src"], \
            f"{page}: the arrow key did not move figure {reached}: {state} -> {after}"
        assert after["live"] and after["live"] != state["live"], \
            f"{page}: figure {reached}'s text alternative did not follow the frame: {state} -> {after}"
        if reached == n_figures:
            break
    assert reached == n_figures, f"{page}: Tab reached {reached} of {n_figures} interactive figures"


# Elements wider than the window that are not (inside) a block that scrolls on its own.
TOO_WIDE = """
    const w = document.documentElement.clientWidth;
    const scrolls = (e) => { for (; e && e !== document.body; e = e.parentElement) {
        const s = getComputedStyle(e);
        if (['auto', 'scroll'].includes(s.overflowX) && e.clientWidth <= w) return true;
        if (e.matches('pre, .highlight, .cell_output, .output')) return true; }
        return false; };
    const out = [];
    for (const e of document.querySelectorAll('body *')) {
        if (e.closest('.bd-sidebar-primary, .bd-sidebar-secondary, dialog, .search-button__wrapper')) continue;
        const r = e.getBoundingClientRect();
        if (r.width === 0 || getComputedStyle(e).visibility === 'hidden') continue;
        if ((r.right > w + 1 || r.left < -1) && !scrolls(e)) {
            out.push((e.tagName + '.' + [...e.classList].join('.')).slice(0, 60) + ' ' + Math.round(r.right));
        }
    }
    return {page: document.documentElement.scrollWidth - w, elements: out.slice(0, 8)};"""


# _static/reflow.js marks inline formulas too wide for their line once MathJax is done, and again
# 0.1 s after the window's width changes: true once it has
WAIT_FOR_REFLOW = """
    const done = arguments[arguments.length - 1];
    const wait = (n) => (document.documentElement.dataset.pmReflow === 'done' || n > 100)
        ? done(document.documentElement.dataset.pmReflow === 'done') : setTimeout(() => wait(n + 1), 50);
    wait(0);"""


def reflowed(driver) -> dict:
    """What is too wide on the open page once the window is 320 CSS px wide: what a reader sees who
    zooms a 1280-px window to 400 % (WCAG 1.4.10's case), the page reflowing without a reload."""
    assert driver.execute_async_script(WAIT_FOR_REFLOW), "reflow.js did not mark the page's formulas"
    driver.execute_script("delete document.documentElement.dataset.pmReflow")
    driver.set_window_size(320, 900)
    try:
        assert driver.execute_script("return document.documentElement.clientWidth") <= 320
        assert driver.execute_async_script(WAIT_FOR_REFLOW), "reflow.js did not mark the formulas again at 320 px"
        return driver.execute_script(TOO_WIDE)
    finally:
        driver.set_window_size(1280, 1600)


def test_reflow_finds_a_page_too_wide(servers, browser):
    """The check can fail: a real page given a block of a fixed 900-px width before its main column."""
    browser.get(f"{servers['site']['light']}/chapters/01_attention.html")
    assert browser_mod.typeset(browser, optional=True) is True, "MathJax did not finish"
    browser.execute_script("""document.querySelector('main').insertAdjacentHTML(
        'beforebegin', '<div class="pm-too-wide" style="width: 900px">wide</div>')""")
    found = reflowed(browser)
    assert found["page"] > 1 and found["elements"], found  # what test_no_axe_violations_and_reflow refuses
