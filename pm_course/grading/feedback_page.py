"""Feedback for students: fair, and without the hidden tests.

nbgrader puts the hidden tests back into each graded notebook (the instructor
needs them there), and its feedback HTML is made from that notebook: the tests'
source, and tracebacks quoting them, would reach the student. And nbgrader
judges a test cell by its outputs: a warning printed on stderr costs all its
points, and a cell that lost points says nothing about why.

- :class:`WarningsAreNotFailures` (autograde, after the cells run): a graded
  cell's stderr becomes a displayed warning, which nbgrader does not count, so
  a cell passes or fails on its assertions and errors alone.
- :class:`HideHiddenTests` (feedback): a graded cell keeps its visible checks,
  its hidden region becomes one comment line, the grader's own lines (those
  ending in ``# pm-grader``) go, and every lost point gets one line saying why:
  the visible check's message, a hidden test that failed (decided by the line
  that raised, not by what the traceback quotes), a value the grader judged
  wrong, a timeout, or a function that is not defined. Then any output that
  quotes a hidden or grader line (student code can print the cells it runs)
  is replaced by a notice.

:class:`FeedbackExporter` is nbgrader's HTML exporter, made cheaper where it
can be without changing the page: the compiled templates are kept between
students (nbgrader makes a new exporter for each notebook, and compiling took
about half of each feedback's time), and the page is not parsed a second time
when that pass would change nothing (it took half of what was left). Its maths
is MathML written into the page (:class:`MathMLRenderer`): a page needs no
script and no file beside it, so it reads the same opened alone, offline, or
in an LMS's preview that runs no script.
"""
from __future__ import annotations

import ast
import functools
import html
import re

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from traitlets import Bool, Integer, Unicode

try:
    from jinja2 import pass_context as contextfilter
except ImportError:  # an older jinja2
    from jinja2 import contextfilter  # type: ignore[attr-defined,no-redef]

from pm_course.grading.isolate import MARK as GRADER_MARK  # ends each line the grader adds to a test cell before running it
from pm_course.grading.isolate import judged
from pm_course.state.pages import CSP

HIDDEN = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS[^\n]*\n?", re.S)
MATHML_TAGS = {"math", "semantics", "annotation", "mrow", "mi", "mo", "mn", "ms", "mtext", "msup", "msub",
               "msubsup", "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
               "mspace", "mstyle", "mpadded", "mphantom", "menclose", "mfenced"}
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6",
             "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody",
             "td", "th", "thead", "tr", "u", "ul", "dl", "dt", "dd", "details", "summary", "figure", "figcaption",
             "caption", "colgroup", "col"} | MATHML_TAGS
SAFE_ATTRIBUTES = {"*": ["class", "title", "id", "lang", "dir", "display", "xmlns", "mathvariant", "stretchy",
                         "fence", "separator", "accent", "columnalign", "encoding", "width", "height", "align",
                         "colspan", "rowspan"],
                   "a": ["href", "title"], "img": ["src", "alt", "width", "height"]}


# a script's or a style sheet's whole element: bleach strips the tags but keeps what is between them as text
# (an interactive figure's player would show its JavaScript and CSS on the page, which the CSP blocks anyway)
CODE_ELEMENTS = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.S | re.I)
# a player's controls (buttons, their labels) do nothing on an inert page: their glyphs would be stray text
CONTROLS = re.compile(r"<(button|select|label|textarea)\b[^>]*>.*?</\1\s*>", re.S | re.I)
# what stands in for a player (matplotlib's animation), which needs a script the page does not run
PLAYER_NOTE = "An interactive figure: it plays in the notebook, in Jupyter, not on this page."
# an image whose picture a script was to set: nothing to show (its alt text would describe a missing figure)
EMPTY_IMAGE = re.compile(r"<img\b(?![^>]*\bsrc=)[^>]*>", re.I)
# ids made at random for each run (matplotlib's animation player: "_anim_img" and a uuid's 32 hex digits)
RANDOM_ID = re.compile(r'\bid="([A-Za-z_-]*?)[0-9a-f]{32}"')


