"""Where a graded notebook's time goes: one process, one notebook at a time, every step timed.

    python benchmarks/profile_grading.py [ASSIGNMENT] [N]     # N notebooks (default 5) of ASSIGNMENT

A course folder is made in a temporary directory, a class of ``N`` students
(full, partial, blank and erroring work in turn) is collected from a folder,
and the notebooks are graded one after another in this process, the way a
``pm-course grade`` worker grades them, with every step of nbgrader's
autograde, the sandboxed kernel's start, each cell, the probe judgement and
the feedback timed: wall seconds, this process's CPU seconds, and the CPU
seconds of everything else it started (the sandboxes and their kernels, read
from a cpuacct cgroup holding this process and its children). The first
notebook warms this process's caches and is left out of the medians.

``collect`` is profiled the same way: the whole command (a new process), and
its steps in this process.

:func:`profile_rows` gives the figures as rows of ``make bench`` (``run.py --profile``).
"""
from __future__ import annotations

import collections
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class Meter:
    """Wall seconds, this process's CPU seconds and the cgroup's CPU seconds (all processes in it)."""

    def __init__(self):
        self.group = None
        if os.access(CPUACCT, os.W_OK):
            group = CPUACCT / f"pm-profile-{os.getpid()}"
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group

    def now(self) -> tuple[float, float, float]:
        total = int((self.group / "cpuacct.usage").read_text()) / 1e9 if self.group else float("nan")
        return time.perf_counter(), time.process_time(), total

    def close(self):
        if self.group:
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            for _ in range(50):
                try:
                    self.group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


class Steps:
    """Named steps, each a list of (wall, own CPU, all CPU) over the notebooks."""

    def __init__(self, meter: Meter):
        self.meter, self.now = meter, collections.defaultdict(float)
        self.rows: dict[str, list[tuple[float, float, float]]] = collections.defaultdict(list)
        self.current: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def step(self, name: str):
        start = self.meter.now()
        try:
            yield
        finally:
            end = self.meter.now()
            acc = self.current.setdefault(name, [0.0, 0.0, 0.0])
            for i in range(3):
                acc[i] += end[i] - start[i]

    def close_notebook(self):
        for name, acc in self.current.items():
            self.rows[name].append(tuple(acc))
        self.current = {}


def _wrap(cls, method: str, steps: Steps, name):
    """Time every call of ``cls.method`` as step ``name`` (a string, or a function of the instance)."""
    original = getattr(cls, method)
    import inspect

    if inspect.iscoroutinefunction(original):
        async def timed(self, *a, **k):
            with steps.step(name(self) if callable(name) else name):
                return await original(self, *a, **k)
    else:
        def timed(self, *a, **k):
            with steps.step(name(self) if callable(name) else name):
                return original(self, *a, **k)
    setattr(cls, method, timed)


def instrument(steps: Steps) -> None:
    """Wrap nbgrader's, nbclient's and the sandbox's steps with timers."""
    from nbconvert.preprocessors.base import Preprocessor
    from nbgrader.converters.autograde import Autograde
    from nbgrader.converters.base import BaseConverter
    from nbgrader.converters.generate_feedback import GenerateFeedback

    from pm_course import sandbox

    _wrap(Preprocessor, "__call__", steps, lambda pp: f"  preprocessor {type(pp).__name__}")
    _wrap(Autograde, "init_assignment", steps, "  autograde: gradebook and files (init_assignment)")
    _wrap(BaseConverter, "init_single_notebook_resources", steps, "  nbgrader: read notebook")
    _wrap(BaseConverter, "write_single_notebook", steps, "  nbgrader: write notebook")
    _wrap(GenerateFeedback, "init_assignment", steps, "  feedback: init_assignment")
    _wrap(sandbox.SandboxKernelManager, "start_kernel", steps, "    kernel: start (bwrap argv, spawn)")
    _wrap(sandbox.SandboxKernelClient, "wait_for_ready", steps, "    kernel: wait until ready")
    _wrap(sandbox.SandboxKernelManager, "_async_cleanup_resources", steps, "    kernel: clean up (probes kept)")
    _wrap(sandbox.SandboxKernelManager, "shutdown_kernel", steps, "    kernel: shut down")
    from nbconvert.preprocessors import ExecutePreprocessor

    original = ExecutePreprocessor.preprocess_cell

    def preprocess_cell(self, cell, resources, index):
        with steps.step("    cells (kernel executing)"):
            with steps.step(f"      cell {index:2d} {_label(cell)}"):
                return original(self, cell, resources, index)
    ExecutePreprocessor.preprocess_cell = preprocess_cell


def _label(cell) -> str:
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("grade_id"):
        return meta["grade_id"]
    return (cell.source.strip().splitlines() or [""])[0][:40]


