"""tests/helpers/pm.py runs ``python -m pm_course`` in a fork of a warm Python: the same as a new one.

The course tests take the helper's word for what a command printed, exited with
and wrote; here each of those is compared with a new ``python -m pm_course``.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pm

PM = [sys.executable, "-m", "pm_course"]


def both(args, **kwargs):
    """The helper's result and a new Python's, for the same command."""
    forked = pm.run([*PM, *args], capture_output=True, text=True, timeout=120, **kwargs)
    fresh = subprocess.run([*PM, *args], capture_output=True, text=True, timeout=120, **kwargs)
    return forked, fresh


@pytest.mark.parametrize("args", [["--help"], ["no-such-command"], ["status"], ["--config", "here.toml", "init"]],
                         ids=["help", "usage-error", "no-course", "init-here"])
def test_a_command_prints_and_exits_as_in_a_new_python(args, tmp_path):
    """The same exit status, output and files: the environment names the course folder, and a relative
    ``--config`` is read from the folder the command runs in."""
    got = {}
    for name, runner in (("forked", pm.run), ("fresh", subprocess.run)):
        folder = tmp_path / name
        folder.mkdir()
        env = dict(os.environ, PM_COURSE_DIR=str(folder / "course"))
        proc = runner([*PM, *args], capture_output=True, text=True, timeout=120, env=env, cwd=folder)
        files = {f.name: f.read_bytes() for f in folder.iterdir()}
        got[name] = (proc.returncode, proc.stdout.replace(name, "FOLDER"), proc.stderr.replace(name, "FOLDER"), files)
    assert got["forked"] == got["fresh"]
    if "init" in args:
        assert "here.toml" in got["forked"][3], got
    if args == ["status"]:  # the course folder comes from the environment given, not the server's
        assert "FOLDER/course" in got["forked"][2], got


def test_the_server_stays_warm():
    """Two commands, each forked from one server: started once, and not the test's own process."""
    first = pm.run([*PM, "--help"], capture_output=True, text=True)
    assert first.returncode == 0
    server, count = pm._server["proc"].pid, pm.forked
    again = pm.run([*PM, "--help"], capture_output=True, text=True)
    assert again.returncode == 0 and pm._server["proc"].pid == server and pm.forked == count + 1
    assert server != os.getpid()


def test_a_timeout_stops_the_command_and_the_next_one_runs(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):  # no command ends within 1 ms
        pm.run([*PM, "status"], capture_output=True, text=True, timeout=0.001,
               env=dict(os.environ, PM_COURSE_DIR=str(tmp_path)))
    after = pm.run([*PM, "--help"], capture_output=True, text=True, timeout=120)
    assert after.returncode == 0 and "usage: pm-course" in after.stdout


def test_what_changes_how_python_starts_gets_a_new_python(tmp_path):
    """A ``sitecustomize`` on PYTHONPATH runs only when a Python starts: the helper starts one."""
    (tmp_path / "sitecustomize.py").write_text("import sys; print('a new Python', file=sys.stderr)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    count = pm.forked
    forked, fresh = both(["--help"], env=env)
    assert "a new Python" in fresh.stderr and forked.stderr == fresh.stderr and pm.forked == count
