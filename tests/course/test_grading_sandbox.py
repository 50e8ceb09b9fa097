"""A hostile class, graded for real: every attack is tried and must fail.

Each student hands in exercise 3 fully solved, plus one cell of their own that
attacks the grader: reading the hidden tests and the gradebook, writing outside
their folder, opening a network connection, eating memory, forking. The
sandbox must stop each attack without costing the student their points, and
nothing outside the student's own folder may change.
"""
import csv
import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

import pm
from pm_course import sandbox

ROOT = Path(__file__).resolve().parents[2]
NAME, POINTS = "03_subspace", 3
TOKEN = uuid.uuid4().hex[:12]  # marks every file and process the attacks try to leave behind

pytestmark = [pytest.mark.grading,
              pytest.mark.skipif(not sandbox.works() and os.environ.get("CI") != "true",
                                 reason="bubblewrap is not installed or cannot make namespaces here (make sandbox)")]


def attacks(course: Path, port: int) -> dict[str, str]:
    home = Path.home()
    return {
        "ada_full": "",
        "snoop": f"""
import glob, os
found = []
for pattern in ("{ROOT}/**/*.ipynb", "{course}/**/*", "{home}/**/*.ipynb", "/tmp/**/*.ipynb", "{ROOT}/.git/**/*"):
    found += glob.glob(pattern, recursive=True)
marker = "BEGIN HIDDEN" + " TESTS"  # spelt apart, so that this cell does not match itself
secrets = [p for p in found if os.path.isfile(p) and marker in open(p, errors="replace").read()]
gradebooks = [p for p in found if p.endswith(".db")]
print("found", len(found), "files; hidden tests in", len(secrets), "; gradebooks", len(gradebooks))
""",
        "scribbler": f"""
import os
for target in ("{home}/pm-{TOKEN}", "{course}/pm-{TOKEN}", "{ROOT}/pm-{TOKEN}", "/tmp/pm-{TOKEN}",
               "{course}/gradebook.db", "{ROOT}/exercises/{NAME}/subspace.ipynb"):
    try:
        with open(target, "a") as f:
            f.write("{TOKEN}")
        print("wrote", target)
    except OSError as err:
        print("could not write", target, type(err).__name__)
""",
        "caller": f"""
import socket
for host in ("127.0.0.1", "pypi.org"):
    try:
        socket.create_connection((host, {port} if host == "127.0.0.1" else 443), timeout=3).send(b"{TOKEN}")
        print("connected to", host)
    except OSError as err:
        print("no connection to", host, type(err).__name__)
""",
        "hog": """
import numpy as np
hoard = []
try:
    while True:
        hoard.append(np.ones(2**24))  # 128 MiB at a time
except MemoryError:
    print("stopped at", len(hoard) * 128, "MiB")
del hoard
""",
        "cheat_allclose": """
import math, numpy as np, attnlib.checks
np.allclose = np.isclose = math.isclose = lambda *args, **kwargs: True    # every comparison passes
np.array_equal = lambda *args, **kwargs: True
attnlib.checks.check_array = lambda x, *args, **kwargs: np.asarray(x, dtype=float)
""",
        "cheat_object": """
import numpy as np


class Agreeable(np.ndarray):  # equal to anything, close to anything
    def __eq__(self, other):
        return np.ones(np.broadcast(self, other).shape, dtype=bool).view(Agreeable)

    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in ("allclose", "isclose", "array_equal"):
            return True
        return super().__array_function__(func, types, args, kwargs)
""",
        "forker": f"""
import os
children = 0
try:
    for _ in range(500):
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "{7000 + int(TOKEN[:3], 16) % 999}.{TOKEN[:4].translate(str.maketrans('abcdef', '123456'))}"])
        children += 1
except OSError as err:
    print("forks stopped after", children, type(err).__name__)
""",
    }


# The cheaters' projector is wrong (U U^T, right only for orthonormal columns);
# the object cheat wraps it in a class that compares equal to anything.
WRONG = {"cheat_allclose": "return U @ U.T", "cheat_object": "return (U @ U.T).view(Agreeable)"}