def _class(tmp: Path, assignment: str, students: int) -> tuple[Path, Path]:
    from grading import make_class

    course = tmp / "course"
    env = dict(os.environ, PM_COURSE_DIR=str(course))
    subprocess.run([sys.executable, "-m", "pm_course", "assignments"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    make_class(tmp / "class", course, students, [assignment])
    return course, tmp / "class"


def cpu_of(cmd, env, meter_group=None) -> tuple[float, float]:
    """(wall, CPU seconds of the whole process tree) of a command, in a cpuacct cgroup of its own."""
    group = None
    if os.access(CPUACCT, os.W_OK):
        group = CPUACCT / f"pm-profile-cmd-{os.getpid()}-{time.monotonic_ns()}"
        group.mkdir()
        join = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
        cmd = ["sh", "-c", join, str(group), *cmd]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    if group is None:
        return wall, float("nan")
    cpu = int((group / "cpuacct.usage").read_text()) / 1e9
    for _ in range(50):
        try:
            group.rmdir()
            break
        except OSError:
            time.sleep(0.1)
    return wall, cpu


def profile(assignment: str = "02_averaging", students: int = 5) -> dict:
    """The profile as ``{"steps": {name: (wall, own CPU, all CPU) medians}, ...}`` (see the module's doc)."""
    tmp = Path(tempfile.mkdtemp(prefix="pm-profile-"))
    course, class_dir = _class(tmp, assignment, students)
    env = dict(os.environ, PM_COURSE_DIR=str(course))
    out: dict = {"assignment": assignment, "students": students}
    # whole commands, each a new process: what the instructor waits for
    out["collect command"] = cpu_of([sys.executable, "-m", "pm_course", "collect", "--from", "folder",
                                     str(class_dir)], env)
    out["python start + import pm_course.cli"] = cpu_of([sys.executable, "-c", "import pm_course.cli"], env)
    out["python start + import nbgrader.apps"] = cpu_of([sys.executable, "-c", "import nbgrader.apps"], env)
    out["grade command (all notebooks, JOBS=1)"] = cpu_of(
        [sys.executable, "-m", "pm_course", "grade", "--jobs", "1", "--all"], env)

    # the same notebooks again, in this process, step by step
    meter = Meter()
    steps = Steps(meter)
    try:
        with steps.step("import pm_course.steps.grade, nbgrader.apps"):
            from pm_course.steps import grade as grade_mod
            from pm_course.grading import hidden
            from pm_course.state import submissions as submissions_mod
            import nbgrader.apps  # noqa: F401
        with steps.step("hidden.reference (the instructor's notebook, once per assignment)"):
            hidden.reference(assignment)
        with steps.step("nbgrader API (config read, once per process)"):
            from pm_course.state.course import Course, api
            here = Course(course)
            api(here)
        entries = [e for e in submissions_mod.read_manifest(here.manifest)
                   if e.status == submissions_mod.GRADED]
        once = steps.current
        steps.current = {}
        instrument(steps)
        from nbgrader.apps import NbGraderAPI
        _wrap(NbGraderAPI, "autograde", steps, "autograde (nbgrader API)")
        _wrap(NbGraderAPI, "generate_feedback", steps, "generate_feedback (nbgrader API)")
        original_failures = hidden.failures

        def failures(*a, **k):
            with steps.step("hidden.failures (probes judged)"):
                return original_failures(*a, **k)
        hidden.failures = failures
        for entry in entries:
            with steps.step("one notebook (_autograde)"):
                grade_mod._autograde(here, entry)
            steps.close_notebook()
    finally:
        from pm_course import sandbox

        sandbox.close_template()  # it lives in the measuring cgroup: gone before the cgroup is removed
        meter.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    out["once"] = {k: tuple(v) for k, v in once.items()}
    out["steps"] = {k: tuple(statistics.median(x[i] for x in v[1:] or v) for i in range(3))
                    for k, v in steps.rows.items()}
    out["n"] = len(entries)
    return out


def report(p: dict) -> str:
    lines = [f"profile: {p['n']} notebooks of {p['assignment']}, graded one after another (medians of the"
             f" {p['n'] - 1} after the first); {os.cpu_count()} cores",
             f"{'step':<66} {'wall s':>7} {'own CPU':>8} {'all CPU':>8}"]
    for key in ("python start + import pm_course.cli", "python start + import nbgrader.apps", "collect command",
                "grade command (all notebooks, JOBS=1)"):
        wall, cpu = p[key]
        lines.append(f"{key:<66} {wall:7.3f} {'':>8} {cpu:8.3f}")
    lines.append("once per grading process:")
    for name, (wall, own, every) in p["once"].items():
        lines.append(f"  {name:<64} {wall:7.3f} {own:8.3f} {every:8.3f}")
    lines.append("per notebook:")
    for name, (wall, own, every) in p["steps"].items():
        lines.append(f"  {name:<64} {wall:7.3f} {own:8.3f} {every:8.3f}")
    return "\n".join(lines)


def profile_rows() -> list[tuple]:
    """Rows for ``run.py``: one notebook's cost beside the 0.4 core-s target, and collect's."""
    p = profile()
    print(report(p))
    case = f"profile: {p['assignment']}, {p['n']} notebooks, JOBS=1"
    one = p["steps"]["one notebook (_autograde)"]
    cells = p["steps"].get("    cells (kernel executing)", (0, 0, 0))
    wall, cpu = p["grade command (all notebooks, JOBS=1)"]
    cwall, ccpu = p["collect command"]
    return [
        (case, "one notebook core-s", one[2], "all processes, in a warm grader",
         f"wall {one[0]:.2f} s, grader {one[1]:.2f} core-s, cells {cells[2]:.2f} core-s"),
        (case, "grade command core-s/notebook", cpu / p["n"], "a new process, its start-up included",
         f"{cpu:.2f} core-s, wall {wall:.1f} s for {p['n']} notebooks"),
        (case, "collect command core-s", ccpu, "a new process", f"wall {cwall:.2f} s"),
    ]


if __name__ == "__main__":
    args = sys.argv[1:]
    print(report(profile(args[0] if args else "02_averaging", int(args[1]) if len(args) > 1 else 5)))
