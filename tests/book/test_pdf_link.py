"""The front page links the PDF only where the PDF is beside the site (scripts/pdf_link.py, run by make pdf)."""
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pdf_link", ROOT / "scripts" / "pdf_link.py")
pdf_link = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pdf_link)


def spans() -> str:
    """The two spans as the introduction writes them (MyST passes inline HTML through)."""
    text = (ROOT / "intro.md").read_text(encoding="utf-8")
    found = re.search(r'<span id="pm-pdf-missing">.*?</span>\s*<span id="pm-pdf-link" hidden>.*?</span>',
                      text, flags=re.S)
    assert found, "intro.md has lost its two PDF spans (the note shown, the link hidden)"
    assert f'href="{pdf_link.PDF}"' in found.group(0)
    return found.group(0)


def test_the_link_stays_hidden_without_the_pdf_and_shows_with_it(tmp_path):
    page = tmp_path / "intro.html"
    page.write_text(f"<p>{spans()}</p>", encoding="utf-8")
    assert pdf_link.show_link(tmp_path) == []  # make book alone: no PDF, the link stays hidden
    assert pdf_link.HIDDEN_LINK in page.read_text(encoding="utf-8")
    (tmp_path / pdf_link.PDF).write_bytes(b"%PDF-1.5\n")
    assert pdf_link.show_link(tmp_path) == [page]
    html = page.read_text(encoding="utf-8")
    assert pdf_link.SHOWN_LINK in html and pdf_link.HIDDEN_LINK not in html
    assert pdf_link.HIDDEN_NOTE in html
    assert pdf_link.show_link(tmp_path) == []  # a second run changes nothing


def test_make_pdf_runs_it_beside_each_edition():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert makefile.count("scripts/pdf_link.py") == 2
