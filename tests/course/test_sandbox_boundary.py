"""The sandbox is an allow-list: nothing of the host or of the instructor's shell reaches student code.

Decoys are placed where an instructor keeps things outside this clone (another
clone, a course folder with its gradebook, an LMS download, a source notebook
with hidden tests) in several host folders, and LMS tokens are put in the
grader's environment. A student's cell walks ``/``, reads what it finds, goes
straight for each decoy by its path, and prints its environment (its own and,
where it can, that of every process it sees), its user and its folder. The
cell runs in a kernel started the two ways the grader starts them (forked
from the warm template, and as a new Python), and once graded for real through
``pm-course grade``, whose feedback page is what the student gets back.
"""
import csv
import os
import re
import shutil
import sys
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

import pm
from pm_course import sandbox
from test_grading_sandbox import run_in_sandbox

ROOT = Path(__file__).resolve().parents[2]
TOKEN = uuid.uuid4().hex[:12]
SECRETS = {"CANVAS_API_TOKEN": f"canvas-secret-{TOKEN}", "MOODLE_TOKEN": f"moodle-secret-{TOKEN}",
           "INSTRUCTOR_NOTE": f"anything-else-{TOKEN}"}
NAME, POINTS = "03_subspace", 3
# what the grader sets for each kernel (sandbox.kernel_settings, PATH), bubblewrap's PWD, and what IPython
# and ipykernel set in their own environment as they start (pagers and colours, the debugger's mode)
KERNEL_OWN = {"PATH", "HOME", "IPYTHONDIR", "OPENBLAS_NUM_THREADS", "PM_PROBES", "MPLBACKEND", "MPLCONFIGDIR",
              "TERM", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "PAGER", "GIT_PAGER",
              "PWD", "PYDEVD_USE_FRAME_EVAL"}

pytestmark = [pytest.mark.grading,
              pytest.mark.skipif(not sandbox.works() and os.environ.get("CI") != "true",
                                 reason="bubblewrap is not installed or cannot make namespaces here (make sandbox)")]


def decoy_folders() -> list[Path]:
    """Host folders outside this clone where decoys go (those this user can write to)."""
    places = [Path("/srv"), Path("/opt"), Path("/mnt"), Path("/media"), Path("/var/tmp"), Path("/home"),
              Path.home(), ROOT.parent, Path("/tmp")]
    out = []
    for place in places:
        folder = place / f"pm-decoy-{TOKEN}"
        if folder not in out and place.is_dir() and os.access(place, os.W_OK):
            out.append(folder)
    return out


@pytest.fixture(scope="module")
def decoys():
    """A gradebook, an LMS download and a source notebook with hidden tests in each decoy folder."""
    mark = f"pm-decoy-{TOKEN}"
    files = []
    for folder in decoy_folders():
        for rel, text in (("course/grades.csv", f"student_id,score\nada,{mark}\n"),
                          ("downloads/week2.zip", f"PK {mark}"),
                          ("other-clone/exercises/03_subspace/subspace.ipynb",
                           f'{{"cells": ["### BEGIN HIDDEN TESTS\\nassert \'{mark}\'\\n### END HIDDEN TESTS"]}}')):
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            files.append(path)
    assert len(files) >= 6, "decoys could not be placed in at least two host folders"
    yield files
    for folder in decoy_folders():
        shutil.rmtree(folder, ignore_errors=True)