def tree_digest(path: Path, skip=()) -> str:
    """A hash of every file's path and content under ``path``."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if rel.parts and rel.parts[0] in skip or not p.is_file():
            continue
        h.update(str(rel).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    subs = tmp_path_factory.mktemp("submissions")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    calls, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                calls.append(listener.accept())
            except OSError:
                pass
    threading.Thread(target=accept, daemon=True).start()

    source = next((ROOT / "exercises" / NAME).glob("*.ipynb"))
    for student, code in attacks(course, listener.getsockname()[1]).items():
        nb = nbformat.read(source, as_version=4)
        for cell in nb.cells:  # what students hand in has no hidden tests (the grader puts them back)
            cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
        if code:
            setup = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
            nb.cells.insert(setup + 1, new_code_cell(code))
        if student in WRONG:
            proj = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
            proj.source = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", WRONG[student], proj.source, flags=re.S)
        dest = subs / student / NAME / source.name
        dest.parent.mkdir(parents=True)
        nbformat.write(nb, dest)

    env = dict(os.environ, PM_COURSE_DIR=str(course), PM_GRADE_MEMORY="1G", PM_GRADE_PROCS="64")
    pm.run([sys.executable, "-m", "pm_course", "assignments"], env=env, check=True,
           capture_output=True)
    repo_before = tree_digest(ROOT, skip={".venv", "_build", "course", ".git"})
    subs_before = tree_digest(subs)
    release_before = tree_digest(course / "release")
    start = time.monotonic()
    proc = pm.run([sys.executable, "-m", "pm_course", "grade", str(subs)],
                  env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    stop.set()
    listener.close()
    return dict(course=course, subs=subs, proc=proc, elapsed=elapsed, calls=calls,
                repo=(repo_before, tree_digest(ROOT, skip={".venv", "_build", "course", ".git"})),
                subs_digest=(subs_before, tree_digest(subs)),
                release=(release_before, tree_digest(course / "release")))


def output_of(graded, student):
    nb = nbformat.read(graded["course"] / "autograded" / student / NAME / "subspace.ipynb", as_version=4)
    return "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_every_attacker_keeps_the_points_for_the_work(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stdout + graded["proc"].stderr
    assert "runs in a sandbox" in graded["proc"].stdout
    with open(graded["course"] / "grades.csv") as f:
        scores = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f) if r["assignment"] == NAME}
    want = {student: 0 if student in WRONG else POINTS for student in attacks(graded["course"], 0)}
    assert scores == want, graded["proc"].stdout


def test_cheats_that_fool_the_kernel_do_not_fool_the_grader(graded):
    """Every check passed in the patched kernel; the grader's own comparison took the points."""
    log = (graded["course"] / "nbgrader.log").read_text()
    assert f"hidden tests, judged by the grader: cheat_allclose/{NAME} test-proj" in log
    assert "proj-6x2: wrong value" in log


def test_the_snoop_finds_no_hidden_test_and_no_gradebook(graded):
    out = output_of(graded, "snoop")
    assert "hidden tests in 0 ; gradebooks 0" in out, out


def test_nothing_outside_the_students_folder_changes(graded):
    out = output_of(graded, "scribbler")
    assert "could not write" in out or "wrote" in out, out  # the attack ran
    assert graded["repo"][0] == graded["repo"][1], "the repository changed"
    assert graded["subs_digest"][0] == graded["subs_digest"][1], "the submissions changed"
    assert graded["release"][0] == graded["release"][1], "the student versions changed"
    leftovers = [p for p in (Path.home() / f"pm-{TOKEN}", graded["course"] / f"pm-{TOKEN}", ROOT / f"pm-{TOKEN}",
                             Path("/tmp") / f"pm-{TOKEN}") if p.exists()]
    assert not leftovers, leftovers
    assert TOKEN.encode() not in (graded["course"] / "gradebook.db").read_bytes()


def test_no_connection_leaves_the_sandbox(graded):
    out = output_of(graded, "caller")
    assert "no connection to 127.0.0.1" in out and "no connection to pypi.org" in out, out
    assert graded["calls"] == []