def sanitize(fragment: str) -> str:
    """Student HTML made inert with bleach (nbconvert's own sanitiser): no script or style sheet (with what
    they hold), no control (a button, its label), no image a script was to fill, no event handler, no
    ``javascript:`` link; text, tables, images (``data:`` URLs) and MathML kept.

    >>> sanitize('<div><button onclick="f()">▶</button><img id="a"><script>var x;</script><p>kept</p></div>')
    '<div><p>kept</p></div>'
    """
    import bleach

    fragment = EMPTY_IMAGE.sub("", CONTROLS.sub("", CODE_ELEMENTS.sub("", fragment)))
    fragment = fragment.replace('<div class="animation">', f'<div class="animation"><p><em>{PLAYER_NOTE}</em></p>')
    return bleach.clean(fragment, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES,
                        protocols=["http", "https", "mailto", "data"], strip=True, strip_comments=True)


def without_paths(page: str, course: str = "") -> str:
    """A page with the paths of the instructor's machine (checkout, course folder ``course``, Python) taken out."""
    import sys
    from pathlib import Path

    from pm_course.state.course import ROOT, exercises_dir

    for path, name in sorted(((str(p), n) for p, n in ((course, "course"), (exercises_dir(), "exercises"),
                                                         (ROOT, "."), (Path(sys.prefix), "python"),
                                                         (Path(sys.base_prefix), "python"),
                                                         (Path.home(), "~"))), key=lambda pn: -len(pn[0])):
        if len(path) > 1:
            page = page.replace(path, name)
    return re.sub(r"/tmp/[\w.-]+/", "/tmp/…/", page)


def stable_ids(page: str) -> str:
    """Ids made at random numbered in their order on the page instead, so that the same work gives the same
    bytes on every grading (and ``push`` sends nothing when nothing changed).

    >>> stable_ids('<img id="_anim_img4ef88f40efc3417c81de57e6d6b0c2bb"> <p id="_anim_img' + 32 * "a" + '">')
    '<img id="_anim_img-1"> <p id="_anim_img-2">'
    """
    count = iter(range(1, 1 << 30))
    return RANDOM_ID.sub(lambda m: f'id="{m.group(1)}-{next(count)}"', page)


def inert(page: str, course: str = "") -> str:
    """A page that can run nothing: the Content-Security-Policy first in its head; no instructor path (the
    course folder ``course`` among them); no random id."""
    page = stable_ids(without_paths(page, course))
    if CSP not in page:
        page = re.sub(r"<head([^>]*)>", lambda m: f"<head{m.group(1)}>\n{CSP}", page, count=1)
    return page
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FRAME = re.compile(r"Cell In\[(\d+)\], line (\d+)")  # IPython 8/9: one per frame in a cell
SECRET_MIN = 12  # shorter hidden lines (``else:``, ``)``) are no secret, and would match anything
NOTICE = "[this output quoted the grader's hidden tests and is not shown]\n"


def is_grader_line(line: str) -> bool:
    return line.rstrip().endswith(GRADER_MARK)


def hidden_lines(source: str) -> list[str]:
    return [line.strip() for m in HIDDEN.finditer(source) for line in m.group(0).splitlines()[1:-1]
            if line.strip()]


def hidden_span(source: str) -> set[int]:
    """The numbers (from 1) of the lines in hidden-test regions, markers included; grader lines excepted."""
    span, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if "### BEGIN HIDDEN TESTS" in line:
            inside = True
        if inside and not is_grader_line(line):
            span.add(number)
        if "### END HIDDEN TESTS" in line:
            inside = False
    return span


def secrets(source: str) -> set[str]:
    """What no output may quote: the cell's non-trivial hidden lines and the grader's lines."""
    return ({line for line in hidden_lines(source) if len(line) >= SECRET_MIN}
            | {line.strip() for line in source.splitlines() if is_grader_line(line)})


def failing_line(traceback: list[str], cell_number: int | None = None) -> int | None:
    """The line of the cell that raised: its innermost frame in that cell, from IPython's traceback.

    IPython quotes a few lines around each frame's line, so *which lines appear*
    says nothing; the ``Cell In[N], line L`` headers do. The cell is ``N ==
    cell_number`` (its execution count), or else the outermost frame's cell.
    For a chained error the final traceback is printed last, so the last
    matching header is the innermost frame of the error that ended the cell.
    """
    frames = FRAME.findall(ANSI.sub("", "\n".join(traceback)))
    if not frames:
        return None
    cell = str(cell_number) if cell_number is not None else frames[0][0]
    lines = [int(line) for n, line in frames if n == cell]
    return lines[-1] if lines else None


