"""No silent zero: a submitted notebook's graded cells matched back to the assignment's before it is graded.

nbgrader grades by cell ids (``grade_id`` in each cell's nbgrader metadata).
Its autograde already puts back a *locked* cell whose source a student edited
(``OverwriteCells`` overwrites it from the gradebook by its ``grade_id``), but
silently; and it cannot see a cell whose metadata is gone (a student copied
the cells into a new notebook) nor one that was deleted: those lose their
points without a word. :class:`RestoreCells`, an autograde step that runs just
before ``OverwriteCells``, matches the notebook back to the assignment's
student version (``course/release/``):

- cells whose metadata is gone (or whose ``grade_id`` is none of the
  assignment's) are matched by content and position: a test cell (or any
  locked cell) by its source, an answer cell by the functions and names it
  defines, a written answer by the prompt above it. They get the
  assignment's metadata back;
- a test cell (or the setup above the first answer) still missing is put back
  from the assignment, after the cell that precedes it there;
- a test cell whose source was changed is noted (nbgrader then grades it as
  the assignment has it).

Each repair is a note in ``grades.csv``'s reason (:data:`NOTES`). A notebook
whose cells cannot be matched (no answer cell of the assignment found) is not
graded at all: its status is "could not be graded", with the reason
(:data:`FAILURES`), never a silent zero.
"""
from __future__ import annotations

import copy
import difflib
import functools
import re
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Unicode

from pm_course.grading.feedback_page import HIDDEN  # a hidden-test region, markers included
from pm_course.state.course import is_test

# what the last autograde of each (assignment, student) repaired, and why one could not be matched;
# filled in the process that runs nbgrader (a grading worker), read there by pm_course.steps.grade
NOTES: dict[tuple[str, str], list[str]] = {}
FAILURES: dict[tuple[str, str], str] = {}

KEYS = ("grade", "solution", "locked", "points")  # what makes a cell graded, and how
SIMILAR = 0.8  # a locked cell's source at least this similar (difflib's ratio) is that cell


class Unmatched(Exception):
    """A notebook whose cells cannot be matched to its assignment's: it is not graded."""


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def _gid(cell) -> str | None:
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def names(source: str) -> set[str]:
    """The functions and top-level names a code cell defines (by its text: it may not parse)."""
    return (set(re.findall(r"^\s*def\s+([A-Za-z_]\w*)", source, re.M))
            | set(re.findall(r"^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", source, re.M)))


def _text(source: str) -> str:
    """A cell's source as compared: hidden tests left out (the instructor's own copy is no edit), spaces at ends."""
    return "\n".join(line.rstrip() for line in HIDDEN.sub("", source).strip().splitlines())


def _similar(a: str, b: str) -> float:
    a, b = _text(a), _text(b)
    if a == b:
        return 1.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.ratio() if matcher.real_quick_ratio() >= SIMILAR and matcher.quick_ratio() >= SIMILAR else 0.0


def _what(cell) -> str:
    meta = _meta(cell)
    if is_test(cell):
        return f"test cell {meta['grade_id']!r} ({meta.get('points', 0):g} points)"
    if meta.get("solution"):
        return f"answer cell {meta['grade_id']!r}"
    return f"cell {meta['grade_id']!r}"


