"""Show the front page's PDF link once the PDF is beside the site.

The introduction carries two spans: the link to ``patterns-and-messages.pdf``
(hidden) and a sentence saying that ``make pdf`` builds it (shown). A site
built by ``make book`` alone has no PDF, so its link stays hidden and nothing
on the page points at a missing file. ``make pdf`` copies the PDF beside the
site and then runs this script on that site, which shows the link and hides
the sentence: ``python scripts/pdf_link.py SITE_DIR``.
"""
from __future__ import annotations

import sys
from pathlib import Path

PDF = "patterns-and-messages.pdf"
HIDDEN_LINK, SHOWN_LINK = '<span id="pm-pdf-link" hidden>', '<span id="pm-pdf-link">'
SHOWN_NOTE, HIDDEN_NOTE = '<span id="pm-pdf-missing">', '<span id="pm-pdf-missing" hidden>'


def show_link(site: Path) -> list[Path]:
    """Show the link on every page of ``site`` that has it, if the PDF is there; the pages changed."""
    if not (site / PDF).is_file():
        return []
    changed = []
    for page in sorted(site.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        if HIDDEN_LINK in html:
            page.write_text(html.replace(HIDDEN_LINK, SHOWN_LINK).replace(SHOWN_NOTE, HIDDEN_NOTE), encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit(f"usage: python {sys.argv[0]} SITE_DIR (a built site, e.g. _build/html)")
    pages = show_link(Path(sys.argv[1]))
    print(f"PDF link shown on {', '.join(p.name for p in pages)}" if pages else "no PDF link to show")
