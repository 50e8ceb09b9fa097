"""Number the chapters' question boxes by chapter: "Question 2.1", never "Exercise 4".

The chapters' "check your understanding" boxes are sphinx-exercise's
``{exercise}`` directive, which Sphinx numbers like figures: straight through
the book (1, 2, ... 40), under the name "Exercise". The exercise notebooks
are also called "Exercise 1-7", so "Exercise 4" meant two things. Here each
box in ``chapters/NN_*`` gets the number ``(NN, k)``, k counting the boxes of
that chapter in order, and the book's configuration names them "Question"
(``numfig_format: {exercise: "Question %s"}``). Sphinx prints the tuple as
"NN.k" in the box's title and in every ``{numref}`` to it.
"""
import re

from sphinx.util import logging

logger = logging.getLogger(__name__)

_CHAPTER = re.compile(r"(?:^|/)chapters/(\d+)_[^/]*$")


def chapter_of(docname: str):
    """The chapter number of a page under ``chapters/`` ("chapters/02_multihead" -> 2), else None."""
    match = _CHAPTER.search(docname)
    return int(match.group(1)) if match else None


def renumber(fignumbers: dict, chapter: int) -> dict:
    """One page's exercise numbers, in their order on the page, as ``(chapter, 1), (chapter, 2), ...``.

    >>> renumber({"ex-b": (7,), "ex-a": (6,)}, 2)
    {'ex-a': (2, 1), 'ex-b': (2, 2)}
    """
    ordered = sorted(fignumbers, key=lambda label: fignumbers[label])
    return {label: (chapter, k) for k, label in enumerate(ordered, start=1)}


def _number_by_chapter(app, env):
    for docname, numbers in env.toc_fignumbers.items():
        chapter = chapter_of(docname)
        if chapter is None or "exercise" not in numbers:
            continue
        numbers["exercise"] = renumber(numbers["exercise"], chapter)
    return []


def setup(app):
    # after Sphinx's own TocTreeCollector (priority 500) has assigned the global numbers
    app.connect("env-get-updated", _number_by_chapter, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
