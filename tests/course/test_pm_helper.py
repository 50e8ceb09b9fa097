"""tests/helpers/pm.py runs ``python -m pm_course`` in the test's own process: the same as a new Python.

The course tests take the helper's word for what a command printed, exited with
and wrote; here each of those is compared with a new ``python -m pm_course``,
and the test process is checked to be left as the command found it.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import warnings

import pytest

import pm

PM = [sys.executable, "-m", "pm_course"]


def both(args, **kwargs):
    """The helper's result and a new Python's, for the same command."""
    here = pm.run([*PM, *args], capture_output=True, text=True, timeout=120, **kwargs)
    fresh = subprocess.run([*PM, *args], capture_output=True, text=True, timeout=120, **kwargs)
    return here, fresh


@pytest.mark.parametrize("args", [["--help"], ["no-such-command"], ["status"], ["--config", "here.toml", "init"],
                                  ["--config", "missing.toml", "status"]],
                         ids=["help", "usage-error", "no-course", "init-here", "no-such-config"])
def test_a_command_prints_and_exits_as_in_a_new_python(args, tmp_path):
    """The same exit status, output and files: the environment names the course folder, and a relative
    ``--config`` is read from the folder the command runs in."""
    got = {}
    for name, runner in (("inproc", pm.run), ("fresh", subprocess.run)):
        folder = tmp_path / name
        folder.mkdir()
        env = dict(os.environ, PM_COURSE_DIR=str(folder / "course"))
        proc = runner([*PM, *args], capture_output=True, text=True, timeout=120, env=env, cwd=folder)
        files = {f.name: f.read_bytes() for f in folder.iterdir()}
        got[name] = (proc.returncode, proc.stdout.replace(name, "FOLDER"), proc.stderr.replace(name, "FOLDER"), files)
    assert got["inproc"] == got["fresh"]
    if "init" in args:
        assert "here.toml" in got["inproc"][3], got
    if args == ["status"]:  # the course folder comes from the environment given, not this process's
        assert "FOLDER/course" in got["inproc"][2], got
    if "missing.toml" in args:
        assert got["inproc"][0] != 0 and "missing.toml: no such file" in got["inproc"][2], got


def test_commands_run_in_this_process_one_course_after_another(tmp_path):
    """Two commands on two course folders, in this process: each sees its own (nothing of the first is kept)."""
    count = pm.here
    for name in ("first", "second"):
        env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / name))
        proc = pm.run([*PM, "status"], capture_output=True, text=True, env=env)
        assert proc.returncode != 0 and f"{tmp_path / name}" in proc.stderr, proc.stderr
        assert not (tmp_path / name).exists()  # status makes no course folder
    assert pm.here == count + 2


def _state() -> dict:
    """What of this process a command could leave changed."""
    return {"environ": dict(os.environ), "cwd": os.getcwd(), "streams": (sys.stdin, sys.stdout, sys.stderr),
            "fds": sorted(os.listdir("/proc/self/fd")),
            "signals": {s: signal.getsignal(s) for s in signal.valid_signals()},
            "loggers": {name: (log.handlers[:], log.level) for name, log in logging.Logger.manager.loggerDict.items()
                        if isinstance(log, logging.Logger)},
            "root": logging.getLogger().handlers[:], "warnings": warnings.filters[:]}


@pytest.mark.slow  # releases two assignments (each source notebook run): seconds
def test_a_command_leaves_this_process_as_it_found_it(tmp_path, two_assignments):
    """Environment, folder, streams, open files, signal handlers, loggers and warning filters are as before, after
    a command that writes the course folder (nbgrader's API, the lock) and after one that fails."""
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(two_assignments),
               TZ="Pacific/Auckland", PM_GRADE_JOBS="1")
    pm.run([*PM, "--help"], capture_output=True, text=True)  # what importing pm_course makes once
    before = _state()
    released = pm.run([*PM, "assignments"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert released.returncode == 0, released.stdout + released.stderr
    failed = pm.run([*PM, "export", "--to", "csv"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert failed.returncode != 0 and "no grades yet" in failed.stderr, failed.stderr
    after = _state()
    old, now = before.pop("loggers"), after.pop("loggers")
    assert {k: v for k, v in now.items() if k in old} == old  # a logger made since is an import's, made once
    assert after == before, {k: (before[k], after[k]) for k in before if before[k] != after[k]}


def test_a_timeout_stops_the_command_and_the_next_one_runs(tmp_path, two_assignments):
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(two_assignments))
    alarm = signal.getsignal(signal.SIGALRM)
    with pytest.raises(subprocess.TimeoutExpired):  # releasing runs each source notebook: far longer than 10 ms
        pm.run([*PM, "assignments"], capture_output=True, text=True, timeout=0.01, env=env)
    assert signal.getsignal(signal.SIGALRM) == alarm and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    after = pm.run([*PM, "status"], capture_output=True, text=True, timeout=120, env=env)
    assert "nothing collected yet" in after.stderr and "in use by" not in after.stderr  # the lock was let go


def test_what_changes_how_python_starts_gets_a_new_python(tmp_path):
    """A ``sitecustomize`` on PYTHONPATH runs only when a Python starts: the helper starts one."""
    (tmp_path / "sitecustomize.py").write_text("import sys; print('a new Python', file=sys.stderr)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    count = pm.here
    here, fresh = both(["--help"], env=env)
    assert "a new Python" in fresh.stderr and here.stderr == fresh.stderr and pm.here == count
