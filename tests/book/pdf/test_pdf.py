"""The PDF edition, checked like the site: titles in order, nothing unresolved, nothing off the page.

Needs ``make pdf`` and ``make pdf EDITION=course`` first (``make test`` runs
them, after the site's build, whose figures the PDF is compared with).
"""
import re
import subprocess
from pathlib import Path

import leaks  # tests/helpers
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PDF = ROOT / "_build" / "pdf" / "patterns-and-messages.pdf"
LOG = PDF.with_suffix(".log")
TEX = ROOT / "_build" / "latex" / "patterns-and-messages.tex"
SITE = ROOT / "_build" / "html"
COURSE_PDF = ROOT / "course" / "book" / "_build" / "pdf" / "patterns-and-messages-course.pdf"
MAX_OVERFULL_PT = 5.0

pytestmark = pytest.mark.book


def _need(path, how):
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: run `{how}` first")


def pdftotext(pdf):
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], check=True,
                          capture_output=True, text=True).stdout


def squash(text):
    """Letters and digits only, lower case: what survives line breaks, hyphens and small capitals."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def toc_titles():
    """(number, title) of every chapter and exercise, in the order of _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    out = []
    for part in toc["parts"]:
        for entry in part["chapters"]:
            path = ROOT / (entry["file"] + ".ipynb")
            if not path.exists():
                continue
            first = nbformat.read(path, as_version=4).cells[0].source
            title = next(line[2:] for line in first.splitlines() if line.startswith("# "))
            out.append(title)
    return out


def words(title):
    """The title's number ("" for an unnumbered page such as the asides), its first and its
    longest stretch of words outside maths, squashed."""
    match = re.match(r"(?:Exercise )?(\d+)[.:]\s+(.*)", title)
    number, rest = match.groups() if match else ("", title)
    prose = [squash(p) for p in re.split(r"\$[^$]*\$", rest)]
    return number, prose[0], max(prose, key=len)


@pytest.fixture(scope="module")
def text():
    _need(PDF, "make pdf")
    return pdftotext(PDF)


def test_titles_in_order_in_contents_and_body(text):
    titles = toc_titles()
    assert len(titles) >= 18, titles  # 13 chapters and 5 exercises at the time of writing
    flat = squash(text)
    contents_start = flat.index("contents")
    body_start = flat.index("aboutthisbook", flat.index("aboutthisbook", contents_start) + 1)
    at_toc, at_body = contents_start, body_start
    for title in titles:
        number, first, prose = words(title)
        at_toc = flat.find(number + first, at_toc)
        assert 0 <= at_toc < body_start, f"{title!r} is not in the contents as {number} {first!r}, in order"
        at_body = flat.find(prose, at_body)
        assert at_body >= 0, f"{title!r} is not in the body after the previous title"


def test_nothing_unresolved(text):
    assert "??" not in text, "unresolved references or citations (??) in the PDF"
    log = LOG.read_text(errors="replace")
    undefined = re.findall(r"(?:Reference|Citation) `[^']*' on page \d+ undefined", log)
    assert not undefined, undefined[:5]