def hidden_cases(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, message) of each check in the hidden regions that carries a message.

    A hidden ``assert ..., "message"`` (or ``raise AssertionError("message")``)
    names its case for the student without giving its answer away ("with
    two keys scoring the maximum, the weights should split between them").
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    span, found = hidden_span(source), []
    for node in ast.walk(tree):
        msg = node.msg if isinstance(node, ast.Assert) else \
            node.exc.args[0] if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
            and getattr(node.exc.func, "id", None) == "AssertionError" and node.exc.args else None
        if getattr(node, "lineno", None) in span and isinstance(msg, ast.Constant) and isinstance(msg.value, str):
            found.append((node.lineno, node.end_lineno, msg.value))
    return sorted(found)


def hidden_case(source: str, line: int | None) -> str | None:
    """The message of the hidden check that failed on ``line``: the check on that line, else the next one
    (the line computed what that check was about to judge); None when there is none."""
    if line is None:
        return None
    cases = hidden_cases(source)
    for first, last, message in cases:
        if first <= line <= last:
            return message
    later = [message for first, _, message in cases if first > line]
    return later[0] if later else None


def judged_function(cell) -> str:
    """The exercise function a test cell checks: its first ``judging("...")``, else its grade_id."""
    names = judged(cell.source)
    return names[0] if names else cell.metadata.get("nbgrader", {}).get("grade_id", "this check")


def quotes(output, secret: set[str]) -> bool:
    """Whether an output's text (stream, data, error) contains a secret line or a hidden-test marker."""
    parts = [output.get("text", ""), output.get("ename", ""), output.get("evalue", ""),
             *output.get("traceback", []), *output.get("data", {}).values()]
    text = "\n".join("".join(p) if isinstance(p, list) else str(p) for p in parts)
    text = ANSI.sub("", text)
    text += "\n" + html.unescape(text)  # an HTML output may carry the line escaped
    return (GRADER_MARK in text or "HIDDEN TESTS" in text) or any(line in text for line in secret)


def without_hidden_output(outputs: list) -> list:
    """The outputs with what came between the grader's hidden-test markers replaced by one notice.

    While the hidden tests run, what student code prints is held back in the
    kernel (:func:`attnlib.checks._hidden`); what it wrote to a stream it had
    kept aside still lands between the markers, and goes here.
    """
    from attnlib.checks import HIDDEN_BEGIN, HIDDEN_END, HIDDEN_PRINTS

    notice = HIDDEN_PRINTS + "\n"
    kept, inside, dropped = [], False, False
    for out in outputs:
        if out.get("output_type") != "stream" or out.get("name") != "stdout":
            if inside:
                dropped = True
            else:
                kept.append(out)
            continue
        text, shown = out.get("text", ""), []
        while text:
            head, found, text = text.partition(HIDDEN_END if inside else HIDDEN_BEGIN)
            if not inside:
                shown.append(head)
            else:
                dropped = dropped or bool(head.strip())
                if found and dropped and not text.startswith(notice):  # the kernel says so itself when
                    shown.append(notice)                                # it held something back
                dropped = dropped and not found
            inside = not inside if found else inside
        out["text"] = "".join(shown)
        kept.append(out)
    if dropped:
        kept.append(new_output("stream", name="stdout", text=notice))
    return kept


WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTICE = "[an interactive figure: open the notebook in Jupyter to use it]\n"


def readable(output):
    """An output as a page shows it, or None when it would be an empty block.

    A widget's view needs a kernel (the page has none): it becomes a line
    saying so. Empty printed text, and displays with nothing to show, go.
    """
    kind = output.get("output_type")
    if kind == "stream":
        return output if output.get("text", "").strip() else None
    if kind in ("display_data", "execute_result"):
        data = output.get("data", {})
        if WIDGET in data:
            return new_output("stream", name="stdout", text=WIDGET_NOTICE)
        if not any(str(v).strip() for v in data.values()):
            return None
    return output


class WarningsAreNotFailures(Preprocessor):
    """Turn the stderr of graded cells into displayed warnings, which nbgrader does not count.

    nbgrader's ``determine_grade`` fails a test cell with any stderr output, so
    a correct function that lets numpy print a RuntimeWarning would score 0. A
    test cell must pass or fail on its assertions and errors alone; what it
    printed on stderr is still shown, as a warning. Runs after Execute and
    before SaveAutoGrades.
    """

    enabled = True

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        for i, out in enumerate(cell.get("outputs", [])):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = f"warning printed by your code: {out['text']}"
                cell.outputs[i] = new_output("display_data", data={
                    "text/plain": text,
                    "text/html": '<pre style="background:#fff8e1;color:#5d4037;border-left:4px solid #f9a825;'
                                 f'padding:4px 8px;white-space:pre-wrap">{html.escape(text)}</pre>'})
        return cell, resources


class HideHiddenTests(Preprocessor):
    """Strip hidden tests and grader lines from a graded notebook's copy for students, and say why points were lost."""

    enabled = True  # nbconvert skips preprocessors that are not enabled
    cell_timeout = Integer(10, help="CPU seconds a cell may use (Execute.timeout), for the timeout's reason").tag(
        config=True)

    def preprocess(self, nb, resources):
        secret = set().union(*(secrets(c.source) for c in nb.cells if c.cell_type == "code"))
        nb, resources = super().preprocess(nb, resources)
        for cell in nb.cells:  # after the reasons are written: a visible check's message is checked too
            for i, out in enumerate(cell.get("outputs", [])):
                if quotes(out, secret):
                    cell.outputs[i] = new_output("stream", name="stdout", text=NOTICE)
            if cell.cell_type == "code":
                cell.outputs = [shown for out in without_hidden_output(cell.outputs)
                                if (shown := readable(out)) is not None]
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            self.explain(cell)
        lines = [line for line in cell.source.splitlines(keepends=True) if not is_grader_line(line)]
        points = meta.get("points", 0)
        cell.source = HIDDEN.sub(f"# (hidden tests: part of this check's {points:g} points)\n", "".join(lines))
        return cell, resources

    def explain(self, cell) -> None:
        """Reduce each error to one line a student can act on; say why when points went without one."""
        meta = cell.metadata["nbgrader"]
        points, score = meta.get("points", 0), meta.get("score")
        span, function = hidden_span(cell.source), judged_function(cell)
        errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
        said = set()
        for out in errors:
            out["ename"], out["evalue"] = self.reason(out, cell, span, function, points)
            out["traceback"] = [f"{out['ename']}: {out['evalue']}"]
            if out["traceback"][0] in said:  # a timeout leaves two errors (the interrupt, and nbgrader's)
                cell.outputs.remove(out)
            said.add(out["traceback"][0])
        if not errors and score is not None and score < points:
            # the kernel passed the cell; the grader, judging its probed values, did not
            ename, why = ("HiddenTestFailed", f"a hidden test of {function} found a wrong value") if span \
                else ("PointsLost", "the grader changed the score (ask your instructor why)")
            why += f": {score:g} of {points:g} points"
            cell.outputs.append(new_output("error", ename=ename, evalue=why, traceback=[f"{ename}: {why}"]))

    def reason(self, error, cell, span, function, points) -> tuple[str, str]:
        """(name, message) for an error in a graded cell."""
        ename, evalue = error.get("ename", ""), error.get("evalue", "")
        if ename in ("CellTimeoutError", "KeyboardInterrupt"):  # how the grader stops a cell (pm_course/sandbox/cell_limits.py)
            said = evalue if ename == "CellTimeoutError" and evalue.startswith("the cell ") else \
                f"the cell used more than {self.cell_timeout} s of CPU time"
            return "TimeoutError", f"{said} and was stopped (is there a loop that never ends?): 0 of {points:g} points"
        missing = re.fullmatch(r"name '(\w+)' is not defined", evalue)
        if ename == "NameError" and missing:
            return ename, (f"`{missing.group(1)}` is not defined: the cell that defines it was deleted, renamed"
                           " or raised an error")
        line = failing_line(error.get("traceback", []), cell.get("execution_count"))
        if line in span:
            case = hidden_case(cell.source, line)
            if case is None:
                return "HiddenTestFailed", f"a hidden test of {function} failed: 0 of {points:g} points"
            raised = "" if ename == "AssertionError" else f" (your code raised {ename} there)"
            return "HiddenTestFailed", f"a hidden test of {function} failed{raised}: {case}: 0 of {points:g} points"
        return ename, evalue  # a visible check: its own message


# an answer not reviewed yet says so (after nbgrader's GetGrades), rather than a bare score of 0
AWAITING = "Awaiting review by your instructor: this answer's points are not counted yet."


class AwaitingReview(Preprocessor):
    """Feedback (after GetGrades): a written answer not reviewed yet says so, rather than a bare score of 0."""

    enabled = True  # nbconvert skips preprocessors that are not enabled

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        from pm_course.state.written import awaiting

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader", {})
                if not (meta.get("grade") and meta.get("solution")):
                    continue
                grade = gradebook.find_grade(meta["grade_id"], info["notebook"], info["assignment"], info["student"])
                if awaiting(grade):
                    meta["comment"] = AWAITING + (f"\n\n{meta['comment']}" if meta.get("comment") else "")
                    # its score shows as not counted yet, never "0.0" (not_counted, after the page is made)
                    resources.setdefault("awaiting_review", []).append(meta["grade_id"])
        return nb, resources


def not_counted(page: str, cells: list[str]) -> str:
    """The page with each answer of ``cells`` (awaiting review) scored "not yet counted", not "Score: 0.0".

    >>> not_counted('<a href="#why">Written response</a> (Score: 0.0 / 2.0)</li>', ["why"])
    '<a href="#why">Written response</a> (Score: not yet counted / 2.0)</li>'
    """
    for cell in cells:
        page = re.sub(rf'(<a href="#{re.escape(cell)}">[^<]*</a> \(Score: )[\d.]+( / [\d.]+\))', r"\1not yet counted\2",
                      page, count=1)
        page = re.sub(rf'(<a name="{re.escape(cell)}"></a>.*?Score: )[\d.]+( / [\d.]+)', r"\1not yet counted\2", page,
                      count=1, flags=re.S)
    return page


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates in memory, for the life of the grading process.

    Jinja keys each entry by the template's name and a checksum of its source,
    so a template that changes on disk is compiled again.
    """

    def __init__(self):
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket):
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])

    def dump_bytecode(self, bucket):
        self._code[bucket.key] = bucket.bytecode_to_string()

    def clear(self):
        self._code.clear()


COMPILED = _CompiledTemplates()


# what HTMLExporter's second pass over a page changes: an image without alt
# text, and JupyterLab's cells (made focusable); nbgrader's template has none
NEEDS_PASS = re.compile(r"<img(?![^>]*\salt=)[^>]*>|jp-Cell-inputWrapper|jp-OutputArea-output", re.I)

# nbgrader's template calls the macro mathjax(); with the maths as MathML it writes nothing
NO_MATHJAX = "{%- macro mathjax(url=None) -%}{%- endmacro %}"


@functools.lru_cache(maxsize=4096)  # every student's page has the same prompts: each formula is converted once
def tex_to_mathml(tex: str, display: bool = False) -> str:
    """One formula as MathML (``latex2mathml``), written into the page: no script needed to show it.

    A formula latex2mathml cannot read is shown as its TeX in ``<code>``, and
    the page is made all the same.

    >>> tex_to_mathml("x^2")[:60]
    '<math xmlns="http://www.w3.org/1998/Math/MathML" display="in'
    """
    from latex2mathml.converter import convert

    try:
        return convert(tex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 -- one unreadable formula must not cost the student the page
        return f'<code class="tex">{html.escape(tex)}</code>'


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, with each formula written as MathML rather than left for MathJax.

    nbconvert's parser already finds the maths (``$...$``, ``$$...$$``,
    ``\\(...\\)``, ``\\[...\\]``, ``\\begin{...}``) and keeps it apart from code
    spans; only what each formula becomes changes.
    """

    def inline_math(self, body: str) -> str:
        return tex_to_mathml(body)

    def block_math(self, body: str) -> str:
        return tex_to_mathml(body, display=True)

    def latex_environment(self, name: str, body: str) -> str:
        return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)


