"""Hidden tests judged in the grader's own process.

A hidden test runs in the student's kernel, which the student's code controls:
it could have replaced ``np.allclose``, the checks, or made its results compare
equal to anything. So the grader trusts only data from the kernel: each hidden
test hands the values it checks to ``attnlib.probes.probe``, which saves them
as ``.npy`` files (no pickles). Here, the instructor's notebook runs in the
grader's process (its code is trusted) to compute the same values, or the
judge that decides them, and each student's files are compared with them with
this process's numpy. A graded cell keeps its points only if nbgrader passed it
in the kernel *and* every value it probed is right here.
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
from pathlib import Path

import numpy as np

from pm_course.state.course import CourseError, source_notebook


def reference(assignment: str) -> dict[str, tuple[str, object, object]]:
    """``probe name -> (grade_id of its cell, the instructor's value, judge)``, by running the source notebook."""
    path = source_notebook(assignment)
    return _reference(assignment, path, path.stat().st_mtime_ns, path.stat().st_size)


@functools.lru_cache(maxsize=16)
def _reference(assignment: str, path: Path, mtime_ns: int, size: int) -> dict[str, tuple[str, object, object]]:
    """:func:`reference` of one version of the source notebook: run once per process, not once per student."""
    import matplotlib
    import nbformat

    matplotlib.use("Agg")
    nb = nbformat.read(source_notebook(assignment), as_version=4)
    found: dict[str, tuple[str, object, object]] = {}
    cell_id = [None]

    def record(name, value, judge=None):
        if name in found:
            raise ValueError(f"{assignment}: probe {name!r} is used twice")
        found[name] = (cell_id[0], None if judge else np.asarray(value), judge)

    ns: dict = {"__name__": f"reference_{assignment}"}
    cwd = os.getcwd()
    os.chdir(source_notebook(assignment).parent)  # as a notebook runs: in its own folder
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the notebook's prints are not news here
            for cell in nb.cells:
                if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []) \
                        or "widgets." in cell.source or "get_ipython" in cell.source:
                    continue
                meta = cell.metadata.get("nbgrader", {})
                cell_id[0] = meta.get("grade_id") if meta.get("grade") else None
                ns["probe"] = record
                try:
                    exec(compile(cell.source, f"<{assignment}:{meta.get('grade_id')}>", "exec"), ns)
                except Exception as err:  # noqa: BLE001 -- the instructor's own notebook: said as a sentence
                    what = (f"test cell {meta['grade_id']!r}" if meta.get("grade") and not meta.get("solution") else
                            f"cell {meta.get('grade_id') or nb.cells.index(cell) + 1!r}")
                    said = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
                    raise CourseError(
                        f"{assignment}: the source's own solution fails {what} ({type(err).__name__}"
                        f"{': ' + said if said else ''}). Every hidden test must pass on the instructor's solution:"
                        f" fix {source_notebook(assignment)}, then pm-course assignments.") from None
    finally:
        os.chdir(cwd)
        import matplotlib.pyplot as plt
        plt.close("all")
    return found


def failures(assignment: str, folder: Path) -> dict[str, list[str]]:
    """For each graded cell, what the student's probed values got wrong (empty: all right)."""
    out: dict[str, list[str]] = {}
    for name, (cell, want, judge) in reference(assignment).items():
        path = folder / f"{name}.npy"
        why = None
        if (folder / f"{name}.npy.error").exists():
            why = f"{name}: {(folder / f'{name}.npy.error').read_text()[:200]}"
        elif not path.is_file():
            why = f"{name}: no value (the hidden test did not get that far)"
        else:
            try:
                got = np.load(path, allow_pickle=False)
                ok = bool(judge(got)) if judge else _same(got, want)
            except Exception as err:  # noqa: BLE001 -- an unreadable or unjudgeable value is wrong
                ok, why = False, f"{name}: {type(err).__name__}"
            if not ok:
                why = why or f"{name}: wrong value"
        if why:
            out.setdefault(cell, []).append(why)
    return out


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape or got.dtype.kind not in "biuf":
        return False
    if want.dtype.kind in "biu":
        return bool(np.array_equal(got, want))
    return bool(np.allclose(got.astype(float), want.astype(float), rtol=1e-6, atol=1e-9))
