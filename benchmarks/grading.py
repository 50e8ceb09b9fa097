"""Grading speed: the same synthetic class graded three ways, side by side.

(:func:`rows_term` does the same for a whole term: every assignment, handed in
through Canvas's "Download Submissions" zips and collected by ``pm-course``.)

1. nbgrader's own CLI, ``nbgrader autograde <assignment>`` once per assignment
   (with this repository's configuration, so its kernels are sandboxed too,
   each a new Python as nbgrader starts them: ``PM_GRADE_WARM=0``, not forked
   from pm-course's warm template);
2. ``make grade`` with ``JOBS=1``;
3. ``make grade`` with ``JOBS`` = the number of cores.

Each contender starts from a copy of the same prepared course folder and is
timed in its own block; the peak memory is the largest total resident size of
its process tree, sampled every 0.1 s. The three take turns, several rounds,
and the figures are medians.
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = ["01_copying", "02_averaging", "03_subspace", "05_two_heads"]
KINDS = ("full", "partial", "blank", "error")
OVERHEAD = 2**30  # the grader itself and nbgrader, beside the kernels' caps


def _source(name):
    return next((ROOT / "exercises" / name).glob("*.ipynb"))


def make_class(folder: Path, course: Path, students: int, assignments=ASSIGNMENTS) -> int:
    """DIR/<student>/<assignment>/<notebook>: full, partial, blank and erroring work in turn."""
    n = 0
    for s in range(students):
        kind = KINDS[s % len(KINDS)]
        for name in assignments:
            if kind == "blank":
                nb = nbformat.read(next((course / "release" / name).glob("*.ipynb")), as_version=4)
            else:
                nb = nbformat.read(_source(name), as_version=4)
                for cell in nb.cells:  # what students hand in has no hidden tests
                    cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
                solutions = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")
                             and c.cell_type == "code"]
                if kind == "partial":
                    solutions[-1].source = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION",
                                                  "raise NotImplementedError()", solutions[-1].source, flags=re.S)
                if kind == "error":
                    solutions[0].source += "\n\nraise RuntimeError('a stray line left in')"
            dest = folder / f"student{s:02d}" / name / _source(name).name
            dest.parent.mkdir(parents=True)
            nbformat.write(nb, dest)
            n += 1
    return n


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack += children.get(p, [])
    return total


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def run_measured(cmds: list[list[str]], env: dict) -> tuple[float, int, bool, float]:
    """(seconds, peak bytes of the process tree, all succeeded, CPU seconds) for commands run one after another.

    The CPU seconds are those of every process the commands started, the
    sandboxes' kernels included, from a cpuacct cgroup (NaN where cgroups
    cannot be made: a killed kernel's time is lost to ``getrusage``).
    """
    peak, ok, start = 0, True, time.perf_counter()
    group = None
    if os.access(CPUACCT, os.W_OK):
        group = CPUACCT / f"pm-bench-{os.getpid()}-{time.monotonic_ns()}"
        group.mkdir()
    for cmd in cmds:
        if group:  # join the cgroup first: everything the command starts is counted
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *cmd]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        done = threading.Event()

        def sample():
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _tree_rss(proc.pid))
                time.sleep(0.1)
        sampler = threading.Thread(target=sample)
        sampler.start()
        ok &= proc.wait() == 0
        done.set()
        sampler.join()
    seconds = time.perf_counter() - start
    cpu = float("nan")
    if group:
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        for _ in range(100):  # the last sandboxes leave their cgroup a moment after the command ends
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    return seconds, peak, ok, cpu


REFERENCE_KERNEL = """
import os, resource, sys
import matplotlib
matplotlib.use("Agg")
import numpy, attnlib, attnlib.checks, attnlib.probes, attnlib.plots, attnlib.widgets, ipywidgets
get_ipython().display_formatter.formatters["image/png"].enabled = False  # as in the grader's kernel
def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
"""


def cells_cpu(notebooks: list[Path], repeat: int = 3) -> dict[Path, float]:
    """CPU seconds each graded notebook's own cells take in a warm kernel (median of ``repeat`` runs).

    The notebooks are the graded copies (hidden tests and the grader's lines
    in), run cell by cell in one plain kernel that imported numpy, attnlib,
    matplotlib and ipywidgets beforehand and starts each run from an empty
    namespace: what remains of a graded notebook's cost, beyond this, is the
    grader's overhead.
    """
    from jupyter_client.manager import start_new_kernel

    probes = Path(tempfile.mkdtemp(prefix="pm-bench-probes-"))
    km, kc = start_new_kernel(kernel_name="python3", env=dict(os.environ, PM_PROBES=str(probes), MPLBACKEND="Agg",
                                                                OPENBLAS_NUM_THREADS="1"))

    def run(code: str) -> str:
        out = []
        kc.execute_interactive(code, timeout=120, output_hook=lambda m: out.append(m["content"].get("text", ""))
                               if m["msg_type"] == "stream" else None)
        return "".join(out)
    try:
        found = {}
        for path in notebooks:
            nb = nbformat.read(path, as_version=4)
            times = []
            for _ in range(repeat):
                run("%reset -f")  # an empty namespace; the modules stay imported
                run(REFERENCE_KERNEL + f"\nos.chdir({str(path.parent)!r})")
                before = float(run("print(_cpu())"))
                for cell in nb.cells:
                    if cell.cell_type == "code":
                        run(cell.source)
                times.append(float(run("print(_cpu())")) - before)
            found[path] = statistics.median(times)
        return found
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(probes, ignore_errors=True)


def nbgrader_cli(class_dir: Path, assignments):
    """The contender nbgrader's own CLI is: the class in its layout (course/submitted), one
    ``nbgrader autograde`` per assignment, with this repository's configuration."""
    nbgrader = str(Path(sys.executable).parent / "nbgrader")

    def cli(course):
        for student in class_dir.iterdir():
            shutil.copytree(student, course / "submitted" / student.name)
        return run_measured([[nbgrader, "autograde", a, "--force", "--create"] for a in assignments],
                            dict(os.environ, PM_COURSE_DIR=str(course), PM_GRADE_WARM="0"))
    return cli