def snoop(files: list[Path]) -> str:
    """A student's cell that looks everywhere it can for the decoys and the instructor's environment."""
    return f"""
import json, os, sys
token = {TOKEN!r}
mark = ("pm-" + "decoy-" + token).encode()   # spelt apart: this notebook does not hold it
secrets = [s[::-1].encode() for s in {sorted(v[::-1] for v in SECRETS.values())!r}]  # (spelt backwards too)
seen, named, read = 0, [], []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    for name in dirs + files:
        seen += 1
        if token in name:
            named.append(os.path.join(top, name))
    if top.startswith(("/usr", sys.prefix, sys.base_prefix)):
        continue  # the system's and Python's files: looked at by name only
    for name in files:
        if not os.path.isfile(os.path.join(top, name)) or os.path.islink(os.path.join(top, name)):
            continue  # regular files only (a FIFO would wait for ever)
        try:
            with open(os.path.join(top, name), "rb") as f:
                if mark in f.read(1 << 20):
                    read.append(os.path.join(top, name))
        except OSError:
            pass
for path in {[str(p).replace(f"pm-decoy-{TOKEN}", "@") for p in files]!r}:  # straight for each decoy
    path = path.replace("@", mark.decode())
    try:
        open(path, "rb").read()
        read.append(path)
    except OSError:
        pass
environments = [json.dumps(dict(os.environ)).encode()]
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        environments.append(open(f"/proc/{{pid}}/environ", "rb").read())
    except OSError:
        pass
print("looked at", seen, "names; decoys named", len(named), "; decoys read", len(read), named[:3], read[:3])
print("secrets in an environment:", sum(s in e for s in secrets for e in environments))
print("uid", os.getuid(), os.geteuid(), "gid", os.getgid(), "groups", os.getgroups())
print("working folder", os.getcwd(), "home", os.path.expanduser("~"))
print("environment names", sorted(os.environ))
"""


def assert_contained(out: str) -> None:
    assert "looked at" in out, out  # the attack ran
    seen = int(out.split("looked at")[1].split()[0])
    assert seen > 1000, out  # it walked a real tree (the system's files), not an empty one
    assert "decoys named 0 ; decoys read 0 [] []" in out, out
    assert "secrets in an environment: 0" in out, out
    uid = int(out.split("uid ")[1].split()[0])
    assert uid != 0 and f"uid {uid} {uid} " in out, out
    if os.getuid() == 0:
        assert f"uid {sandbox.SANDBOX_UID} " in out and "groups []" in out, out
    assert f"working folder {sandbox.SANDBOX_HOME} home {sandbox.SANDBOX_HOME}" in out, out
    names = eval(out.split("environment names")[1].strip().splitlines()[0])
    stray = [n for n in names if n not in sandbox.ENV_NAMES and not n.startswith(sandbox.ENV_PREFIXES)
             and n not in KERNEL_OWN]
    assert not stray, stray
    for secret in SECRETS.values():
        assert secret not in out, out


@pytest.mark.parametrize("warm", ["1", "0"], ids=["forked from the warm template", "a new Python"])
def test_a_kernel_sees_no_decoy_no_secret_and_is_not_root(tmp_path, monkeypatch, decoys, warm):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PM_GRADE_WARM", warm)
    if warm == "1":  # this process's template, started now with the secrets in its environment
        sandbox.close_template()
    monkeypatch.setenv("PM_GRADE_CELL_CPU", "120")
    out, _ = run_in_sandbox(tmp_path, snoop(decoys))
    assert_contained(out)
    sandbox.close_template()  # (a later test's template starts without the secrets)


def test_a_graded_page_shows_no_secret_and_no_host_path(tmp_path, decoys):
    """Graded for real: full points for the work, and the page the student gets back holds nothing of the host."""
    course, subs = tmp_path / "course", tmp_path / f"submissions-{TOKEN}"
    source = next((ROOT / "exercises" / NAME).glob("*.ipynb"))
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:  # what students hand in has no hidden tests (the grader puts them back)
        cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
    setup = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    nb.cells.insert(setup + 1, new_code_cell(snoop(decoys)))
    dest = subs / "snoop" / NAME / source.name
    dest.parent.mkdir(parents=True)
    nbformat.write(nb, dest)
    env = dict(os.environ, PM_COURSE_DIR=str(course), PM_GRADE_CELL_CPU="120", **SECRETS)
    pm.run([sys.executable, "-m", "pm_course", "assignments"], env=env, check=True, capture_output=True)
    proc = pm.run([sys.executable, "-m", "pm_course", "grade", str(subs)], env=env, capture_output=True, text=True,
                  timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(course / "grades.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["student_id"] == "snoop" and r["assignment"] == NAME]
    assert [float(r["score"]) for r in rows] == [POINTS], proc.stdout
    graded = nbformat.read(course / "autograded" / "snoop" / NAME / source.name, as_version=4)
    out = "\n".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert_contained(out)
    page = next((course / "feedback").rglob("*.html")).read_text()
    assert "decoys read 0" in page
    for text in [*SECRETS.values(), str(course), str(subs), str(tmp_path), f"submissions-{TOKEN}"]:
        assert text not in page, text