def repair(nb, reference, assignment: str = "the assignment", earlier=()) -> list[str]:
    """Match ``nb``'s cells back to ``reference`` (the student version); change ``nb`` in place.

    Parameters
    ----------
    nb : NotebookNode
        The submitted notebook.
    reference : NotebookNode
        The assignment's student version (its cells' nbgrader metadata and
        sources, hidden tests excluded).
    assignment : str
        Its name, for the messages.
    earlier : sequence of NotebookNode
        The student versions released before ``reference`` (:attr:`pm_course.state.course.Course.release_history`): a
        cell whose metadata is one of theirs was changed by the instructor, not the student, and is
        noted as the source's change ("the source's points for 'why' changed from 2 to 3").

    Returns
    -------
    list of str
        One note per repair (empty: nothing to repair).

    Raises
    ------
    Unmatched
        When the metadata is gone and no answer cell of the assignment can be
        found in ``nb``: it cannot be graded as that assignment.
    """
    ref = [c for c in reference.cells if _gid(c)]
    ref_ids = {_gid(c) for c in ref}
    notes = []
    unknown = [_gid(c) for c in nb.cells if _gid(c) and _gid(c) not in ref_ids]
    for cell in nb.cells:  # ids that are none of the assignment's: matched like cells without metadata
        if _gid(cell) and _gid(cell) not in ref_ids:
            del cell.metadata["nbgrader"]
    seen = {_gid(c) for c in nb.cells if _gid(c)}
    missing = [c for c in ref if _gid(c) not in seen]
    matched = []
    if missing:
        matched = _match(nb, reference, missing)
    stripped = len(seen) == 0
    answers = [c for c in ref if _meta(c).get("solution") and c.cell_type == "code"]
    if stripped and answers and not any(_meta(c).get("solution") and c.cell_type == "code" for c in matched):
        wanted = sorted({n for c in answers for n in names(c.source)})
        raise Unmatched(f"its nbgrader metadata is gone and none of its cells could be matched to {assignment}'s"
                        f" (no cell defines {', '.join(wanted) or 'an answer'})")
    if matched:
        how = ("its nbgrader metadata was gone" if stripped else
               f"cell ids {', '.join(map(repr, unknown))} are not {assignment}'s" if unknown else
               "their nbgrader metadata was gone")
        notes.append(f"matched {len(matched)} cell(s) back to {assignment}'s by their content ({how}):"
                     f" {', '.join(_gid(c) for c in matched)}")
    put_back = _put_back(nb, reference)
    notes += [f"{_what(c)} was missing: put back from {assignment}" for c in put_back]
    have = {_gid(c) for c in nb.cells if _gid(c)}
    notes += [f"written answer {_gid(c)!r} is missing (its cell was deleted): no answer, 0 of"
              f" {_meta(c).get('points', 0):g} points" for c in ref
              if _meta(c).get("solution") and _meta(c).get("grade") and c.cell_type == "markdown" and _gid(c) not in have]
    by_id = {_gid(c): c for c in ref}
    released = [{_gid(c): _meta(c) for c in e.cells if _gid(c)} for e in earlier]
    for cell in nb.cells:
        gid = _gid(cell)
        if gid in by_id and any(_meta(cell).get(k) != _meta(by_id[gid]).get(k) for k in KEYS):
            was = next((r[gid] for r in released if gid in r and all(
                _meta(cell).get(k) == r[gid].get(k) for k in KEYS)), None)
            if was is not None:  # as an earlier release had it: the instructor changed the source since
                old, new = was.get("points"), _meta(by_id[gid]).get("points")
                if old != new and (old is not None or new is not None):
                    notes.append(f"the source's points for {gid!r} changed from {_pts(old)} to {_pts(new)}")
            elif is_test(by_id[gid]) or _meta(by_id[gid]).get("grade"):
                notes.append(f"the nbgrader metadata of {_what(by_id[gid])} was changed: put back")
            cell.metadata["nbgrader"] = copy.deepcopy(_meta(by_id[gid]))
        if gid in by_id and is_test(by_id[gid]) and _text(cell.source) != _text(by_id[gid].source):
            notes.append(f"{_what(by_id[gid])} was edited: graded as {assignment} has it")
    return notes


def _pts(points) -> str:
    return f"{float(points or 0):g}"


def _match(nb, reference, missing: list) -> list:
    """Give the cells without metadata the metadata of the ``missing`` reference cells they are; those matched."""
    free = [c for c in nb.cells if not _gid(c)]
    position = {id(c): i for i, c in enumerate(nb.cells)}
    matched = []

    def claim(cell, ref_cell):
        cell.metadata["nbgrader"] = copy.deepcopy(_meta(ref_cell))
        free[:] = [c for c in free if c is not cell]
        matched.append(ref_cell)

    written = []
    for ref_cell in missing:
        meta = _meta(ref_cell)
        options = [c for c in free if c.cell_type == ref_cell.cell_type]
        if meta.get("solution") and ref_cell.cell_type == "markdown":
            written.append(ref_cell)  # matched by the prompt above it, once the rest is placed
            continue
        if meta.get("solution"):  # an answer: by the names it defines (the last such cell: the newest attempt)
            want = names(ref_cell.source)
            scored = [(len(want & names(c.source)), position[id(c)], c) for c in options]
            scored = [s for s in scored if s[0] > 0]
        else:  # a locked cell (a test, the setup): by its source
            scored = [(_similar(c.source, ref_cell.source), position[id(c)], c) for c in options]
            scored = [s for s in scored if s[0] >= SIMILAR]
        if scored:
            claim(max(scored, key=lambda s: (s[0], s[1]))[2], ref_cell)
    own = {_text(c.source) for c in reference.cells if _text(c.source) and not _meta(c).get("solution")}
    for ref_cell in written:
        before = reference.cells[reference.cells.index(ref_cell) - 1] if reference.cells.index(ref_cell) else None
        at = _find(nb, before) if before is not None else None
        for cell in nb.cells[at + 1:at + 4] if at is not None else ():  # the first free text below the prompt
            if _gid(cell) or _text(cell.source) in own:  # the assignment's next cell: the answer cell is gone
                break
            if cell.cell_type == "markdown" and any(cell is c for c in free):
                claim(cell, ref_cell)
                break
    return matched


