"""Feedback for students without the hidden tests.

nbgrader puts the hidden tests back into each graded notebook (the instructor
needs them there), and its feedback HTML is made from that notebook: the tests'
source, and tracebacks quoting them, would reach the student. This preprocessor
runs before the HTML is written: a graded cell keeps its visible checks, its
hidden region becomes one comment line, and an error keeps only its last line
(the visible check's message), or, when a hidden test failed, says just that.

:class:`FeedbackExporter` is nbgrader's HTML exporter, made cheaper where it
can be without changing the page: the compiled templates are kept between
students (nbgrader makes a new exporter for each notebook, and compiling took
about half of each feedback's time), and the page is not parsed a second time
when that pass would change nothing (it took half of what was left).
"""
from __future__ import annotations

import re

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.preprocessors import Preprocessor

HIDDEN = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS[^\n]*\n?", re.S)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def hidden_lines(source: str) -> list[str]:
    return [line.strip() for m in HIDDEN.finditer(source) for line in m.group(0).splitlines()[1:-1]
            if line.strip()]


class HideHiddenTests(Preprocessor):
    """Strip hidden tests, and any trace of them, from a graded notebook's copy for students."""

    enabled = True  # nbconvert skips preprocessors that are not enabled

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or "### BEGIN HIDDEN TESTS" not in cell.source:
            return cell, resources
        secret = hidden_lines(cell.source)
        points = cell.metadata.get("nbgrader", {}).get("points", 0)
        cell.source = HIDDEN.sub(f"# (hidden tests: part of this check's {points:g} points)\n", cell.source)
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            trace = ANSI.sub("", "\n".join(out.get("traceback", [])))
            if any(line in trace for line in secret):
                out["ename"], out["evalue"] = "HiddenTestFailed", (
                    f"the visible checks passed, a hidden test did not: 0 of {points:g} points")
            out["traceback"] = [f"{out['ename']}: {out['evalue']}"]
        return cell, resources


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


COMPILED = _CompiledTemplates()


# what HTMLExporter's second pass over a page changes: an image without alt
# text, and JupyterLab's cells (made focusable); nbgrader's template has none
NEEDS_PASS = re.compile(r"<img(?![^>]*\salt=)[^>]*>|jp-Cell-inputWrapper|jp-OutputArea-output", re.I)


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback exporter (HTML): compiled templates reused, no idle second pass."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = COMPILED
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        """The page HTMLExporter makes, without its second pass when that pass has nothing to do.

        HTMLExporter renders the template, then parses the whole page with
        BeautifulSoup to give images without alt text a placeholder and to
        make JupyterLab cells focusable. Here the template is rendered the way
        HTMLExporter does it; when the page has neither, it is returned as it
        is, otherwise HTMLExporter makes it again, second pass included.
        """
        from nbconvert.filters.highlight import Highlight2HTML
        from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

        given = dict(resources or {})
        try:  # HTMLExporter.from_notebook_node up to the second pass
            info = nb.metadata.get("language_info", {})
            self.register_filter("highlight_code", self.filters.get("highlight_code", Highlight2HTML(
                pygments_lexer=info.get("pygments_lexer", info.get("name")), parent=self)))
            resources = self._init_resources(resources)
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        except (AttributeError, TypeError):  # an nbconvert whose exporter is built differently
            return super().from_notebook_node(nb, given, **kw)
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if NEEDS_PASS.search(page):
            return super().from_notebook_node(nb, given, **kw)
        return page, resources
