"""Machine faults are never a student's outcome: injected one at a time, each leaves the row as it was.

A class of three was graded once (ada 3/3, bob 0/3, cy 3/3). Then bob and cy
hand in again (bob's now right), and while they are graded the machine fails
on bob's notebook only:

- bubblewrap fails on its k-th call (a wrapper that counts its calls in a file);
- the kernel fails to start inside a working sandbox (Python finds no standard library);
- the disk fills up (a small tmpfs, filled while bob's kernel starts, freed at the next one);
- the grader's own code raises (a ``sitecustomize`` that breaks, for bob, the hidden-test judge or
  one of the grader's steps inside nbgrader).

Each time bob's row stays as it was (0/3 and its reason, nothing blanked),
his feedback page is the one he had, cy is graded, ``grade`` exits non-zero
naming bob's notebook and the fault, later commands do not bring the fault's
partial grades in, and the next ``grade`` (the fault gone) grades bob: 3/3.
"""
import csv
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, answered
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

A = "03_subspace"
BOB = f"bob/{A}"


def run(env, *args, timeout=600):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def hand_in(folder, work):
    for student, data in work.items():
        dest = folder / student / A / "subspace.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return folder


def rows(course):
    with open(course / "grades.csv", encoding="utf-8") as f:
        return {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == A}


def page(course, student="bob"):
    path = course / "feedback" / student / A / "subspace.html"
    return path.read_bytes() if path.is_file() else None


@pytest.fixture(scope="module")
def graded_once(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    env = {k: v for k, v in os.environ.items() if k not in ("PM_GRADE_UNSAFE", "CI")}
    env.update(PM_COURSE_DIR=str(tmp / "course"), PM_GRADE_MEMORY="1G")
    subs = hand_in(tmp / "week1", {"ada": answered(A), "bob": answered(A, unanswered=True), "cy": answered(A)})
    assert run(env, "collect", "--from", "folder", subs).returncode == 0
    proc = run(env, "grade", "--jobs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = rows(tmp / "course")
    assert {s: r["score"] for s, r in got.items()} == {"ada": "3", "bob": "0", "cy": "3"}, got
    return tmp, env


def second_hand_in(graded_once, course, tmp_path):
    """A copy of the graded course, where bob (now right) and cy hand in again: (env, rows, bob's page)."""
    tmp, env = graded_once
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course)}
    again = hand_in(tmp_path / "week2", {"bob": answered(A), "cy": answered(A, edit={"compare": "print('cy again')"})})
    collected = run(env, "collect", "--from", "folder", again)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    return env, rows(course), page(course)


def counting_bwrap(folder, on_call: int, action: str):
    """A bwrap that runs ``action`` (shell) on its ``on_call``-th call and is the real bwrap otherwise.

    Call 1 is grade's check that the sandbox works; call 2 starts bob's kernel, call 3 cy's.
    """
    real = shutil.which("bwrap")
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bwrap"
    script.write_text(f"""#!/bin/sh
n=$(cat "{folder}/calls" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "{folder}/calls"
if [ "$n" = {on_call} ]; then
{action}
fi
exec {real} "$@"
""")
    script.chmod(0o755)
    return folder


