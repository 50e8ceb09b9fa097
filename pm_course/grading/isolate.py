"""Each point judged on its own function: a wrong helper costs its own points only.

An exercise's functions call each other (``attend`` calls ``attention_weights``),
so a wrong helper would fail the test cells of every right function built on
it. Each test cell therefore runs its checks inside ``with judging("attend"):``
(:class:`attnlib.checks.judging`), and at grading time the grader puts one line
at the top of the cell (ending in ``# pm-grader``, which the feedback never
shows) that hands the kernel the instructor's versions of the functions judged
by *earlier* test cells. Inside the block those replace the student's, so the
judged function is the only student code that decides the cell.
Each takes its arguments as the student's own function would (the student's
parameter names, called by keyword: :func:`attnlib.checks._called_as`), so a
student who renamed a stub's parameters loses nothing by it.

Only functions whose own test cells have already run are handed over: a
student's code could keep a copy, but it can earn no point with it, since
those points are already given. :func:`problems` (run by ``make
assignments``) refuses a test cell that calls a student function this cannot
replace: one that is judged later, or used outside the ``judging`` block.

The rule for exercise authors: every test cell is one ``with judging(...)``
block naming what it gives points for, and uses only those functions and
functions judged by the test cells above it.
"""
from __future__ import annotations

import ast
import functools

import nbformat
from nbconvert.preprocessors import Preprocessor

from pm_course.state.course import exercises_dir, is_test

MARK = "# pm-grader"


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def is_solution(cell) -> bool:
    return cell.cell_type == "code" and bool(_meta(cell).get("solution"))


def judged(source: str) -> tuple[str, ...]:
    """The names of the first ``judging(...)`` in a cell's source (empty if none)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "judging":
            return tuple(a.value for a in node.args if isinstance(a, ast.Constant))
    return ()


def _definitions(nb) -> dict[str, ast.FunctionDef]:
    """Every top-level function the instructor's solution cells define, by name."""
    return {node.name: node for cell in nb.cells if is_solution(cell)
            for node in ast.parse(cell.source).body if isinstance(node, ast.FunctionDef)}


def _calls(node: ast.AST, among) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in among}


def judged_before(nb) -> dict[str, set[str]]:
    """For each test cell (by grade_id), the functions judged by the test cells above it."""
    seen: set[str] = set()
    out = {}
    for cell in nb.cells:
        if is_test(cell):
            out[_meta(cell)["grade_id"]] = set(seen)
            seen |= set(judged(cell.source))
    return out


def instructor_source(nb, grade_id: str) -> str:
    """The instructor's code of the functions judged above test cell ``grade_id``
    (with the private helpers they call), minus the ones that cell judges."""
    defs = _definitions(nb)
    cell = next(c for c in nb.cells if is_test(c) and _meta(c)["grade_id"] == grade_id)
    own = set(judged(cell.source))
    judged_any = {n for c in nb.cells if is_test(c) for n in judged(c.source)}
    wanted = (judged_before(nb)[grade_id] - own) & set(defs)   # answers that are values stay the student's
    todo = list(wanted)
    while todo:  # helpers no test judges (``_logistic``) come along with their callers
        for name in _calls(defs[todo.pop()], defs) - wanted - judged_any:
            wanted.add(name)
            todo.append(name)
    sources = [cell.source for cell in nb.cells if is_solution(cell)]
    code = "\n\n".join(ast.get_source_segment(src, node) for src in sources
                       for node in ast.parse(src).body
                       if isinstance(node, ast.FunctionDef) and node.name in wanted)
    return "\n".join(line for line in code.splitlines() if "### BEGIN SOLUTION" not in line)


def problems(nb, label: str = "") -> list[str]:
    """Test cells that would let one student function cost another's points."""
    defs = _definitions(nb)
    before = judged_before(nb)
    out = []
    for cell in nb.cells:
        if not is_test(cell):
            continue
        gid = _meta(cell)["grade_id"]
        own = judged(cell.source)
        where = f"{label}: test cell {gid!r}"
        tree = ast.parse(cell.source)
        blocks = [w for w in tree.body if isinstance(w, ast.With)
                  and any(getattr(getattr(i.context_expr, "func", None), "id", None) == "judging" for i in w.items)]
        if not own or not blocks:
            out.append(f"{where} has no `with judging(...)` block naming what it gives points for")
            continue
        unknown = [n for n in own if n not in defs and not any(
            isinstance(t, ast.Name) and t.id == n for c in nb.cells if is_solution(c)
            for t in ast.walk(ast.parse(c.source)))]
        if unknown:
            out.append(f"{where} judges {unknown}, which no solution cell defines")
        inside = {id(n) for b in blocks for n in ast.walk(b)}
        outside = {n.id for n in ast.walk(tree) if id(n) not in inside and isinstance(n, ast.Name)} & set(defs)
        if outside:
            out.append(f"{where} uses {sorted(outside)} outside its judging block")
        used = _calls(tree, defs) | {c for n in own if n in defs for c in _calls(defs[n], defs)}
        later = used - set(own) - before[gid] - {n for n in used if n.startswith("_")}
        if later:
            out.append(f"{where} relies on {sorted(later)}, which no test cell above it judges:"
                       " a mistake there would cost this cell's points")
    return out


def _source_path(assignment: str, notebook: str) -> tuple:
    """The source notebook's path and version (its mtime and size): what :func:`_read` and
    :func:`_instructor_code` are cached by, so that a changed source, or another course's, is read again."""
    path = exercises_dir() / assignment / f"{notebook}.ipynb"
    stat = path.stat()
    return path, stat.st_mtime_ns, stat.st_size


def _source_notebook(assignment: str, notebook: str):
    return _read(*_source_path(assignment, notebook))


@functools.lru_cache(maxsize=16)
def _read(path, mtime_ns: int, size: int):
    return nbformat.read(path, as_version=4)


def _instructor_code(assignment: str, notebook: str, grade_id: str) -> str:
    """:func:`instructor_source` of the source notebook: worked out once per version of it, not once per student."""
    return _instructor_code_of(_source_path(assignment, notebook), grade_id)


@functools.lru_cache(maxsize=256)
def _instructor_code_of(version: tuple, grade_id: str) -> str:
    return instructor_source(_read(*version), grade_id)


class HandInstructorVersions(Preprocessor):
    """Autograde step: put the instructor's earlier functions at the top of each test cell."""

    enabled = True

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        self._notebook = (info["assignment"], info["notebook"])
        self._ids = {_meta(c)["grade_id"] for c in _source_notebook(*self._notebook).cells if is_test(c)}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        gid = _meta(cell).get("grade_id")
        if is_test(cell) and gid in self._ids and "judging(" in cell.source:
            cell.source = quiet_hidden_tests(cell.source)
            code = _instructor_code(*self._notebook, gid)
            if code:
                cell.source = f'__import__("attnlib.checks").checks._offer({code!r})  {MARK}\n' + cell.source
        return cell, resources


def quiet_hidden_tests(source: str) -> str:
    """``source`` with a grader line before and after each hidden region: what student code prints
    there is held back (:func:`attnlib.checks._hidden`), for it would show the hidden inputs."""
    out = []
    for line in source.splitlines(keepends=True):
        indent = line[: len(line) - len(line.lstrip())]
        if line.strip().startswith("### BEGIN HIDDEN TESTS"):
            out.append(f'{indent}__import__("attnlib.checks").checks._hidden(True)  {MARK}\n')
        out.append(line)
        if line.strip().startswith("### END HIDDEN TESTS"):
            out.append(f'{indent}__import__("attnlib.checks").checks._hidden(False)  {MARK}\n')
    return "".join(out)
