"""The built site in a real browser: every page, offline, with working maths, images and scrubbers.

Needs `make book` first (``make test`` runs it before this file) and Debian's
chromium + chromium-driver. Skips with a reason when they are missing, except
under CI=true, where a missing browser is a failure.
"""
import os
import re
from pathlib import Path
from urllib.parse import urlparse

import browser as browser_mod
import pytest

ROOT = Path(__file__).resolve().parents[3]
SITE = Path(os.environ.get("PM_SITE", ROOT / "_build" / "html"))
SHOTS = Path(os.environ.get("PM_SCREENSHOTS", ROOT / "_build" / "screenshots"))


def _missing():
    if not SITE.joinpath("index.html").exists():
        return f"no built site at {SITE}: run `make book` first"
    return browser_mod.missing()


pytestmark = [pytest.mark.browser, pytest.mark.book, browser_mod.required("the browser test", _missing())]

PAGES = sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
               if not p.relative_to(SITE).parts[0].startswith("_")) if SITE.exists() else []


@pytest.fixture(scope="module")
def server():
    httpd = browser_mod.serve(SITE)
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


browser = browser_mod.browser_fixture("1280,1600", logs=True)


# Display maths whose typeset width exceeds the column it sits in (cut off or scrolled).
WIDE_EQUATIONS = """
    return [...document.querySelectorAll('mjx-container[display="true"]')].map(c => {
        const math = c.querySelector('mjx-math') || c;
        const column = c.closest('.math, div, section, article') || c.parentElement;
        const need = math.getBoundingClientRect().width, have = column.clientWidth;
        return {tex: (c.closest('.math') || c).textContent.slice(0, 40), need: Math.round(need), have};
    }).filter(e => e.have > 0 && e.need > e.have + 1)"""

# Caption text outside typeset maths that still looks like TeX.
RAW_CAPTIONS = r"""
    return [...document.querySelectorAll('figcaption, .caption, caption')].map(c => {
        const copy = c.cloneNode(true);
        copy.querySelectorAll('mjx-container, .math, script, code').forEach(e => e.remove());
        return copy.textContent;
    }).filter(t => /(^|[^A-Za-z])[A-Za-z]{1,2}[_^](\{|[A-Za-z0-9](?![A-Za-z0-9]))|\\[a-zA-Z]+|\$/.test(t))
      .map(t => t.trim())"""

# Captions in notebooks that another change owns (the exercises); each is fixed there.
KNOWN_RAW_CAPTIONS: dict[str, tuple[str, ...]] = {}  # page -> captions allowed to show raw TeX (none)

# WCAG 2 contrast of every visible text run against the colours painted behind it.
LOW_CONTRAST = r"""
    const theme = arguments[0];
    if (!document.getElementById('pm-no-transitions')) {  // measure the theme's colours, not a fade between them
        const style = document.createElement('style');
        style.id = 'pm-no-transitions';
        style.textContent = '*, *::before, *::after { transition: none !important; animation: none !important; }';
        document.head.appendChild(style);
    }
    document.documentElement.dataset.theme = theme;
    document.documentElement.dataset.mode = theme;
    const parse = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return null;
        const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
    const over = (top, bottom) => { const a = top[3];
        return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]); };
    const lum = (c) => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
        return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
    const background = (el) => { const layers = [];
        for (let e = el; e; e = e.parentElement) {
            const cs = getComputedStyle(e);
            if (cs.backgroundImage !== 'none' && !cs.backgroundImage.startsWith('linear-gradient')) return null;
            const c = parse(cs.backgroundColor);
            if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
        }
        let bg = [255, 255, 255, 1];
        for (const c of layers.reverse()) bg = over(c, bg);
        return bg; };
    const seen = new Set(), low = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const el = n.parentElement;
        if (!el || seen.has(el) || !n.textContent.trim()) continue;
        seen.add(el);
        if (el.closest('svg, mjx-container, script, style, noscript, [aria-hidden="true"], .visually-hidden, .sr-only')) continue;
        const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
        if (r.width === 0 || r.height === 0 || cs.visibility === 'hidden' || Number(cs.opacity) === 0) continue;
        let hidden = false;
        for (let e = el; e; e = e.parentElement) { const s = getComputedStyle(e);
            if (s.display === 'none' || Number(s.opacity) === 0 || s.visibility === 'hidden') { hidden = true; break; } }
        if (hidden) continue;
        const bg = background(el); if (!bg) continue;
        const fg0 = parse(cs.color); if (!fg0) continue;
        const fg = over(fg0, bg);
        const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
        const ratio = (hi + 0.05) / (lo + 0.05);
        const size = parseFloat(cs.fontSize), bold = Number(cs.fontWeight) >= 700;
        const need = (size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5;
        if (ratio < need) low.push(`${ratio.toFixed(2)} < ${need}: "${n.textContent.trim().slice(0, 30)}" (${el.tagName.toLowerCase()}.${[...el.classList].join('.')}, ${cs.color} on rgb(${bg.slice(0, 3).map(Math.round)}))`);
    }
    return low;"""


