"""The course workflow on top of nbgrader: student versions, grading, a course edition.

    python scripts/course.py assignments
    python scripts/course.py grade DIR        # DIR/<student>/<assignment>/<notebook>.ipynb
    python scripts/course.py book             # course edition of the site: no solutions

Everything generated goes to course/ (or $PM_COURSE_DIR). Submissions are
copied, never moved: DIR is left as it was.
"""
from __future__ import annotations

import csv
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import feedback
import hidden
import isolate
import submissions as submissions_mod

ROOT = Path(__file__).resolve().parent.parent
COURSE = Path(os.environ.get("PM_COURSE_DIR", ROOT / "course"))
BIN = Path(sys.executable).parent


def assignment_names() -> list[str]:
    return sorted(p.name for p in (ROOT / "exercises").iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb")))


def source_notebook(name: str) -> Path:
    """The instructor's notebook of an assignment (solutions and hidden tests)."""
    return next((ROOT / "exercises" / name).glob("*.ipynb"))


_ENGINES: dict = {}  # the gradebook's SQLAlchemy engines in this process, by URL


def _engine(url, **kwargs):
    """One engine per gradebook URL and process (see :func:`api`)."""
    import sqlalchemy

    if url not in _ENGINES:
        _ENGINES[url] = sqlalchemy.create_engine(url, **kwargs)
    return _ENGINES[url]


@functools.cache
def api():
    """nbgrader's Python API, configured by nbgrader_config.py; made once.

    Loading nbgrader takes seconds, so one process grades every notebook (the
    way nbgrader's own formgrader does); each notebook still runs in a kernel
    of its own, and each step reports failure instead of stopping the rest.
    """
    import warnings

    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    # nbgrader's gradebook code trips SQLAlchemy's session warnings on every run: noise, not news
    warnings.filterwarnings("ignore", message=".*not in session.*")
    # nbgrader opens the gradebook about ten times per notebook, each time with a new
    # engine, whose cache of compiled statements is then lost: here the engine is kept
    # for the life of the process (closing a gradebook still closes its connections).
    # This took a fifth of the grader's own CPU time per notebook.
    import nbgrader.api

    nbgrader.api.create_engine = _engine

    os.environ["PM_COURSE_DIR"] = str(COURSE)
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader runs `alembic`
    COURSE.mkdir(parents=True, exist_ok=True)  # the SQLite gradebook's folder must exist
    return NbGraderAPI(config=PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config())


def step(name: str, *args, check: bool = True, **kwargs) -> bool:
    """One nbgrader step through the API (e.g. ``step("autograde", "01_copying", "ada")``)."""
    result = getattr(api(), name)(*args, **kwargs)
    with (COURSE / "nbgrader.log").open("a") as f:
        f.write(f"$ nbgrader {' '.join([name, *args])}\n{result.get('log', '')}{result.get('error', '')}\n")
    if check and not result["success"]:
        sys.exit(f"nbgrader {name} {' '.join(args)} failed; see {COURSE / 'nbgrader.log'}")
    return result["success"]


def test_cells_stand_alone(name: str) -> list[str]:
    """Problems with the test cells of an assignment: each must run on its own.

    A test cell that uses a name only another test cell defines fails when a
    student deletes (or breaks) that other cell, and costs points that are not
    its own. Returns one message per such use.
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
            found |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in n.args.args}
            found |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
        return found

    nb = nbformat.read(source_notebook(name), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "get_ipython" not in c.source]
    is_test = [bool(c.metadata.get("nbgrader", {}).get("grade")) and not c.metadata["nbgrader"].get("solution")
               for c in cells]
    shared = set(dir(builtins)).union(*(names(c.source, ast.Store) for c, t in zip(cells, is_test) if not t))
    problems = []
    for cell, test in zip(cells, is_test):
        if not test:
            continue
        own = names(cell.source, ast.Store)
        for other, other_test in zip(cells, is_test):
            if other_test and other is not cell:
                borrowed = (names(cell.source, ast.Load) - own - shared) & names(other.source, ast.Store)
                problems += [f"{name}: test cell {cell.metadata['nbgrader']['grade_id']!r} uses {n!r}, which only"
                             f" test cell {other.metadata['nbgrader']['grade_id']!r} defines" for n in sorted(borrowed)]
    return problems


def assignments() -> None:
    import nbformat

    problems = [p for name in assignment_names() for p in test_cells_stand_alone(name)]
    problems += [p for name in assignment_names()
                 for p in isolate.problems(nbformat.read(source_notebook(name), as_version=4), name)]
    if problems:
        sys.exit("Each test cell must stand alone (a student may delete or break another) and judge"
                 " its own function (see scripts/isolate.py):\n  "
                 + "\n  ".join(problems))
    for name in assignment_names():
        step("generate_assignment", name, force=True)
    print(f"Student versions: {COURSE / 'release'}")


def _drop_duplicate_cells(nb) -> list[str]:
    """nbgrader rejects a whole notebook when a graded cell appears twice (a
    copy-paste accident): keep the first copy of each grade_id, drop the rest.
    Returns the grade_ids dropped."""
    seen, kept, dropped = set(), [], []
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid is not None and gid in seen:
            dropped.append(gid)
            continue
        seen.add(gid)
        kept.append(cell)
    nb.cells = kept
    return dropped


def expected_notebooks() -> dict[str, str]:
    """Each assignment's notebook file name, as students receive it."""
    return {name: source_notebook(name).name for name in assignment_names()}


@functools.cache
def max_points(name: str) -> float:
    import nbformat

    nb = nbformat.read(source_notebook(name), as_version=4)
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))


