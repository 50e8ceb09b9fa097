"""Learners' copies of the exercises (make exercises): blank, complete, and never over their work."""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from leaks import problems, secret_lines

ROOT = Path(__file__).resolve().parents[2]
from pm_course import student  # noqa: E402

SOURCES = student.sources()

pytestmark = pytest.mark.slow  # writes the learners' copies with make exercises: not in make check


def test_every_assignment_has_a_source():
    assert len(SOURCES) >= 5 and all(secret_lines(s) for s in SOURCES), SOURCES


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    dest = tmp_path_factory.mktemp("learner") / "my-exercises"
    proc = subprocess.run([sys.executable, "-m", "pm_course.student", str(dest)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


@pytest.mark.parametrize("source", SOURCES, ids=[s.parent.name for s in SOURCES])
def test_the_command_writes_a_blank_student_version(written, source):
    copy = written / source.parent.name / source.name
    assert copy.exists(), f"no {copy}"
    assert not problems(copy, source), f"{copy}: {problems(copy, source)}"


def test_a_second_run_keeps_what_the_learner_has(written):
    mine = written / SOURCES[0].parent.name / SOURCES[0].name
    nb = nbformat.read(mine, as_version=4)
    nb.cells[0].source += "\n\nmy notes"
    nbformat.write(nb, mine)
    before = mine.read_bytes()
    gone = written / SOURCES[1].parent.name / SOURCES[1].name
    gone.unlink()  # deleted by the learner: they get a fresh copy
    proc = subprocess.run([sys.executable, "-m", "pm_course.student", str(written)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert mine.read_bytes() == before, "the learner's notebook was overwritten"
    assert f"kept: {mine}" in proc.stdout, proc.stdout
    assert gone.exists() and f"new:  {gone}" in proc.stdout, proc.stdout
    assert not list(written.rglob("*.partial"))


def test_make_exercises_installs_no_grading_sandbox():
    """A learner's command: make exercises sets up the environment, never bubblewrap (make install does)."""
    plan = subprocess.run(["make", "-n", "exercises", "EXERCISES_DIR=/nonexistent/my-exercises"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert "pm_course.student" in plan.stdout
    assert "bubblewrap" not in plan.stdout and "bwrap" not in plan.stdout, plan.stdout
    install = subprocess.run(["make", "-n", "install"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "bubblewrap" in install.stdout, "make install no longer names the sandbox: this test checks nothing"