def test_there_are_pages():
    names = set(PAGES)
    assert "index.html" in names and len([p for p in names if p.startswith("chapters/")]) >= 9
    assert len([p for p in names if p.startswith("exercises/")]) >= 5


EXERCISE_PAGES = [p for p in PAGES if p.startswith("exercises/")]


@pytest.mark.parametrize("page", EXERCISE_PAGES)
def test_an_exercise_page_downloads_the_student_version(page):
    """The page's .ipynb button gives a blank notebook: no solutions, no hidden tests, every visible check."""
    from leaks import problems

    html = (SITE / page).read_text(encoding="utf-8")
    links = set(re.findall(r'href="([^"]*_sources/[^"]*\.ipynb)"', html))
    assert len(links) == 1, f"{page}: expected one notebook download link, found {links}"
    download = (SITE / page).parent.joinpath(links.pop()).resolve()
    source = ROOT / Path(page).with_suffix(".ipynb")
    assert download.is_file() and source.is_file(), (download, source)
    assert not problems(download, source), f"{page}: the downloaded notebook: {problems(download, source)}"
    # the launch buttons would open the repository's copy, the instructor's: an exercise page has none
    assert not re.search(r"mybinder\.org|colab\.research\.google\.com", html), f"{page} links to Binder or Colab"


def test_a_chapter_page_keeps_its_launch_buttons():
    """Only exercise pages lose them (so the test above is not passing for want of any)."""
    html = (SITE / "chapters" / "01_attention.html").read_text(encoding="utf-8")
    assert re.search(r"mybinder\.org", html) and re.search(r"colab\.research\.google\.com", html)


@pytest.mark.parametrize("page", PAGES)
def test_page(page, server, browser):
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{server}/{page}")
    assert browser_mod.typeset(browser, optional=True) is True, "MathJax did not finish"

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

    # 5. every displayed equation fits its column, at this width and at 1400 px
    for width in (1280, 1400):
        browser.set_window_size(width, 1600)
        wide = browser.execute_script(WIDE_EQUATIONS)
        assert not wide, f"{page}: equations wider than their column at a {width} px window: {wide}"
    browser.set_window_size(1280, 1600)

    # 6. captions are typeset: no TeX (^, _, \\, $) left in a caption's text
    raw_captions = [c for c in browser.execute_script(RAW_CAPTIONS)
                    if not any(k in c for k in KNOWN_RAW_CAPTIONS.get(page, ()))]
    assert not raw_captions, f"{page}: captions with raw TeX: {raw_captions}"

    # 7. text contrast at least WCAG AA (4.5:1, 3:1 for large text) in both themes
    for theme in ("light", "dark"):
        low = browser.execute_script(LOW_CONTRAST, theme)
        assert not low, f"{page}: text below WCAG AA contrast in the {theme} theme: {low[:5]}"
    browser.execute_script("document.documentElement.dataset.theme = 'light'")

    # 8. no console errors
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"{page}: console errors: {errors}"

    # 9. no code cell or output of a chapter or exercise scrolls sideways (test_no_sideways_scroll.py)
    if page.startswith(("chapters/", "exercises/")):
        found = browser.execute_script(browser_mod.OVERFLOWING_BLOCKS)
        assert not found, f"{page}: blocks wider than the column at a 1280 px window:\n" + "\n".join(
            f"  cell {b['cell']} {b['kind']}: {b['scroll']} px in {b['width']} px, longest line {b['longest']!r}"
            for b in found)

    # a screenshot of the whole page, for people to look at
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = min(browser.execute_script("return document.documentElement.scrollHeight"), 12000)
    browser.set_window_size(1280, height)
    browser.save_screenshot(str(SHOTS / (page.replace("/", "__").removesuffix(".html") + ".png")))
    browser.set_window_size(1280, 1600)
