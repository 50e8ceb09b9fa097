"""The download button of an exercise page gives the student version (a local Sphinx extension).

The book theme's ``.ipynb`` button links to ``_sources/<docname>.ipynb``, the
copy Sphinx makes of the source notebook: for an exercise, the instructor's
version, with the solutions and hidden tests. Once the HTML is written, each
exercise's copy there is replaced by the student version, the one
``make exercises`` writes (pm_course/student.py). The pages themselves are not
touched: they keep their solutions folded.

The launch buttons (Binder, Colab) of those pages would open the repository's
copy, the instructor's, so the pages do not show them: the download button is
the way to a blank notebook there.

``pm_student_downloads`` lists the docname patterns of the exercise pages
(the course edition, whose exercises are student versions already, sets none).
"""
import fnmatch
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _student_downloads(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    docs = sorted(d for d in app.env.found_docs
                  if any(fnmatch.fnmatch(d, p) for p in app.config.pm_student_downloads)
                  and Path(app.env.doc2path(d)).suffix == ".ipynb")
    if not docs:
        return
    import nbformat

    from pm_course import student

    for doc in docs:
        source = Path(app.env.doc2path(doc))
        target = Path(app.outdir) / "_sources" / (doc + source.suffix)
        if not target.exists():  # the button's link would be dead: say so rather than ship it
            raise ExtensionError(f"{doc}: no {target} to replace with the student version "
                                 "(html_copy_source off, or the theme's download link moved?)")
        nbformat.write(student.student_version(source), target)
    logger.info(f"download buttons: student versions of {len(docs)} exercise notebooks")


def _no_launch_buttons(app, pagename, templatename, context, doctree):
    """Exercise pages lose the theme's launch group, which points at the instructor's notebook."""
    if any(fnmatch.fnmatch(pagename, p) for p in app.config.pm_student_downloads) and "header_buttons" in context:
        context["header_buttons"] = [b for b in context["header_buttons"] if b.get("label") != "launch-buttons"]


def setup(app):
    app.add_config_value("pm_student_downloads", ["exercises/*"], "html")
    app.connect("build-finished", _student_downloads)
    app.connect("html-page-context", _no_launch_buttons, priority=502)   # after the theme adds them (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