def check_fault(env, course, before, page_before, proc, fault_words):
    """bob's row, page and gradebook as they were; cy graded; grade failed naming bob and the fault."""
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "not graded because of the machine, not the student" in proc.stderr, out
    named = [line for line in proc.stderr.splitlines() if line.strip().startswith(f"{BOB}:")]
    assert named and fault_words in named[0], out
    assert "cy/" not in proc.stderr.split("not graded because of the machine")[1], out
    assert f"{BOB}: could not be graded" not in out, out
    after = rows(course)
    assert after["bob"] == before["bob"], (before["bob"], after["bob"])  # nothing blanked, nothing new
    assert after["cy"]["status"] == "graded" and after["cy"]["score"] == "3", after["cy"]
    assert page(course) == page_before  # no page written for bob, the old one kept
    # the gradebook holds nothing of the faulted run: a later command brings no partial grade in
    status = run(env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert rows(course)["bob"] == before["bob"]
    # and the row is known to be of bob's earlier notebook: listed, and refused by export, until graded again
    assert "out of date: bob: collected again since it was graded" in status.stdout, status.stdout


def check_retried(env, course):
    again = run(env, "grade", "--jobs", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Graded 1 notebooks" in again.stdout, again.stdout  # bob, remembered as not graded; cy kept
    assert rows(course)["bob"]["score"] == "3" and rows(course)["bob"]["status"] == "graded"
    assert b"3" in page(course)


def test_bwrap_failing_on_its_kth_call(graded_once, tmp_path):
    course = tmp_path / "course"
    env, before, page_before = second_hand_in(graded_once, course, tmp_path)
    said = "bwrap: Creating new namespace failed: Resource temporarily unavailable"
    fake = counting_bwrap(tmp_path / "bin", 2, f"echo '{said}' >&2; exit 1")
    proc = run({**env, "PATH": f"{fake}{os.pathsep}{env['PATH']}"}, "grade", "--jobs", "1")
    check_fault(env, course, before, page_before, proc, said)
    check_retried(env, course)


def test_a_kernel_that_fails_to_start(graded_once, tmp_path):
    course = tmp_path / "course"
    env, before, page_before = second_hand_in(graded_once, course, tmp_path)
    env = {**env, "PM_GRADE_WARM": "0"}  # the kernel is a new Python, started by bwrap
    # the sandbox starts, the kernel's Python does not: it finds no standard library
    fake = counting_bwrap(tmp_path / "bin", 2, f'exec {shutil.which("bwrap")} --setenv PYTHONHOME /nowhere "$@"')
    proc = run({**env, "PATH": f"{fake}{os.pathsep}{env['PATH']}"}, "grade", "--jobs", "1")
    check_fault(env, course, before, page_before, proc, "the kernel did not start")
    check_retried(env, course)


@pytest.fixture
def small_disk(tmp_path):
    """A 32 MB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk(graded_once, tmp_path, small_disk):
    course = small_disk / "course"
    env, before, page_before = second_hand_in(graded_once, course, tmp_path)
    filler = small_disk / "filler"
    # the disk fills up as bob's kernel starts (the grader has written his graded copy), and is freed
    # as cy's starts
    fake = counting_bwrap(tmp_path / "bin", 2, f"dd if=/dev/zero of={filler} bs=64k 2>/dev/null; true")
    script = fake / "bwrap"
    script.write_text(script.read_text().replace("exec ", f'[ "$n" = 3 ] && rm -f {filler}\nexec ', 1))
    proc = run({**env, "PATH": f"{fake}{os.pathsep}{env['PATH']}"}, "grade", "--jobs", "1")
    check_fault(env, course, before, page_before, proc, "machine error")
    assert "No space left on device" in proc.stderr or "disk is full" in proc.stderr, proc.stderr
    assert not filler.exists()
    check_retried(env, course)


@pytest.mark.parametrize("where", ["judge", "preprocessor"])
def test_the_graders_own_exception(graded_once, tmp_path, where):
    """Raised by the grader's judge of the hidden tests (after nbgrader graded bob's right answer and wrote 3
    points to the gradebook), or by one of its steps inside nbgrader's autograde (which nbgrader reports as
    a failed notebook, as it would a damaged one)."""
    course = tmp_path / "course"
    env, before, page_before = second_hand_in(graded_once, course, tmp_path)
    hook = ROOT / "tests" / "helpers" / "grader_fault"
    broken = {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(hook), env.get("PYTHONPATH")) if p),
              "PM_TEST_GRADER_FAULT": "bob", "PM_TEST_GRADER_FAULT_IN": where}
    proc = run(broken, "grade", "--jobs", "1")
    check_fault(env, course, before, page_before, proc, "RuntimeError: injected: the grader's own bug")
    check_retried(env, course)