def _code_lines():
    """Every line of every code cell of the book's notebooks, stripped: code may hold TeX
    (a figure's title, for matplotlib), which the PDF prints as code."""
    lines = set()
    for path in [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/*/*.ipynb")]:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                lines.update(line.strip() for line in cell.source.splitlines())
    return lines


def test_no_raw_tex_or_web_only_text(text):
    code = _code_lines()
    raw = [line for line in text.splitlines()
           if re.search(r"\\(?:frac|sqrt|begin|end|mathbb|operatorname|top|sum|left|right|mathrm)\b"
                        r"|\$\$|\\\(|\\\)", line) and line.strip() not in code]
    assert not raw, f"raw TeX in the PDF, outside code: {raw[:5]}"
    for web in ("Show code cell", "Hide code cell", "IPython.core.display", "<Figure size"):
        assert web not in text, f"{web!r} in the PDF"


def test_no_overfull_boxes():
    _need(LOG, "make pdf")
    log = LOG.read_text(errors="replace")
    boxes = [(float(pt), line) for pt, line in
             re.findall(r"Overfull \\[hv]box \(([\d.]+)pt too \w+\) .*?lines? (\d+)", log)]
    assert "Overfull" not in log or boxes, "the log reports overfull boxes this test cannot read"
    wide = [f"{pt}pt at line {line} of {TEX.name}" for pt, line in boxes if pt > MAX_OVERFULL_PT]
    assert not wide, f"overfull boxes wider than {MAX_OVERFULL_PT}pt: {wide}"


def _site_figures():
    """Images in the main content of each chapter and exercise page of the site."""
    _need(SITE / "index.html", "make book")
    out = {}
    for page in [*SITE.glob("chapters/*.html"), *SITE.glob("exercises/*/*.html")]:
        html = page.read_text(errors="replace")
        article = html[html.index("<article"):html.index("</article>")]  # not the launch buttons' logos
        out[str(page.relative_to(SITE).with_suffix(""))] = len(re.findall(r"<img\b", article))
    return out


def _pdf_figures():
    """Graphics files per document in the LaTeX source; an appendix of solutions counts for its exercise."""
    _need(TEX, "make pdf")
    tex = TEX.read_text()
    marks = list(re.finditer(r"\\label\{\\detokenize\{([^}]*)::doc\}\}|%% pm-solutions-of: (\S+)", tex))
    out = {}
    for mark, nxt in zip(marks, marks[1:] + [None]):
        doc = mark.group(1) or mark.group(2)
        chunk = tex[mark.end():nxt.start() if nxt else len(tex)]
        out.setdefault(doc, []).extend(re.findall(r"\\sphinxincludegraphics(?:\[[^]]*\])?\{\{([^}]*)\}(\.\w+)\}", chunk))
    return {doc: [TEX.parent / (stem + ext) for stem, ext in files] for doc, files in out.items()}


def test_every_site_figure_is_in_the_pdf():
    site, pdf = _site_figures(), {doc: len(files) for doc, files in _pdf_figures().items()}
    assert sum(site.values()) >= 10, site
    missing = {doc: (n, pdf.get(doc, 0)) for doc, n in site.items() if pdf.get(doc, 0) != n}
    assert not missing, f"pages whose figures differ in number (site, PDF): {missing}"


def test_scrubbers_have_a_print_form():
    """Each pre-rendered scrubber of the site is, in the PDF, its print form: a grid of frames with a caption."""
    from PIL import Image

    site = {str(p.relative_to(SITE).with_suffix("")): p.read_text(errors="replace").count('class="anim-slider"')
            for p in [*SITE.glob("chapters/*.html"), *SITE.glob("exercises/*/*.html")]}
    assert sum(site.values()) >= 5, "the site has (almost) no scrubbers: nothing to check"
    printed = {doc: sum(Image.open(f).info.get("Description", "").startswith("Frames of the interactive figure")
                        for f in files if f.suffix == ".png")
               for doc, files in _pdf_figures().items()}
    differ = {doc: (n, printed.get(doc, 0)) for doc, n in site.items() if printed.get(doc, 0) != n}
    assert not differ, f"pages whose scrubbers and print forms differ in number (site, PDF): {differ}"


def secret_lines():
    """Code lines between the solution and hidden-test markers that the chapters do not print for everyone."""
    public = {line.strip() for nb in (ROOT / "chapters").glob("*.ipynb")
              for cell in nbformat.read(nb, as_version=4).cells for line in cell.source.splitlines()}
    # and what every exercise shows its students anyway (a check's opening line, say)
    public |= set().union(*(leaks.visible_lines(p) for p in (ROOT / "exercises").glob("*/*.ipynb")))
    lines, inside = set(), False
    for path in (ROOT / "exercises").glob("*/*.ipynb"):
        # code only: a model answer's prose is typeset (its maths is not its source text)
        for cell in (c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"):
            for line in cell.source.splitlines():
                if re.search(r"### BEGIN (SOLUTION|HIDDEN TESTS)", line):
                    inside = True
                elif re.search(r"### END (SOLUTION|HIDDEN TESTS)", line):
                    inside = False
                elif inside and len(line.strip()) > 12 and line.strip() not in public:
                    lines.add(line.strip())
    assert len(lines) >= 10, lines
    return lines


def _leaked(text, lines):
    flat = re.sub(r"\s|↪|,→|␣", "", text)  # a long code line wraps with a visible space and ",→"
    return [line for line in lines if re.sub(r"\s", "", line) in flat]


def test_self_study_edition_has_the_solutions_in_an_appendix(text):
    shown = _leaked(text, secret_lines())
    # the check below, on the course edition, would find them: it is not blind
    assert len(shown) >= 0.8 * len(secret_lines()), "the appendix lacks solution lines"
    heading = re.search(r"^\s*solutions\s*$", text, re.I | re.M)
    assert heading, "no appendix of solutions"
    appendix = heading.start()
    early = _leaked(text[:appendix], secret_lines())
    assert not early, f"solution lines before the appendix: {early[:3]}"


def test_course_edition_carries_no_solutions():
    _need(COURSE_PDF, "make pdf EDITION=course")
    text = pdftotext(COURSE_PDF)
    assert "course edition" in text.lower()
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    assert "Solution and checks" not in text, "the course edition points at solutions"
    assert not re.search(r"Exercise \d+: ", text), "the course edition has an appendix of exercise solutions"
    leaked = _leaked(text, secret_lines())
    assert not leaked, f"the course edition's PDF shows solution lines: {leaked[:3]}"
    flat = squash(text)
    for title in toc_titles():
        assert words(title)[2] in flat, f"{title!r} missing from the course edition"


def _mutool(pdf, *what):
    return subprocess.run(["mutool", "show", str(pdf), *what], check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.parametrize("pdf", [PDF, COURSE_PDF], ids=["self-study", "course"])
def test_metadata_and_bookmarks_for_assistive_technology(pdf):
    """Title, author and language in the file, and a bookmark for every chapter and exercise."""
    _need(pdf, "make pdf" if pdf == PDF else "make pdf EDITION=course")
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    title = "Patterns and Messages" + (" (course edition)" if pdf == COURSE_PDF else "")
    assert fields["Title"].strip() == title, info
    assert fields["Author"].strip() == "The Patterns and Messages authors", info
    assert "en" in _mutool(pdf, "trailer/Root/Lang"), "the PDF does not say its language"
    outline = squash(_mutool(pdf, "outline"))
    missing = [t for t in toc_titles() if words(t)[2] not in outline]
    assert not missing, f"chapters without a bookmark: {missing}"
