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

ROOT = Path(__file__).resolve().parent.parent
COURSE = Path(os.environ.get("PM_COURSE_DIR", ROOT / "course"))
BIN = Path(sys.executable).parent


def assignment_names() -> list[str]:
    return sorted(p.name for p in (ROOT / "exercises").iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb")))


@functools.cache
def api():
    """nbgrader's Python API, configured by nbgrader_config.py; made once.

    Loading nbgrader takes seconds, so one process grades every notebook (the
    way nbgrader's own formgrader does); each notebook still runs in a kernel
    of its own, and each step reports failure instead of stopping the rest.
    """
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

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


def export_grades(out: Path) -> None:
    """The gradebook as CSV, one row per student and assignment (``nbgrader export``)."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    coursedir = api().coursedir
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        CsvExportPlugin(to=str(out)).export(gradebook)


def assignments() -> None:
    for name in assignment_names():
        step("generate_assignment", name, force=True)
    print(f"Student versions: {COURSE / 'release'}")


def _collect(submissions: Path) -> dict[str, list[str]]:
    """Copy DIR/<student>/<assignment>/*.ipynb into course/submitted; return what came."""
    if not submissions.is_dir():
        sys.exit(f"SUBMISSIONS={submissions} is not a folder")
    known = set(assignment_names())
    found: dict[str, list[str]] = {}
    for student in sorted(p for p in submissions.iterdir() if p.is_dir()):
        for folder in sorted(p for p in student.iterdir() if p.is_dir()):
            if folder.name not in known:
                print(f"  skipping {folder}: no assignment called {folder.name!r}"
                      f" (expected one of {sorted(known)})")
                continue
            dest = COURSE / "submitted" / student.name / folder.name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(folder, dest)
            for notebook in dest.glob("*.ipynb"):
                _drop_duplicate_cells(notebook, f"{student.name}/{folder.name}")
            found.setdefault(folder.name, []).append(student.name)
    if not found:
        sys.exit(f"no submissions found: expected {submissions}/<student>/<assignment>/<notebook>.ipynb"
                 f" with <assignment> one of {sorted(known)}")
    return found


def _drop_duplicate_cells(path: Path, who: str) -> None:
    """nbgrader rejects a whole notebook when a graded cell appears twice (a
    copy-paste accident): keep the first copy of each grade_id, drop the rest.
    Only the copy in course/submitted is changed; the original stays as it was."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:  # not JSON at all: nbgrader will grade it 0
        print(f"  {who}: {path.name} is not a readable notebook ({err})")
        return
    seen, kept = set(), []
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid is not None and gid in seen:
            print(f"  {who}: dropped a duplicate of cell {gid!r} in {path.name}")
            continue
        seen.add(gid)
        kept.append(cell)
    if len(kept) != len(nb.cells):
        nb.cells = kept
        nbformat.write(nb, path)


def grade(submissions: Path) -> None:
    import sandbox

    print(sandbox.check())
    os.environ["PM_SUBMISSIONS"] = str(submissions)  # hidden from the kernels, like the course folder
    release = COURSE / "release"
    if not all((release / name).is_dir() for name in assignment_names()):
        assignments()
    found = _collect(submissions)
    for name, students in found.items():
        for student in students:
            # One student at a time: a broken notebook cannot take the others down.
            if not step("autograde", name, student, force=True, create=True, check=False):
                print(f"  {student}/{name}: could not be autograded (see {COURSE / 'nbgrader.log'})")
        step("generate_feedback", name, force=True, check=False)
    out = COURSE / "grades.csv"
    export_grades(out)
    with out.open() as f:
        rows = list(csv.DictReader(f))
    print(f"Graded {sum(len(s) for s in found.values())} submissions of {len(found)} assignment(s).")
    print(f"Grades:   {out} ({len(rows)} rows)")
    print(f"Feedback: {COURSE / 'feedback'}")


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
