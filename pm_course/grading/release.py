"""Student versions of the assignments (``pm-course assignments``), and the checks they must pass first.

nbgrader's ``generate_assignment`` writes each student version to
``course/release/`` and records the graded cells in the gradebook. Before it
runs, every test cell must stand alone and judge its own function
(:func:`test_cells_stand_alone`, :func:`pm_course.grading.isolate.problems`). Each
release keeps the SHA-256 of the source it was made from
(``course/release/<assignment>/.source-sha256``), so that grading can tell an
assignment whose source changed since and release it again (:func:`stale`).
"""
from __future__ import annotations

from pm_course.grading import hidden
from pm_course.grading import isolate
from pm_course.state.course import (Course, CourseError, assignment_names, expected_notebooks, is_test,
                                    source_hash, source_notebook, step)

STAMP = ".source-sha256"


def test_cells_stand_alone(name: str) -> list[str]:
    """Problems with the test cells of an assignment: each must run on its own.

    A test cell that uses a name only another test cell defines fails when a
    student deletes (or breaks) that other cell, and costs points that are not
    its own.

    Parameters
    ----------
    name : str
        The assignment.

    Returns
    -------
    list of str
        One message per such use (empty: every test cell stands alone).
    """
    import ast
    import builtins

    import nbformat

    def names(source, ctx):
        tree = ast.parse(source)
        found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}
        if ctx is ast.Store:  # defs, imports, loop and comprehension targets
            found |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            found |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                      if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
            found |= {a.arg for n in ast.walk(tree) if isinstance(n, (ast.Lambda, ast.FunctionDef)) for a in n.args.args}
            found |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
        return found

    nb = nbformat.read(source_notebook(name), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "get_ipython" not in c.source]
    tests = [is_test(c) for c in cells]
    shared = set(dir(builtins)).union(*(names(c.source, ast.Store) for c, t in zip(cells, tests) if not t))
    problems = []
    for cell, test in zip(cells, tests):
        if not test:
            continue
        own = names(cell.source, ast.Store)
        for other, other_test in zip(cells, tests):
            if other_test and other is not cell:
                borrowed = (names(cell.source, ast.Load) - own - shared) & names(other.source, ast.Store)
                problems += [f"{name}: test cell {cell.metadata['nbgrader']['grade_id']!r} uses {n!r}, which only"
                             f" test cell {other.metadata['nbgrader']['grade_id']!r} defines" for n in sorted(borrowed)]
    return problems


def stale(course: Course) -> list[str]:
    """The assignments with no student version yet, or whose source changed since it was made."""
    out = []
    for name in assignment_names():
        stamp = course.release / name / STAMP
        if not stamp.is_file() or stamp.read_text().strip() != source_hash(name):
            out.append(name)
    return out


def _keep_earlier_release(course: Course, name: str) -> None:
    """Keep the student version about to be replaced: what students of an earlier release were given.

    Grading tells an instructor's change of the source (points moved on a cell) from a student's edit of
    the notebook by these (:mod:`pm_course.grading.repair`).
    """
    import shutil

    stamp = course.release / name / STAMP
    notebook = course.release / name / expected_notebooks()[name]
    if stamp.is_file() and notebook.is_file():
        dest = course.release_history / name / f"{stamp.read_text().strip()[:16]}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebook, dest)


def assignments(course: Course, names: list[str] | None = None) -> None:
    """Check the test cells of ``names`` (default: every assignment), then release them with nbgrader.

    Raises
    ------
    CourseError
        When a test cell borrows from another or judges more than its own
        function, or the source's own solution fails one of its tests (a
        hidden one included): nothing is released then.
    """
    import nbformat

    names = assignment_names() if names is None else names
    problems = [p for name in names for p in test_cells_stand_alone(name)]
    problems += [p for name in names
                 for p in isolate.problems(nbformat.read(source_notebook(name), as_version=4), name)]
    if problems:
        raise CourseError("Each test cell must stand alone (a student may delete or break another) and judge"
                          " its own function (see pm_course/grading/isolate.py):\n  " + "\n  ".join(problems))
    failing = []
    for name in names:  # every test, hidden ones included, on the source's own solution
        try:
            hidden.reference(name)
        except CourseError as err:
            failing.append(str(err))
    if failing:
        raise CourseError("Nothing was released:\n  " + "\n  ".join(failing))
    for name in names:
        digest = source_hash(name)  # of the source as it is now, before nbgrader reads it
        _keep_earlier_release(course, name)
        step(course, "generate_assignment", name, force=True)
        (course.release / name / STAMP).write_text(digest + "\n")
    print(f"Student versions: {course.release}")