def race(contenders: dict, template: Path, tmp: Path, rounds: int) -> dict:
    """Each contender grades a fresh copy of ``template`` in its own timed block, taking turns
    (the order rotates from round to round): ``{key: [(seconds, peak bytes, ok), ...]}``."""
    runs: dict = {key: [] for key in contenders}
    for r in range(rounds):
        keys = list(contenders)
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            course = tmp / f"round{r}-{key}"
            shutil.copytree(template, course)
            runs[key].append(contenders[key](course))
            shutil.rmtree(course, ignore_errors=True)
    return runs


def rows_grading(students: int = 8, rounds: int | None = None) -> list[tuple]:
    """The class graded by each contender in turn, ``rounds`` times (PM_BENCH_ROUNDS, default 3).

    The order of the contenders rotates from round to round; each figure is the
    median over the rounds, so that one noisy moment on a shared machine does
    not decide a ratio.
    """
    cores = os.cpu_count() or 1
    rounds = rounds or int(os.environ.get("PM_BENCH_ROUNDS", "3"))
    tmp = Path(tempfile.mkdtemp(prefix="pm-bench-grading-"))
    try:
        template = tmp / "template"
        env = dict(os.environ, PM_COURSE_DIR=str(template))
        subprocess.run([sys.executable, "-m", "pm_course", "assignments"], cwd=ROOT, env=env, check=True,
                       capture_output=True)
        n = make_class(tmp / "class", template, students)

        cli = nbgrader_cli(tmp / "class", ASSIGNMENTS)

        def make_grade(jobs):
            return lambda course: run_measured([[sys.executable, "-m", "pm_course", "grade", str(tmp / "class")]],
                                               dict(os.environ, PM_COURSE_DIR=str(course), PM_GRADE_JOBS=str(jobs)))

        runs = race({"cli": cli, 1: make_grade(1), cores: make_grade(cores)}, template, tmp, rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rate = {key: statistics.median(n / r[0] * 60 for r in rs) for key, rs in runs.items()}
    peak = {key: max(r[1] for r in rs) for key, rs in runs.items()}
    ok = {key: all(r[2] for r in rs) for key, rs in runs.items()}

    def detail(key):
        each = ", ".join(f"{n / r[0] * 60:.0f}" for r in runs[key])
        return f"median {rate[key]:.1f}/min (rounds: {each}), peak {peak[key] / 2**20:.0f} MiB, ok={ok[key]}"

    case = f"{students}x{len(ASSIGNMENTS)} notebooks, {rounds} rounds"
    cap = 2 * 2**30  # PM_GRADE_MEMORY's default
    return [
        (case, "nbgrader CLI notebooks/min", 1.0, "reference", detail("cli")),
        (case, "make grade JOBS=1 / CLI", rate[1] / rate["cli"], "notebooks/min ratio", detail(1)),
        (case, f"make grade JOBS={cores} / CLI", rate[cores] / rate["cli"], "target >= 2", detail(cores)),
        (case, f"JOBS={cores} / JOBS=1", rate[cores] / rate[1], "target >= 1.6", ""),
        (case, f"peak memory JOBS={cores}", peak[cores] / (cores * cap + OVERHEAD),
         f"target < 1 ({cores} x 2 GiB cap + 1 GiB)", f"{peak[cores] / 2**20:.0f} MiB"),
    ]


def canvas_zips(folder: Path, class_dir: Path) -> dict[str, Path]:
    """The class as Canvas hands it out: one flat zip per assignment, files named
    ``<lastfirst>_<user id>_<submission id>_<notebook>``."""
    import zipfile

    zips = {}
    folder.mkdir(parents=True, exist_ok=True)
    for a in sorted({p.name for student in class_dir.iterdir() for p in student.iterdir()}):
        zips[a] = folder / f"{a}.zip"
        with zipfile.ZipFile(zips[a], "w") as z:
            for i, student in enumerate(sorted(class_dir.iterdir())):
                for nb in (student / a).glob("*.ipynb"):
                    last_first = "student" + "".join(chr(97 + int(d)) for d in f"{i:03d}")   # letters only
                    z.write(nb, f"{last_first}_{1000 + i}_{9000 + i}_{nb.name}")
    return zips


def rows_term(students: int | None = None, rounds: int | None = None) -> list[tuple]:
    """A whole term: ``students`` (PM_BENCH_TERM_STUDENTS, default 60) x every assignment, from
    Canvas zips through ``pm-course collect`` and ``grade`` at JOBS=1 and JOBS=cores, beside
    nbgrader's CLI on the same notebooks (its own layout, one autograde per assignment), and with
    PM_BENCH_TERM_COLD=1 ``grade`` at JOBS=cores with cold kernels (PM_GRADE_WARM=0).

    Beside the ratios, each contender's overhead: the CPU seconds of everything
    it ran (collect included), less the graded notebooks' own cells' CPU
    (:func:`cells_cpu`), per notebook.
    """
    students = students or int(os.environ.get("PM_BENCH_TERM_STUDENTS", "60"))
    rounds = rounds or int(os.environ.get("PM_BENCH_TERM_ROUNDS", "1"))
    cold = os.environ.get("PM_BENCH_TERM_COLD", "") not in ("", "0")  # also JOBS=cores with cold kernels
    cores = os.cpu_count() or 1
    assignments = sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir())
    tmp = Path(tempfile.mkdtemp(prefix="pm-bench-term-"))
    course_cmd = [sys.executable, "-m", "pm_course"]
    try:
        template = tmp / "template"
        subprocess.run([*course_cmd, "assignments"], cwd=ROOT, env=dict(os.environ, PM_COURSE_DIR=str(template)),
                       check=True, capture_output=True)
        n = make_class(tmp / "class", template, students, assignments)
        zips = canvas_zips(tmp / "canvas", tmp / "class")

        cli = nbgrader_cli(tmp / "class", assignments)

        kept: dict[str, tuple[Path, int]] = {}  # one graded copy of each distinct submission, and how many

        def term(jobs, warm="1"):
            def run(course):
                seconds, peak, ok, cpu = run_measured(
                    [[*course_cmd, "collect", "--from", "canvas", str(zips[a]), "--assignment", a]
                     for a in assignments] + [[*course_cmd, "grade", "--jobs", str(jobs)]],
                    dict(os.environ, PM_COURSE_DIR=str(course), PM_GRADE_WARM=warm))
                with open(course / "grades.csv") as f:   # every notebook collected and graded
                    graded = sum(row["status"] == "graded" for row in csv.DictReader(f))
                if not kept:
                    keep_graded(course, tmp / "graded", kept)
                return seconds, peak, ok and graded == n, cpu
            return run

        contenders = {"cli": cli, 1: term(1), cores: term(cores)}
        if cold:
            contenders["cold"] = term(cores, warm="0")
        runs = race(contenders, template, tmp, rounds)
        cells = cells_cpu([path for path, _ in kept.values()])
        own = sum(cells[path] * count for path, count in kept.values())  # the cells' own CPU, all notebooks
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rate = {key: statistics.median(n / r[0] * 60 for r in rs) for key, rs in runs.items()}
    wall = {key: statistics.median(r[0] for r in rs) for key, rs in runs.items()}
    ok = {key: all(r[2] for r in rs) for key, rs in runs.items()}
    case = f"term: {students}x{len(assignments)} notebooks via Canvas, {rounds} round(s)"

    def detail(key):
        each = "" if rounds == 1 else " (rounds: " + ", ".join(f"{n / r[0] * 60:.0f}" for r in runs[key]) + ")"
        return f"{rate[key]:.1f} notebooks/min{each}, the term in {wall[key] / 60:.1f} min, ok={ok[key]}"

    cpu = {key: statistics.median(r[3] for r in rs) for key, rs in runs.items()}

    def overhead(key):
        return (cpu[key] - own) / n

    def cost(key):
        return (f"{cpu[key] / n:.2f} core-s a notebook in all, of which its cells {own / n:.2f}"
                f" ({len(kept)} distinct notebooks timed in a warm kernel)")

    return [
        (case, "nbgrader CLI notebooks/min", 1.0, "reference (grading only)", detail("cli")),
        (case, "collect+grade JOBS=1 / CLI", rate[1] / rate["cli"], "notebooks/min ratio", detail(1)),
        (case, f"collect+grade JOBS={cores} / CLI", rate[cores] / rate["cli"],
         f"target >= {4 if students >= 60 else 3} ({cores} cores)", detail(cores)),
        (case, "overhead core-s/nb CLI", overhead("cli"), "beyond the cells' own CPU", cost("cli")),
        (case, "overhead core-s/nb JOBS=1", overhead(1), "target <= 0.4 (collect included)", cost(1)),
        (case, f"overhead core-s/nb JOBS={cores}", overhead(cores), "target <= 0.4 (collect included)", cost(cores)),
    ] + ([
        (case, f"JOBS={cores} cold kernels / CLI", rate["cold"] / rate["cli"], "PM_GRADE_WARM=0", detail("cold")),
        (case, f"overhead core-s/nb JOBS={cores} cold", overhead("cold"), "PM_GRADE_WARM=0", cost("cold")),
        (case, f"JOBS={cores} warm / cold kernels", rate[cores] / rate["cold"], "notebooks/min ratio, side by side",
         f"core-s a notebook: warm {cpu[cores] / n:.2f}, cold {cpu['cold'] / n:.2f}"),
    ] if cold else [])


def keep_graded(course: Path, folder: Path, kept: dict) -> None:
    """One graded copy of each distinct submission (same bytes handed in), with their count, into ``kept``."""
    import hashlib

    for submitted in sorted((course / "submitted").glob("*/*/*.ipynb")):
        student, assignment = submitted.parts[-3], submitted.parts[-2]
        graded = course / "autograded" / student / assignment / submitted.name
        key = hashlib.sha256(submitted.read_bytes()).hexdigest()
        if key in kept:
            kept[key] = (kept[key][0], kept[key][1] + 1)
        elif graded.is_file():
            dest = folder / student / assignment / submitted.name
            dest.parent.mkdir(parents=True)
            shutil.copy(graded, dest)
            kept[key] = (dest, 1)
