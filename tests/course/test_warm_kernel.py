"""Kernels forked from the warm template (pm_course/sandbox/warm.py): each one as fresh as a new Python.

One student's kernel plants what it can (globals, module attributes, an
environment variable, files in /tmp and in its folder); the next kernel,
forked from the same template, finds none of it. Each kernel also runs with
no capability, ``no_new_privs``, its limits, and no way to write to the
template's pipes.
"""
from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

import needs
from pm_course import sandbox

if not sandbox.works():
    needs.skip("bubblewrap cannot make its namespaces here (make sandbox)")

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

PLANT = """
import os, sys, types, attnlib, numpy
SECRET = "ada's answer"
attnlib._planted = numpy._planted = "ada"
sys.modules["planted"] = types.ModuleType("planted")
os.environ["PLANTED"] = "ada"
numpy.random.seed(1234)
open("/tmp/planted", "w").write("ada")
open("planted.txt", "w").write("ada")
print(json.dumps({"first": numpy.random.random(), "folder": os.listdir("."), "tmp": os.listdir("/tmp")}))
"""

LOOK = """
import json, os, resource, sys
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = [os.readlink(f"/proc/self/fd/{fd}"), os.stat(f"/proc/self/fd/{fd}").st_ino]
    except OSError:
        pass
import attnlib, numpy
print(json.dumps({
    "warm": "matplotlib.pyplot" in sys.modules,  # imported before any cell: forked from the template
    "secret": "SECRET" in globals(),
    "attnlib": hasattr(attnlib, "_planted"), "numpy": hasattr(numpy, "_planted"),
    "module": "planted" in sys.modules, "env": "PLANTED" in os.environ,
    "tmp": os.path.exists("/tmp/planted"), "folder": os.listdir("."),
    "random": numpy.random.random(),
    "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "as": resource.getrlimit(resource.RLIMIT_AS)[0], "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
    "fds": fds,
}))
"""


async def _run(work: Path, *codes: str) -> list[dict]:
    """Start one sandboxed kernel in ``work``, run each code (it prints one JSON line), shut it down."""
    km = sandbox.SandboxKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(work))
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        out = []
        for code in codes:
            texts, errors = [], []

            def hook(msg):
                if msg["msg_type"] == "stream":
                    texts.append(msg["content"]["text"])
                elif msg["msg_type"] == "error":
                    errors.append(msg["content"]["evalue"])
            await kc.execute_interactive("import json\n" + code, timeout=60, output_hook=hook)
            assert not errors, errors
            out.append(json.loads("".join(texts)))
        return out
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


@pytest.fixture
def workdirs(tmp_path, monkeypatch):
    monkeypatch.setenv("PM_COURSE_DIR", str(tmp_path / "course"))
    monkeypatch.delenv("PM_GRADE_WARM", raising=False)
    (tmp_path / "course").mkdir()
    dirs = [tmp_path / "ada", tmp_path / "bob"]
    for d in dirs:
        d.mkdir()
    return dirs


def test_a_kernel_sees_nothing_of_the_kernel_before_it(workdirs):
    ada, bob = workdirs

    async def both():
        first = await _run(ada, LOOK, PLANT)
        second = await _run(bob, LOOK)
        return first, second
    (clean, planted), (seen,) = asyncio.run(both())
    assert clean["warm"] and seen["warm"], "the kernels were not forked from the warm template"
    assert "planted.txt" in planted["folder"] and "planted" in planted["tmp"]  # the first kernel did plant its files
    for key in ("secret", "attnlib", "numpy", "module", "env", "tmp"):
        assert seen[key] is False, f"{key}: the second kernel sees what the first one planted"
    assert seen["folder"] == []
    # the legacy global generator is seeded afresh in each kernel, as in a new process
    assert seen["random"] not in (planted["first"], clean["random"])


def test_a_warm_kernel_has_no_privilege_its_limits_and_no_way_to_the_template(workdirs):
    (look,) = asyncio.run(_run(workdirs[0], LOOK))
    assert look["warm"]
    assert int(look["cap_eff"], 16) == 0 and int(look["cap_bnd"], 16) == 0
    assert look["no_new_privs"] == "1"
    nbytes, cpu = sandbox.limits()
    assert (look["as"], look["cpu"]) == (nbytes, cpu)
    template = sandbox.Template.get()
    pipes = {os.fstat(template.proc.stdin.fileno()).st_ino, os.fstat(template.proc.stdout.fileno()).st_ino}
    assert not {ino for link, ino in look["fds"].values() if link.startswith("pipe:")} & pipes, look["fds"]


def test_cold_kernels_when_asked(workdirs, monkeypatch):
    monkeypatch.setenv("PM_GRADE_WARM", "0")
    (look,) = asyncio.run(_run(workdirs[0], LOOK))
    assert look["warm"] is False  # a new Python: nothing imported before the first cell
    assert (look["as"], look["cpu"]) == sandbox.limits()  # prlimit's, as before


def test_the_template_forks_kernels_into_sandboxes_only(workdirs, tmp_path):
    """A process ID that is not a sandbox (here the grader's own, as a reused ID would be) is refused."""
    fifo = tmp_path / "alive"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a placeholder's end, so that the template gets that far
    nbytes, cpu = sandbox.limits()
    try:
        with pytest.raises(RuntimeError, match="not in a sandbox"):
            sandbox.Template.get().fork({"sandbox_pid": os.getpid(), "alive": str(fifo), "cwd": str(workdirs[0]),
                                         "env": {}, "argv": ["--help"], "memory": nbytes, "cpu": cpu, "cgroups": []})
    finally:
        os.close(reader)
