"""Grading with and without the sandbox: the same grades, a loud warning, and why the sandbox did not start.

Where bubblewrap is installed but cannot make its namespaces (Ubuntu 24.04's
AppArmor restriction, ``user.max_user_namespaces = 0``, a container), grading
shows bwrap's own error and the fix for each cause it finds in the kernel's
settings. The unconfined mode (``PM_GRADE_UNSAFE=1``) is the last resort: it
must grade exactly as the sandbox does, say on every run that student code ran
unconfined, and refuse unattended batch use unless asked for by name
(``PM_GRADE_UNSAFE=unconfined``).

The failing bwrap is a script that prints what bwrap prints on such a machine
and exits 1, put first on ``PATH``; the kernel's settings are read from a folder
laid out as ``/proc/sys`` (``PM_GRADE_PROC_SYS``).
"""
import csv
import os
import re
import subprocess
import sys

import pytest

from conftest import answered
from pm_course import sandbox
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

A = "03_subspace"
UID_MAP = "bwrap: setting up uid map: Permission denied"


def fake_bwrap(folder, message=UID_MAP):
    """A bwrap that fails as the real one does where it may not make namespaces."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bwrap"
    script.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    script.chmod(0o755)
    return folder


def fake_proc_sys(folder, **settings):
    """A /proc/sys holding ``settings`` ({"kernel.apparmor_restrict_unprivileged_userns": "1"})."""
    for name, value in settings.items():
        path = folder.joinpath(*name.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run(env, *args, timeout=900):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def base_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PM_GRADE_UNSAFE", "CI", "container")}
    return {**env, "PM_COURSE_DIR": str(tmp_path / "course")}


def class_of(folder):
    """One small class of exercise 3: right, blank, wrong, noisy and crashing, a warning, one reading its folder."""
    proj_head = 'def extract_projector(U):\n    U = np.asarray(U, dtype=float)\n'
    work = {
        "ada": answered(A),
        "bob": answered(A, unanswered=True),
        "cy": answered(A, edit={"proj": proj_head + "    return U @ U.T\n"}),  # right only for orthonormal U
        "dee": answered(A, edit={"compare": "for i in range(20000):\n    print('line', i)\n1 / 0\n"}),
        "eve": answered(A, edit={"compare": "import os\nprint(sorted(os.listdir('.')))\nopen('scratch.txt', 'w')"
                                            ".write('x')\nprint(open('scratch.txt').read())\n"}),
        "fay": answered(A, edit={"proj": proj_head + "    np.log(np.zeros(1))  # a RuntimeWarning\n"
                                                     "    return U @ np.linalg.pinv(U)\n"}),
    }
    for student, data in work.items():
        dest = folder / student / A / "subspace.ipynb"
        dest.parent.mkdir(parents=True)
        dest.write_bytes(data)
    return folder


def rows(course):
    with open(course / "grades.csv", encoding="utf-8") as f:
        return {r["student_id"]: (r["status"], r["score"], r["max_score"], r["reason"])
                for r in csv.DictReader(f) if r["assignment"] == A}


@pytest.mark.skipif(not sandbox.works(), reason="bubblewrap cannot make its namespaces here: nothing to compare with")
def test_unconfined_grades_exactly_as_the_sandbox(tmp_path):
    subs = class_of(tmp_path / "submissions")
    got = {}
    for mode in ("sandbox", "unconfined"):
        env = {**base_env(tmp_path / mode), "PM_GRADE_MEMORY": "1G"}
        if mode == "unconfined":  # bwrap installed but failing, as on Ubuntu 24.04: the documented last resort
            env.update(PATH=f"{fake_bwrap(tmp_path / 'bin')}{os.pathsep}{env['PATH']}", PM_GRADE_UNSAFE="1")
        assert run(env, "collect", "--from", "folder", subs).returncode == 0
        proc = run(env, "grade", "--jobs", "1")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        got[mode] = rows(tmp_path / mode / "course")
        banner = "WARNING: UNCONFINED GRADING (PM_GRADE_UNSAFE=1): no sandbox"
        if mode == "unconfined":
            # loud: on stderr, and in the summary (its first line and its last)
            assert banner in proc.stderr and UID_MAP in proc.stderr, proc.stderr
            # and plainly: none of the sandbox's boundary holds (files, tokens' files, the network)
            assert "it can read and change your files (your LMS token's file among them)" in proc.stderr
            assert "reach the network" in proc.stderr, proc.stderr
            lines = proc.stdout.strip().splitlines()
            assert lines[0].startswith(banner) and lines[-1].startswith(banner), proc.stdout
        else:
            assert "UNCONFINED" not in proc.stdout + proc.stderr and "runs in a sandbox" in proc.stdout
    assert got["sandbox"]["ada"][:2] == ("graded", "3"), got["sandbox"]  # a right answer keeps its points
    assert got["sandbox"]["cy"][:2] == ("graded", "0") and got["sandbox"]["bob"][:2] == ("graded", "0")
    assert got["unconfined"] == got["sandbox"]  # scores and reasons, byte for byte


def test_unconfined_is_refused_in_batch_use_unless_asked_for_by_name(tmp_path):
    env = {**base_env(tmp_path), "PATH": f"{fake_bwrap(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
           "CI": "true", "PM_GRADE_UNSAFE": "1"}
    refused = run(env, "grade")  # stdin is not a terminal, CI is set: a flag left in a job's environment
    assert refused.returncode != 0
    assert "Refused: PM_GRADE_UNSAFE=1 in batch use" in refused.stderr, refused.stderr
    assert "PM_GRADE_UNSAFE=unconfined" in refused.stderr and UID_MAP in refused.stderr, refused.stderr
    assert "UNCONFINED GRADING" not in refused.stdout + refused.stderr
    named = run({**env, "PM_GRADE_UNSAFE": "unconfined"}, "grade")  # asked for by name: it runs (nothing collected)
    assert "WARNING: UNCONFINED GRADING (PM_GRADE_UNSAFE=unconfined)" in named.stderr, named.stderr
    assert "nothing collected yet" in named.stderr, named.stderr
    # at a terminal, or without CI, PM_GRADE_UNSAFE=1 is enough
    interactive = run({**env, "CI": ""}, "grade")
    assert "WARNING: UNCONFINED GRADING (PM_GRADE_UNSAFE=1)" in interactive.stderr, interactive.stderr


PROFILE = re.compile(r"profile bwrap /\S*bwrap flags=\(unconfined\) \{\s+userns,")


@pytest.mark.parametrize("case", ["apparmor", "no user namespaces", "debian clone", "container", "unknown"])
def test_a_failing_bwrap_is_shown_and_diagnosed(tmp_path, case):
    settings = {"apparmor": {"kernel.apparmor_restrict_unprivileged_userns": "1", "user.max_user_namespaces": "63000"},
                "no user namespaces": {"user.max_user_namespaces": "0"},
                "debian clone": {"kernel.unprivileged_userns_clone": "0"},
                "container": {"user.max_user_namespaces": "63000"},
                "unknown": {"user.max_user_namespaces": "63000"}}[case]
    env = {**base_env(tmp_path), "PATH": f"{fake_bwrap(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
           "PM_GRADE_PROC_SYS": str(fake_proc_sys(tmp_path / "sys", **settings))}
    if case == "container":
        env["container"] = "docker"
    proc = run(env, "grade")
    err = proc.stderr
    assert proc.returncode != 0 and "Grading refuses to run student code without the sandbox" in err, err
    assert f"bwrap is installed but failed here; it said: {UID_MAP}" in err, err  # its own words
    assert "install the Debian packages" not in err  # it is installed
    assert bool(PROFILE.search(err)) == (case == "apparmor"), err
    if case == "apparmor":
        assert "sudo apparmor_parser -r /etc/apparmor.d/bwrap" in err
        assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in err
    assert ("user.max_user_namespaces = 0" in err) == (case == "no user namespaces"), err
    assert ("kernel.unprivileged_userns_clone = 0" in err) == (case == "debian clone"), err
    if case == "container":
        assert "this runs in a container" in err, err
    if case == "unknown" and not sandbox.in_container():
        assert "none of the usual causes shows here" in err, err
    # the unconfined mode last, saying what it means
    last = err.rindex("Last resort: PM_GRADE_UNSAFE=1")
    assert last > max(err.find("Cause and fix"), 0), err
    assert "student code runs unconfined, as you" in err[last:], err


def test_bwrap_missing_says_install_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a PATH with python's folder and the shell's tools but no bwrap
    tools = ["sh", "prlimit", "env"]
    for tool in tools:
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found:
            os.symlink(found, bin_dir / tool)
    env = {**base_env(tmp_path), "PATH": f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}"}
    proc = run(env, "grade")
    assert proc.returncode != 0
    assert "not installed: bwrap (the Debian packages bubblewrap" in proc.stderr, proc.stderr
    assert "Last resort: PM_GRADE_UNSAFE=1" in proc.stderr, proc.stderr