def _render_markdown(source, attachments, embed_images, path, anchor_link_text, exclude_anchor_links,
                     lexer_options) -> str:
    """A markdown cell as HTML, the maths as MathML (not yet sanitised)."""
    renderer = MathMLRenderer(
        escape=False, attachments=attachments, embed_images=embed_images, path=path,
        anchor_link_text=anchor_link_text, exclude_anchor_links=exclude_anchor_links, **lexer_options)
    return MarkdownWithMath(renderer=renderer).render(source)


# Every student's page repeats the assignment's prompts and test cells: each distinct cell is
# rendered (and sanitised) once per grading process. Both are functions of their arguments only.
@functools.lru_cache(maxsize=2048)
def _markdown_html(source, anchor_link_text, exclude_anchor_links, lexer_options) -> str:
    """A markdown cell without attachments, rendered and sanitised (the notebook's folder is read only to
    embed images, which this exporter does not)."""
    return sanitize(_render_markdown(source, {}, False, "", anchor_link_text, exclude_anchor_links,
                                     dict(lexer_options)))


@functools.lru_cache(maxsize=2048)
def _highlighted(source, language, magics_language, formatter_options) -> str:
    highlight = Highlight2HTML(pygments_lexer=language, extra_formatter_options=dict(formatter_options))
    return highlight(source, language, {"magics_language": magics_language} if magics_language else None)


