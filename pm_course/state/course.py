"""The course (its folder, every path in it, its course file), nbgrader's Python API, and what each assignment is.

Everything generated goes to the course folder: ``course/`` at the
repository's root (or ``$PM_COURSE_DIR``, or ``pm-course --course DIR``),
which git ignores; the exercise sources stay in ``exercises/``. The folder is
chosen once, when a command starts (:func:`pm_course.cli.main`), as a
:class:`Course`, which every step is handed: nothing reads the folder from the
environment when it is imported, and each path in it is named here once.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the checkout pm_course runs from (its exercises/ beside it); a pm-course installed elsewhere (pip install
# '.[course]') works on the course in the folder it is run from
_CHECKOUT = Path(__file__).resolve().parents[2]
ROOT = _CHECKOUT if (_CHECKOUT / "exercises").is_dir() else Path.cwd()
BIN = Path(sys.executable).parent


class CourseError(SystemExit):
    """A problem the instructor must fix (bad input, a missing file): the message says what and where."""


def default_folder() -> Path:
    """The course folder when none is given: ``$PM_COURSE_DIR``, else ``course/`` at the repository's root.

    The one place the variable is read (by :func:`pm_course.cli.main`, and by
    nbgrader_config.py for nbgrader's own apps).
    """
    return Path(os.environ.get("PM_COURSE_DIR") or ROOT / "course").resolve()


@dataclass(frozen=True)
class Course:
    """One course: its folder, every file and folder of its state, and its course file's settings.

    Made once per command (:func:`pm_course.cli.main`) and handed to every step.

    >>> course = Course(Path("/tmp/term"))
    >>> course.grades, course.lock
    (PosixPath('/tmp/term/grades.csv'), PosixPath('/tmp/term/.lock'))
    """

    folder: Path
    # the course file, read (pm_course.state.config.Settings; None: none read, as for nbgrader's steps, which need none)
    settings: Any = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "folder", Path(self.folder).resolve())

    # nbgrader's folders and database
    @property
    def gradebook(self) -> Path:
        """nbgrader's SQLite gradebook."""
        return self.folder / "gradebook.db"

    @property
    def release(self) -> Path:
        """The student versions, one folder per assignment."""
        return self.folder / "release"

    @property
    def release_history(self) -> Path:
        """Each student version released before, by its source's hash."""
        return self.folder / "release-history"

    @property
    def submitted(self) -> Path:
        """What was collected: ``<student>/<assignment>/<notebook>``."""
        return self.folder / "submitted"

    @property
    def autograded(self) -> Path:
        """nbgrader's graded copies."""
        return self.folder / "autograded"

    @property
    def feedback(self) -> Path:
        """The feedback pages, ``<student>/<assignment>/<notebook>.html``."""
        return self.folder / "feedback"

    @property
    def nbgrader_log(self) -> Path:
        """The log of every nbgrader step."""
        return self.folder / "nbgrader.log"

    # pm-course's own state
    @property
    def manifest(self) -> Path:
        """What collect found, what every other step reads (pm_course/state/submissions.py)."""
        return self.folder / "submissions.csv"

    @property
    def grades(self) -> Path:
        """The grades, one row per student and assignment (pm_course/state/grades_csv.py)."""
        return self.folder / "grades.csv"

    @property
    def graded_hashes(self) -> Path:
        """What each notebook was when last graded (pm_course/state/fingerprints.py)."""
        return self.folder / "graded.json"

    @property
    def synced(self) -> Path:
        """The files grades.csv was last brought up to date with, by their hashes (pm_course/state/written.py)."""
        return self.folder / "synced.json"

    @property
    def probes(self) -> Path:
        """The values each notebook's hidden tests probed."""
        return self.folder / "probes"

    @property
    def review(self) -> Path:
        """The review sheets and pages (pm_course/steps/review.py)."""
        return self.folder / "review"

    @property
    def export(self) -> Path:
        """What export and feedback write for the LMS."""
        return self.folder / "export"

    @property
    def exported(self) -> Path:
        """What was exported to each LMS, cell by cell (pm_course/state/lms_cells.py)."""
        return self.export / "exported.json"

    @property
    def pushes(self) -> Path:
        """Each push's preview and journal (pm_course/steps/push.py)."""
        return self.export / "push"

    @property
    def pushed(self) -> Path:
        """What was pushed to each LMS, student by student (pm_course/steps/push.py)."""
        return self.export / "pushed.json"

    @property
    def history(self) -> Path:
        """What each collection replaced (pm_course/state/history.py)."""
        return self.folder / "history"

    @property
    def choices(self) -> Path:
        """The notebooks a student handed in together, for ``collect --choose`` (pm_course/steps/collect.py)."""
        return self.history / "choices"

    @property
    def undone(self) -> Path:
        """What each undone collection had brought in."""
        return self.history / "undone"

    @property
    def lock(self) -> Path:
        """The lock every writing command holds (pm_course/state/files.py)."""
        return self.folder / ".lock"

    @property
    def holder(self) -> Path:
        """Who holds the lock."""
        return self.folder / ".lock-holder"

    @property
    def book(self) -> Path:
        """The course edition of the site."""
        return self.folder / "book"

    @property
    def book_src(self) -> Path:
        """The course edition's sources."""
        return self.folder / "book-src"

    def collected(self, student: str, assignment: str) -> Path:
        """The collected notebook of a student's assignment (it may not exist)."""
        return self.submitted / student / assignment / expected_notebooks()[assignment]

    def page(self, student: str, assignment: str) -> Path:
        """The feedback page ``grade`` makes of a student's assignment (it may not exist)."""
        return self.feedback / student / assignment / (Path(expected_notebooks()[assignment]).stem + ".html")


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


def is_test(cell) -> bool:
    """Whether a notebook cell is one of the assignment's tests: a graded code cell that is not a solution."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def source_hash(name: str) -> str:
    """A SHA-256 of an assignment's source notebook: it tells a changed source from the released one."""
    return hashlib.sha256(source_notebook(name).read_bytes()).hexdigest()


def max_points(name: str) -> float:
    """The points an assignment's graded cells are worth in all.

    >>> max_points("01_copying")  # its checks' 8 and its written answers' 4
    12
    """
    path = source_notebook(name)
    stat = path.stat()
    return _points(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _points(path: Path, mtime_ns: int, size: int) -> float:
    """:func:`max_points` of one version of a source notebook (read once per version, not per student)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
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


_APIS: dict = {}  # nbgrader's API in this process, by course folder and exercises


def api(course: Course):
    """nbgrader's Python API for ``course``, configured by nbgrader_config.py; made once per process.

    Loading nbgrader takes seconds, so one process grades every notebook (the
    way nbgrader's own formgrader does); each notebook still runs in a kernel
    of its own, and each step reports failure instead of stopping the rest.
    """
    key = (course.folder, exercises_dir())
    if key in _APIS:
        return _APIS[key]
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

    if str(BIN) not in os.environ.get("PATH", "").split(os.pathsep):  # nbgrader's own migrations run `alembic`
        os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    course.folder.mkdir(parents=True, exist_ok=True)  # the SQLite gradebook's folder must exist
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    configure(config, course)
    _APIS[key] = NbGraderAPI(config=config)
    return _APIS[key]


def configure(config, course: Course) -> None:
    """nbgrader's configuration (nbgrader_config.py's) pointed at ``course``: its folder, its gradebook, and the
    folder the steps nbgrader runs (the sandbox, the repairs, the feedback pages) read the course's files in."""
    config.CourseDirectory.root = str(course.folder)
    config.CourseDirectory.source_directory = os.path.relpath(exercises_dir(), course.folder)
    config.CourseDirectory.db_url = f"sqlite:///{course.gradebook}?timeout=60"
    for name in ("SandboxKernelManager", "RestoreCells", "FeedbackExporter"):
        config[name].course_folder = str(course.folder)


def forget(course: Course) -> None:
    """Let go of ``course``'s nbgrader API and gradebook connections (a command's end, in-process)."""
    for key in [k for k in _APIS if k[0] == course.folder]:
        del _APIS[key]
    url = f"sqlite:///{course.gradebook}?timeout=60"
    if url in _ENGINES:
        _ENGINES.pop(url).dispose()


def worker_start() -> None:
    """A grading worker makes its own nbgrader API and gradebook engine (never a forked one)."""
    _APIS.clear()
    _ENGINES.clear()


def step(course: Course, name: str, *args, check: bool = True, **kwargs) -> bool:
    """One nbgrader step through the API (e.g. ``step(course, "autograde", "01_copying", "ada")``).

    Its log is appended to ``course/nbgrader.log``; with ``check``, a failure
    stops the command with a message that points there.
    """
    result = getattr(api(course), name)(*args, **kwargs)
    with course.nbgrader_log.open("a") as f:
        f.write(f"$ nbgrader {' '.join([name, *args])}\n{result.get('log', '')}{result.get('error', '')}\n")
    if check and not result["success"]:
        raise CourseError(f"nbgrader {name} {' '.join(args)} failed; see {course.nbgrader_log}")
    return result["success"]
