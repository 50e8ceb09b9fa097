"""The course folder, nbgrader's Python API, and what each assignment is.

Everything generated goes to ``course/`` at the repository's root (or
``$PM_COURSE_DIR``, or ``pm-course --course DIR``), which git ignores; the
exercise sources stay in ``exercises/``.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

# the checkout pm_course runs from (its exercises/ beside it); a pm-course installed elsewhere (pip install
# '.[course]') works on the course in the folder it is run from
_CHECKOUT = Path(__file__).resolve().parent.parent
ROOT = _CHECKOUT if (_CHECKOUT / "exercises").is_dir() else Path.cwd()
COURSE = Path(os.environ.get("PM_COURSE_DIR", ROOT / "course")).resolve()
BIN = Path(sys.executable).parent


class CourseError(SystemExit):
    """A problem the instructor must fix (bad input, a missing file): the message says what and where."""


def exercises_dir() -> Path:
    """The source assignments: ``exercises/``, or ``$PM_EXERCISES`` (a course of its own, or a test's copy)."""
    return Path(os.environ.get("PM_EXERCISES") or ROOT / "exercises").resolve()


def assignment_names() -> list[str]:
    """The assignments, one per folder of ``exercises/`` that holds a notebook, sorted.

    >>> assignment_names()[0]
    '01_copying'
    """
    return sorted(p.name for p in exercises_dir().glob("*")
                  if p.is_dir() and any(p.glob("*.ipynb")))


def source_notebook(name: str) -> Path:
    """The instructor's notebook of an assignment (solutions and hidden tests).

    Parameters
    ----------
    name : str
        The assignment, e.g. ``"01_copying"``.

    Returns
    -------
    Path
        ``exercises/<name>/<notebook>.ipynb``.
    """
    found = sorted((exercises_dir() / name).glob("*.ipynb"))
    if not found:
        raise CourseError(f"no assignment {name!r}: expected one of {assignment_names()}")
    return found[0]


def expected_notebooks() -> dict[str, str]:
    """Each assignment's notebook file name, as students receive it.

    >>> expected_notebooks()["01_copying"]
    'copying.ipynb'
    """
    return {name: source_notebook(name).name for name in assignment_names()}


def source_hash(name: str) -> str:
    """A SHA-256 of an assignment's source notebook: it tells a changed source from the released one."""
    return hashlib.sha256(source_notebook(name).read_bytes()).hexdigest()


@functools.cache
def max_points(name: str) -> float:
    """The points an assignment's graded cells are worth in all.

    >>> max_points("01_copying")  # its checks' 8 and its written answers' 4
    12
    """
    import nbformat

    nb = nbformat.read(source_notebook(name), as_version=4)
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))


_ENGINES: dict = {}  # the gradebook's SQLAlchemy engines in this process, by URL


def _engine(url, **kwargs):
    """One engine per gradebook URL and process (see :func:`api`)."""
    import sqlalchemy

    if url not in _ENGINES:
        _ENGINES[url] = sqlalchemy.create_engine(url, **kwargs)
    return _ENGINES[url]


def alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema, read from its migration scripts.

    nbgrader stamps a new gradebook with it, and finds it by running the
    ``alembic`` command, which loads every migration (about 3 s, paid by every
    new course); the scripts name their revisions in two plain assignments.

    >>> alembic_head()  # nbgrader 0.9's
    'e43177bfe90b'
    """
    import ast

    import nbgrader.dbutil

    down = {}  # revision -> the revision it follows
    for script in (Path(nbgrader.dbutil.ALEMBIC_DIR) / "versions").glob("*.py"):
        values = {t.id: node.value.value for node in ast.parse(script.read_text()).body
                  if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                  for t in node.targets if isinstance(t, ast.Name) and t.id in ("revision", "down_revision")}
        if isinstance(values.get("revision"), str):
            down[values["revision"]] = values.get("down_revision")
    heads = set(down) - set(down.values())
    if len(heads) != 1:
        raise CourseError(f"nbgrader's gradebook migrations have {len(heads)} newest revisions, not one:"
                          f" {sorted(heads)} in {Path(nbgrader.dbutil.ALEMBIC_DIR) / 'versions'}")
    return heads.pop()


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
    # and a new gradebook is stamped with the schema's newest revision, which nbgrader asks the
    # `alembic` command for (3 s a course): read from the migration scripts instead
    nbgrader.api.get_alembic_version = alembic_head

    os.environ["PM_COURSE_DIR"] = str(COURSE)
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader's own migrations run `alembic`
    COURSE.mkdir(parents=True, exist_ok=True)  # the SQLite gradebook's folder must exist
    return NbGraderAPI(config=PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config())


def worker_start() -> None:
    """A grading worker makes its own nbgrader API and gradebook engine (never a forked one)."""
    api.cache_clear()
    _ENGINES.clear()


def step(name: str, *args, check: bool = True, **kwargs) -> bool:
    """One nbgrader step through the API (e.g. ``step("autograde", "01_copying", "ada")``).

    Its log is appended to ``course/nbgrader.log``; with ``check``, a failure
    stops the command with a message that points there.
    """
    result = getattr(api(), name)(*args, **kwargs)
    with (COURSE / "nbgrader.log").open("a") as f:
        f.write(f"$ nbgrader {' '.join([name, *args])}\n{result.get('log', '')}{result.get('error', '')}\n")
    if check and not result["success"]:
        raise CourseError(f"nbgrader {name} {' '.join(args)} failed; see {COURSE / 'nbgrader.log'}")
    return result["success"]