def _why(log: str) -> str:
    """A short reason from nbgrader's log of a failed autograde."""
    if "DeadKernelError" in log or "Kernel died" in log:
        return "the kernel died (a memory or process cap, or a crash)"
    if "Timeout" in log:
        return "timed out"
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]") and "see the" not in line]
    return errors[-1].removeprefix("[ERROR]").strip()[:200] if errors else "nbgrader could not grade it"


def _autograde(entry) -> tuple[str, str, str]:
    """Grade one student's notebook: (status, reason, log). Runs in a worker process when JOBS > 1."""
    probes = COURSE / "probes" / entry.student / entry.assignment
    shutil.rmtree(probes, ignore_errors=True)  # what the kernel probes this time, nothing older
    result = api().autograde(entry.assignment, entry.student, force=True, create=True)
    log = f"$ nbgrader autograde {entry.assignment} {entry.student}\n" + result.get("log", "") + result.get("error", "")
    if not result["success"]:
        return submissions_mod.FAILED, _why(log), log
    wrong = hidden.failures(entry.assignment, probes)
    if wrong:
        log += _zero_cells(entry, wrong)
    # the feedback is made here too, after the scores are final, so that it runs JOBS at a time
    feedback = api().generate_feedback(entry.assignment, entry.student, force=True)
    log += feedback.get("log", "") + feedback.get("error", "")
    return entry.status, entry.reason, log


def _worker_start() -> None:
    """A grading worker makes its own nbgrader API and gradebook engine (never a forked one)."""
    api.cache_clear()
    _ENGINES.clear()


def jobs() -> int:
    raw = os.environ.get("PM_GRADE_JOBS", "")
    try:
        n = int(raw) if raw else os.cpu_count() or 1
    except ValueError:
        sys.exit(f"JOBS={raw!r} must be a whole number of notebooks to grade at once")
    if n < 1:
        sys.exit(f"JOBS={n}: at least one notebook must be graded at a time")
    return n


def _autograde_all(entries) -> None:
    """Grade every gradeable entry, JOBS at a time; each notebook in its own kernel and sandbox.

    Workers share nbgrader's SQLite gradebook: SQLite serialises their writes
    (each autograde is a few short transactions), and the log is written here,
    in submission order, so the result is the same for any JOBS.
    """
    import concurrent.futures
    import multiprocessing

    todo = [e for e in entries if e.status == submissions_mod.GRADED]
    for assignment in sorted({e.assignment for e in todo}):
        hidden.reference(assignment)  # once, here: forked workers inherit it
    n = min(jobs(), len(todo))
    if n <= 1:
        results = [_autograde(e) for e in todo]
    else:
        import nbgrader.apps  # noqa: F401 -- imported once, here, rather than in every worker

        # the longest notebooks first, so that no worker is left with one at the end (the
        # instructor's notebook, with its outputs, is larger where there is more to run)
        cost = {a: source_notebook(a).stat().st_size for a in expected_notebooks()}
        order = sorted(range(len(todo)), key=lambda i: -cost[todo[i].assignment])
        context = multiprocessing.get_context("fork")  # the workers inherit the loaded modules
        with concurrent.futures.ProcessPoolExecutor(n, mp_context=context, initializer=_worker_start) as pool:
            done = dict(zip(order, pool.map(_autograde, [todo[i] for i in order])))
        results = [done[i] for i in range(len(todo))]
    with (COURSE / "nbgrader.log").open("a") as f:
        for entry, (status, reason, log) in zip(todo, results):
            entry.status, entry.reason = status, reason
            f.write(log + "\n")


def _zero_cells(entry, wrong: dict[str, list[str]]) -> str:
    """Take the points of the cells whose probed values the grader found wrong; what to log."""
    from nbgrader.api import Gradebook

    notebook = Path(expected_notebooks()[entry.assignment]).stem
    coursedir, log = api().coursedir, ""
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for cell, reasons in wrong.items():
            grade = gradebook.find_grade(cell, notebook, entry.assignment, entry.student)
            if grade.auto_score:
                grade.auto_score = 0.0
                log += (f"hidden tests, judged by the grader: {entry.student}/{entry.assignment} {cell}: "
                        + "; ".join(reasons) + "\n")
        gradebook.db.commit()
    return log