def test_memory_and_processes_are_capped_and_nothing_outlives_the_kernel(graded):
    assert "stopped at" in output_of(graded, "hog")
    forks = output_of(graded, "forker")
    assert "forks stopped after" in forks, forks
    if sandbox.cgroups_available():
        assert int(forks.split("forks stopped after")[1].split()[0]) < 64
    left = subprocess.run(["pgrep", "-f", f"sleep {7000 + int(TOKEN[:3], 16) % 999}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"processes outlived the sandbox: {left.stdout}"


def test_feedback_carries_no_hidden_test(graded):
    source = nbformat.read(next((ROOT / "exercises" / NAME).glob("*.ipynb")), as_version=4)
    secret = [line.strip() for c in source.cells if "### BEGIN HIDDEN TESTS" in c.source
              for line in c.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0].splitlines()
              if len(line.strip()) > 8]
    assert secret
    pages = list((graded["course"] / "feedback").rglob("*.html"))
    assert len(pages) == len(attacks(graded["course"], 0))
    for page in pages:
        text = page.read_text()
        assert "HIDDEN TESTS" not in text and not [s for s in secret if s in text], page


def test_the_run_ends_within_its_bound(graded):
    # per notebook: kernel start and grading (about 5 s here), plus at most one cell
    # timeout (10 s) for an attack that hangs; generous for a shared machine
    assert graded["elapsed"] < len(attacks(graded["course"], 0)) * (15 + 10), graded["elapsed"]


def run_in_sandbox(folder: Path, code: str) -> tuple[str, list[dict]]:
    """Run ``code`` in a sandboxed kernel: (everything printed, the data of every rich output)."""
    import asyncio

    async def run():
        km = sandbox.SandboxKernelManager(kernel_name="python3")
        await km.start_kernel(cwd=str(folder))
        kc = km.client()
        kc.start_channels()
        printed, shown = [], []

        def hook(msg):
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            elif msg["msg_type"] in ("display_data", "execute_result"):
                shown.append(msg["content"]["data"])

        try:
            await kc.wait_for_ready(timeout=60)
            await kc.execute_interactive(code, timeout=120, output_hook=hook)
            return "".join(printed), shown
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    return asyncio.run(run())


def test_a_printing_loop_neither_fills_the_kernels_memory_nor_the_output(tmp_path):
    """300 MB printed in one cell: at most a megabyte comes out, and the kernel stays small."""
    code = ("import resource, sys\nfor _ in range(3000):\n    print('x' * 10**5)\n"
            "sys.stdout.written = 0\nprint('peak MiB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)")
    out, _ = run_in_sandbox(tmp_path, code)
    peak = int(out.split("peak MiB")[1].split()[0])
    assert len(out) < 1_100_000, f"{len(out):,} characters of output came out of one cell"
    assert peak < 200, f"the kernel reached {peak} MiB printing 300 MB"


def test_matplotlib_in_the_sandbox_does_not_search_the_fonts_again(tmp_path):
    """The kernel's home is the student's folder: matplotlib finds the grader's font list there."""
    out, _ = run_in_sandbox(tmp_path, "import matplotlib.pyplot as plt\nimport matplotlib\n"
                                      "print('cache', matplotlib.get_cachedir())")
    assert "building the font cache" not in out, out
    assert "cache " in out and str(tmp_path) not in out, out


def test_the_grader_keeps_no_images_and_draws_no_print_forms(tmp_path):
    """An interactive figure shows its HTML player in the feedback; its print form is never drawn."""
    code = """
import numpy as np
from IPython.display import display
from attnlib import widgets
s = widgets.beta_explorer(np.eye(3), np.eye(3)[0]).scrubber()
display(s)
print("print form drawn:", not callable(s._png))
"""
    out, shown = run_in_sandbox(tmp_path, code)
    assert "print form drawn: False" in out, out
    assert shown and all("text/html" in d and "image/png" not in d for d in shown), [list(d) for d in shown]


def test_student_code_sees_attnlib_but_not_the_course_package(tmp_path):
    """attnlib is mounted back into the sandbox; pm_course (the grader, the gradebook's paths) is not."""
    code = ("import importlib.util, attnlib\nprint('attnlib', attnlib.softmax([0.0])[0])\n"
            "try:\n    import pm_course\n    print('pm_course found at', pm_course.__file__)\n"
            "except ImportError:\n    print('pm_course hidden')\n"
            "print('spec', importlib.util.find_spec('pm_course.sandbox') is not None if importlib.util.find_spec("
            "'pm_course') else None)")
    out, _ = run_in_sandbox(tmp_path, code)
    assert "attnlib 1.0" in out and "pm_course hidden" in out and "spec None" in out, out
