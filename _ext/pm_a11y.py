"""Accessible page chrome (WCAG 2.1 AA): corrections to what the theme and extensions write.

No setting of the theme or the extensions changes these, so each written page is
corrected after the build; each rule names the upstream element it corrects and the
WCAG criterion it restores. ``tests/book/site/test_accessibility.py`` runs axe-core on
every page, in both themes, and fails if any of them comes back.

* pydata-sphinx-theme's search button (``components/search-button-field.html``)
  shows "Search Ctrl+K" but is named "Search" by ``aria-label``: a speech-input
  user who says what they see cannot press it (2.5.3 Label in Name). Without the
  label its name is its visible text.
* pydata-sphinx-theme's colour-mode button (``components/theme-switcher.html``)
  holds three icons whose ``title`` (Light, Dark, System Settings) counts as
  visible text that its name "Color mode" does not contain (2.5.3). The icons are
  decoration: hidden from assistive technology, the button keeps its name, and it
  says which mode is on through its tooltip as before.
* MyST-NB's folded cells (``<summary aria-label="Toggle hidden content">``) show
  "Show code cell source" (2.5.3): without the label the summary is named by its
  text.
* sphinxcontrib-bibtex's citation list (``<div role="list" class="citation-list">``
  whose children are ``<div role="doc-biblioentry">``, a role deprecated in
  WAI-ARIA 1.3 that is not a list item: 1.3.1 Info and Relationships): the entries
  become list items, their label stays in their text.
"""
from __future__ import annotations

import re
from pathlib import Path

# (pattern, replacement, what it corrects); each applies wherever the pattern is found
RULES = [
    (re.compile(r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="[^"]*"'), r"\1",
     "search button: named by its visible text"),
    (re.compile(r'<i (class="theme-switch [^"]*"\s+data-mode="[a-z]*")\s+title="[^"]*"'),
     r'<i aria-hidden="true" \1', "colour-mode button: its icons are decoration"),
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>",
     "folded cells: named by their visible text"),
    (re.compile(r'role="doc-biblioentry"'), 'role="listitem"',
     "bibliography: its entries are items of its list"),
]


def correct(html: str) -> str:
    """The page with every rule applied."""
    for pattern, replacement, _ in RULES:
        html = pattern.sub(replacement, html)
    return html


def _correct_pages(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = correct(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _correct_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
