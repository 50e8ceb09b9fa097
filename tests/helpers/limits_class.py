"""Notebooks of 01_copying that test the grader's limits, and busy processes to grade them beside.

Each notebook is a right answer as a student hands it in (``conftest.answered``)
with one thing added: slow but right code, a loop the interrupt cannot stop, a
crash, lots of output, damaged metadata. What they should score is the work's:
the same on a quiet or a busy machine, at any JOBS, on every regrade.
"""
from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat

from conftest import answered  # tests/course (on sys.path for its tests)
import pm

ROOT = Path(__file__).resolve().parents[2]
NAME, NOTEBOOK = "01_copying", "copying.ipynb"

# copy_query, right, after burning `s` CPU seconds on its first call (time.process_time counts CPU, not wall)
SLOW_COPY = '''_burnt = []


def copy_query(keys, j, beta):
    """A query (d,) that attends to key j, sharper as beta grows."""
    if not _burnt:
        start = time.process_time()
        while time.process_time() - start < {s}:
            pass
        _burnt.append(True)
    return beta * keys[j]
'''
RIGHT_COPY = '''def copy_query(keys, j, beta):
    """A query (d,) that attends to key j, sharper as beta grows."""
    return beta * keys[j]
'''
# an interrupt is a KeyboardInterrupt: a bare except swallows it, and the loop goes on
SWALLOWS_INPUT = "while True:\n    try:\n        input()\n    except:\n        pass\n"
SWALLOWS_SLEEP = "import time\nwhile True:\n    try:\n        time.sleep(1000)\n    except:\n        pass\n"
RECURSION = ("import sys\nsys.setrecursionlimit(100_000)\n\n\ndef deeper(n):\n    try:\n        return deeper(n + 1)\n"
             "    except:\n        return deeper(n + 1)\n\n\ndeeper(0)\n")
CRASH = "import ctypes\nctypes.string_at(0)  # a segmentation fault: the kernel dies\n"
PRINTS = "for i in range(300_000):\n    print('line', i)\n"


def notebook(*, before: dict | None = None, edit: dict | None = None, **kw) -> nbformat.NotebookNode:
    """A right answer of 01_copying; ``before``: {grade_id: source of a cell the student added above it};
    ``edit``: {grade_id: new source}; other arguments go to ``conftest.answered``."""
    nb = nbformat.reads(answered(NAME, edit=edit, **kw).decode(), as_version=4)
    for gid, source in (before or {}).items():
        i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
        nb.cells.insert(i, nbformat.v4.new_code_cell(source))
    return nb


def slow(seconds: float) -> nbformat.NotebookNode:
    return notebook(edit={"copy": "import time\n\n\n" + SLOW_COPY.format(s=seconds)})


def write(folder: Path, notebooks: dict[str, nbformat.NotebookNode]) -> Path:
    """``folder/<student>/01_copying/copying.ipynb`` for each notebook."""
    for student, nb in notebooks.items():
        dest = folder / student / NAME / NOTEBOOK
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest)
    return folder


@contextlib.contextmanager
def busy(n: int = 3):
    """``n`` processes that keep a core busy each, for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def exercises(dest: Path) -> Path:
    """A copy of exercises/ holding 01_copying only (for PM_EXERCISES): no time spent releasing the others."""
    if not (dest / NAME).is_dir():
        shutil.copytree(ROOT / "exercises" / NAME, dest / NAME)
    return dest


def pm_course(*args, course: Path, env: dict | None = None, timeout: int = 1800) -> subprocess.CompletedProcess:
    """``python -m pm_course ARGS`` for the course folder ``course``, with 01_copying as the only assignment."""
    full = dict(os.environ, PM_COURSE_DIR=str(course), PM_EXERCISES=str(exercises(course.parent / "exercises")),
                **(env or {}))
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=full, capture_output=True,
                  text=True, timeout=timeout)


def scores(course: Path, assignment: str = NAME) -> str:
    """grades.csv's student, status, reason and score of ``assignment``, as CSV text (byte-comparable)."""
    out = io.StringIO()
    writer = csv.writer(out)
    with open(course / "grades.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["assignment"] == assignment:
                writer.writerow([row["student_id"], row["status"], row["reason"], row["score"], row["max_score"]])
    return out.getvalue()