class RememberedHighlight(Highlight2HTML):
    """nbconvert's code highlighter, each distinct cell highlighted once per process."""

    def __call__(self, source, language=None, metadata=None):
        magics = metadata.get("magics_language") if metadata else None
        return _highlighted(source, language or self.pygments_lexer, magics,
                            tuple(sorted(self.extra_formatter_options.items())))


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback exporter (HTML): compiled templates reused, no idle second pass, maths as MathML.

    A page is sent alone (an LMS attaches it to a submission and shows it in a
    preview that runs no script): its maths is MathML written when the page is
    made, and the page loads nothing, MathJax included. ``mathml = False``
    gives nbconvert's page with MathJax from its CDN (for comparison only).
    """

    mathml = Bool(True, help="write the maths as MathML, and load no MathJax").tag(config=True)
    course_folder = Unicode("", help="the course folder, a path no page shows").tag(config=True)

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = COMPILED
        if self.mathml:  # nbgrader's template calls mathjax(), which would load it from a CDN: it does nothing here
            environment.loader = jinja2.ChoiceLoader([jinja2.DictLoader({"mathjax.html.j2": NO_MATHJAX}),
                                                      environment.loader])
        return environment

    @contextfilter
    def markdown2html(self, context, source):
        """HTMLExporter's markdown filter, with the maths written as MathML."""
        if not self.mathml:
            return super().markdown2html(context, source)
        cell = context.get("cell", {})
        # any markdown cell of a student's notebook may be the student's: its raw HTML sanitised once rendered
        if cell.get("attachments") or self.embed_images:  # the page reads more than the source
            return sanitize(self._markdown(cell, context, source))
        return _markdown_html(source, self.anchor_link_text, self.exclude_anchor_links,
                              tuple(sorted(self.lexer_options.items())))

    def _markdown(self, cell, context, source):
        path = context.get("resources", {}).get("metadata", {}).get("path", "")
        return _render_markdown(source, cell.get("attachments", {}), self.embed_images, path, self.anchor_link_text,
                                self.exclude_anchor_links, self.lexer_options)

    def from_notebook_node(self, nb, resources=None, **kw):
        """The page HTMLExporter makes, without its second pass when that pass has nothing to do.

        HTMLExporter renders the template, then parses the whole page with
        BeautifulSoup to give images without alt text a placeholder and to
        make JupyterLab cells focusable. Here the template is rendered the way
        HTMLExporter does it; when the page has neither, it is returned as it
        is, otherwise HTMLExporter makes it again, second pass included.
        """
        from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

        given = dict(resources or {})
        nb = _inert_outputs(nb)
        try:  # HTMLExporter.from_notebook_node up to the second pass
            info = nb.metadata.get("language_info", {})
            self.register_filter("highlight_code", self.filters.get("highlight_code", RememberedHighlight(
                pygments_lexer=info.get("pygments_lexer", info.get("name")), parent=self)))
            resources = self._init_resources(resources)
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        except (AttributeError, TypeError):  # an nbconvert whose exporter is built differently
            page, resources = super().from_notebook_node(nb, given, **kw)
            return inert(not_counted(page, resources.get("awaiting_review", [])), self.course_folder), resources
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if NEEDS_PASS.search(page):
            page, resources = super().from_notebook_node(nb, given, **kw)
        return inert(not_counted(page, resources.get("awaiting_review", [])), self.course_folder), resources


def _inert_outputs(nb):
    """A copy of ``nb`` whose outputs cannot run anything: HTML sanitised, SVG and JavaScript shown as text."""
    import copy

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if not data:
                continue
            for kind in [k for k in data if "javascript" in k or k in ("image/svg+xml", "text/markdown")
                         or k.startswith("application/vnd.")]:
                text = data.pop(kind)
                data.setdefault("text/plain", text if isinstance(text, str) else str(text))
            if "text/html" in data:
                html_text = data["text/html"]
                data["text/html"] = sanitize("".join(html_text) if isinstance(html_text, list) else html_text)
    return nb