def grade(submissions: Path) -> None:
    import nbformat
    import sandbox

    print(sandbox.check())
    print(f"Grading {jobs()} notebook(s) at a time (JOBS).")
    if not submissions.is_dir():
        sys.exit(f"SUBMISSIONS={submissions} is not a folder")
    os.environ["PM_SUBMISSIONS"] = str(submissions)  # hidden from the kernels, like the course folder
    release = COURSE / "release"
    if not all((release / name).is_dir() for name in assignment_names()):
        assignments()
    expected = expected_notebooks()
    found = submissions_mod.match(submissions, expected)
    entries = found.entries
    if not any(e.file for e in entries):
        sys.exit(f"no submissions found: expected {submissions}/<student>/<assignment>/<notebook>.ipynb"
                 f" with <assignment> one of {sorted(expected)}")
    for warning in found.warnings:
        print(f"  note: {warning}")
    for entry in entries:
        if entry.status != submissions_mod.GRADED:
            continue
        try:  # a file that is not a notebook fails here, with nbformat's reason
            nb = nbformat.read(entry.file, as_version=4)
        except Exception as err:  # noqa: BLE001 -- any unreadable file
            entry.status, entry.reason = submissions_mod.FAILED, f"not a notebook ({type(err).__name__}: {err})"[:200]
            continue
        dest = COURSE / "submitted" / entry.student / entry.assignment
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        name = expected[entry.assignment]
        dropped = _drop_duplicate_cells(nb)  # only nbgrader's copy changes; the student's file stays as it was
        for gid in dropped:
            print(f"  {entry.student}/{entry.assignment}: dropped a duplicate of cell {gid!r} in {name}")
        if dropped:
            nbformat.write(nb, dest / name)
        else:
            shutil.copy(entry.file, dest / name)  # copied, never moved
    feedback.install_mathjax(COURSE / "feedback")  # the pages load it from there, offline
    _autograde_all(entries)  # each in its own kernel: a broken notebook cannot take the others down
    _read_scores(entries)
    _write_grades(entries, COURSE / "grades.csv")
    points = {name: max_points(name) for name in expected}
    print(submissions_mod.summary(entries, points))
    for entry in entries:
        if entry.status == submissions_mod.FAILED:
            print(f"  {entry.student}/{entry.assignment}: could not be graded: {entry.reason}")
    if found.unused:
        print("Not used (not matched to an assignment's notebook):")
        for path in found.unused:
            print(f"  {path.relative_to(submissions)}")
    graded = sum(e.status == submissions_mod.GRADED for e in entries)
    print(f"Graded {graded} notebooks of {len({e.student for e in entries})} students.")
    print(f"Grades:   {COURSE / 'grades.csv'} (one row per student and assignment, with a status)")
    print(f"Feedback: {COURSE / 'feedback'}")


def _read_scores(entries) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = api().coursedir
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for entry in entries:
            entry.max_score = max_points(entry.assignment)
            if entry.status != submissions_mod.GRADED:
                continue
            try:
                submission = gradebook.find_submission(entry.assignment, entry.student)
            except MissingEntry:
                entry.status, entry.reason = submissions_mod.FAILED, "nbgrader recorded no grade"
                continue
            entry.score = submission.score


def _write_grades(entries, out: Path) -> None:
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student_id", "assignment", "status", "reason", "score", "max_score"])
        for e in sorted(entries, key=lambda e: (e.student, e.assignment)):
            score = "" if e.status != submissions_mod.GRADED else f"{e.score:g}"
            writer.writerow([e.student, e.assignment, e.status, e.reason, score, f"{e.max_score:g}"])


def book() -> None:
    """Build the course edition: the site with student versions of the exercises."""
    import yaml

    assignments()
    src = COURSE / "book-src"
    if src.exists():
        shutil.rmtree(src)
    keep = {"_config.yml", "_toc.yml", "intro.md", "bibliography.md", "references.bib", "chapters", "_static", "_ext", "api.md"}
    src.mkdir(parents=True)
    for name in keep:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name)
        elif path.exists():
            shutil.copy(path, src / name)
    shutil.copytree(COURSE / "release", src / "exercises")
    config = yaml.safe_load((src / "_config.yml").read_text())
    config["title"] += " (course edition)"
    # Student versions stop at their first unfilled cell, so nothing is executed
    # here: chapters keep the outputs that nbval checks, exercises show none.
    config["execute"]["execute_notebooks"] = "off"
    # The exercises here are student versions already: their downloads need no swap
    # (and scripts/, which makes them, is not part of this copy).
    config["sphinx"]["config"]["pm_student_downloads"] = []
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    subprocess.run([str(BIN / "jupyter-book"), "build", str(src), "--all", "--path-output",
                    str(COURSE / "book")], check=True)
    print(f"Course edition: {COURSE / 'book' / '_build' / 'html' / 'index.html'}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in {"assignments", "grade", "book"}:
        sys.exit(__doc__)
    if sys.argv[1] == "grade":
        if len(sys.argv) != 3:
            sys.exit("usage: python scripts/course.py grade DIR")
        grade(Path(sys.argv[2]).resolve())
    else:
        {"assignments": assignments, "book": book}[sys.argv[1]]()