def _find(nb, ref_cell) -> int | None:
    """Where a reference cell is in ``nb``: by its id, else by its exact text (a prompt)."""
    gid = _gid(ref_cell)
    for i, cell in enumerate(nb.cells):
        if (gid and _gid(cell) == gid) or (not gid and not _gid(cell) and cell.cell_type == ref_cell.cell_type
                                           and _text(cell.source) == _text(ref_cell.source)):
            return i
    return None


def _put_back(nb, reference) -> list:
    """Insert the test cells (and the setup above the first answer) ``nb`` lacks; the reference cells inserted."""
    first_answer = next((i for i, c in enumerate(reference.cells) if _meta(c).get("solution")), len(reference.cells))
    have = {_gid(c) for c in nb.cells if _gid(c)}
    added = []
    for index, ref_cell in enumerate(reference.cells):
        gid = _gid(ref_cell)
        setup = _meta(ref_cell).get("locked") and ref_cell.cell_type == "code" and index < first_answer
        if not gid or gid in have or not (is_test(ref_cell) or setup):
            continue
        at = None
        for earlier in reversed(reference.cells[:index]):  # after the cell that precedes it in the assignment
            at = _find(nb, earlier)
            if at is not None:
                break
        cell = copy.deepcopy(ref_cell)
        cell["id"] = re.sub(r"[^A-Za-z0-9_-]", "-", f"restored-{gid}")[:64]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nb.cells.insert(0 if at is None else at + 1, cell)
        have.add(gid)
        added.append(ref_cell)
    return added


def _reference(course, assignment: str, notebook: str):
    """The student version of an assignment's notebook (course/release/), else the source's cells, hidden tests out.

    Read once per process and version of the file (:func:`repair` never changes it).
    """
    from pm_course.state.course import exercises_dir

    released = course.release / assignment / f"{notebook}.ipynb"
    path = released if released.is_file() else exercises_dir() / assignment / f"{notebook}.ipynb"
    return _read_reference(path, path.stat().st_mtime_ns)


def _earlier(course, assignment: str) -> list:
    """The student versions of ``assignment`` released before the current one (newest first)."""
    earlier = course.release_history / assignment
    paths = sorted(earlier.glob("*.ipynb"), key=lambda p: p.stat().st_mtime_ns, reverse=True) \
        if earlier.is_dir() else []
    return [_read_reference(p, p.stat().st_mtime_ns) for p in paths]


@functools.lru_cache(maxsize=32)
def _read_reference(path, mtime_ns: int):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.source = HIDDEN.sub("", cell.source)
    return nb


class RestoreCells(Preprocessor):
    """Autograde step (before nbgrader's ``OverwriteCells``): :func:`repair` the notebook about to be graded."""

    enabled = True
    # the course folder (pm_course.state.course.configure), whose student versions the notebook is matched to
    course_folder = Unicode("", help="the course folder").tag(config=True)

    def preprocess(self, nb, resources):
        from pm_course.state.course import Course

        course = Course(Path(self.course_folder))
        info = resources.get("nbgrader", {})
        key = (info.get("assignment"), info.get("student"))
        NOTES.pop(key, None)
        FAILURES.pop(key, None)
        try:
            NOTES[key] = repair(nb, _reference(course, info["assignment"], info["notebook"]), info["assignment"],
                                _earlier(course, info["assignment"]))
        except Unmatched as err:
            FAILURES[key] = str(err)
            self.log.error("Could not match the notebook to the assignment: %s", err)
            raise
        for note in NOTES[key]:
            self.log.warning("%s/%s: %s", info.get("student"), info.get("assignment"), note)
        return nb, resources
