"""Cell limits measure the student's code, not the machine (pm_course/sandbox/cell_limits.py).

A cell may use PM_GRADE_CELL_CPU seconds of CPU time; the wall clock only
backs that up (six times as long), and a cell that is stopped, or whose kernel
dies, costs no later cell: a new kernel replays the cells that finished.
"""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from limits_class import (CRASH, NAME, NOTEBOOK, RECURSION, SWALLOWS_INPUT,  # noqa: E402
                          SWALLOWS_SLEEP, busy, notebook, pm_course, scores, slow, write)

from pm_course.sandbox import cell_limits as limits  # noqa: E402

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

FULL = "graded,\"lost points: why-distribution not reviewed yet, why-copy not reviewed yet\",8,12"


def test_a_stopped_cell_keeps_only_the_definitions_it_began_with():
    source = "import numpy as np\n\n\ndef f(x):\n    return x\n\n\nwhile True:\n    pass\n\n\ndef g():\n    pass\n"
    assert limits.leading_definitions(source) == "import numpy as np\n\n\ndef f(x):\n    return x\n"
    assert limits.leading_definitions("while True:\n    pass\n") == ""
    assert limits.leading_definitions("def broken(:\n") == ""


def test_the_cpu_time_of_a_process_tree_counts_its_children():
    """Where no cgroup can be made, the kernel's CPU seconds are its process tree's."""
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c',"
                               " 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass\\n"
                               "time.sleep(30)'])"])
    try:
        deadline = time.monotonic() + 60
        while limits._tree_seconds([parent.pid]) < 0.9 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert limits._tree_seconds([parent.pid]) >= 0.9  # the child's second, counted while it runs
    finally:
        parent.kill()
        parent.wait()


def test_cell_limits_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("PM_GRADE_CELL_CPU", "4")
    assert limits.cell_limits() == (4, 4 * limits.WALL_FACTOR)
    monkeypatch.setenv("PM_GRADE_CELL_CPU", "four")
    with pytest.raises(SystemExit, match="PM_GRADE_CELL_CPU='four'"):
        limits.cell_limits()


def test_a_slow_but_right_function_keeps_its_points_beside_busy_processes(tmp_path):
    """3 CPU seconds of a 5 s limit: on 2 cores shared with 3 busy processes that takes well over 5 s of wall
    time, which a wall-clock limit stopped (0 of 2 points for test-copy)."""
    subs = write(tmp_path / "class", {"slowpoke": slow(3.0)})
    with busy(3):
        proc = pm_course("grade", subs, course=tmp_path / "course",
                         env={"PM_GRADE_CELL_CPU": "5", "PM_GRADE_JOBS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert scores(tmp_path / "course") == f"slowpoke,{FULL}\r\n", proc.stdout[-3000:]


def test_a_cell_the_interrupt_cannot_stop_costs_no_later_cell_and_regrades_agree(tmp_path):
    """A loop around input() and a recursion that swallow the interrupt, a crash, and a loop around sleep()
    that only the wall clock stops: each stopped, and the test cells after them keep their points."""
    subs = write(tmp_path / "class", {
        "inputs": notebook(before={"test-copy": SWALLOWS_INPUT}),
        "recurses": notebook(before={"test-beta": RECURSION}),
        "crashes": notebook(before={"test-attend": CRASH}),
        "sleeps": notebook(before={"test-margin": SWALLOWS_SLEEP}),
    })
    course, env = tmp_path / "course", {"PM_GRADE_CELL_CPU": "2", "PM_GRADE_JOBS": "2"}
    first = pm_course("grade", subs, course=course, env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    graded = scores(course)
    assert graded == "".join(f"{s},{FULL}\r\n" for s in ("crashes", "inputs", "recurses", "sleeps")), graded
    log = (course / "nbgrader.log").read_text()
    # each added cell stopped, for its reason; no test cell stopped (the book's widget cell, which may use more
    # than these 2 s, is no test); a replayed cell (which finished once) is never left out
    stops = stopped_cells(course, log)
    for student, (gid, why) in {"inputs": ("test-copy", "2 s of CPU time"), "recurses": ("test-beta", "2 s of CPU"),
                                "crashes": ("test-attend", "the kernel died"),
                                "sleeps": ("test-margin", "waited 12 s without computing")}.items():
        assert any(cell == f"the cell before {gid}" and why in reason for cell, reason in stops[student]), stops
        assert not any(cell.startswith("test-") for cell, _ in stops[student]), stops
    assert "a replayed cell" not in log, log[-3000:]
    again = pm_course("grade", "--all", course=course, env=env)
    assert again.returncode == 0 and "Regraded: no score changed." in again.stdout, again.stdout[-3000:]
    assert scores(course) == graded
    # the student is told which cell was stopped, and why
    page = (course / "feedback" / "inputs" / NAME / "copying.html").read_text()
    assert "the cell used more than 2 s of CPU time" in page


def stopped_cells(course: Path, log: str) -> dict[str, list[tuple[str, str]]]:
    """{student: [(the stopped cell's grade id, or "the cell before <grade id>" for a cell a student added, the
    reason)]}, from the grader's log lines ("cell stopped: <reason> (code cell at index <i>)")."""
    stops: dict[str, list[tuple[str, str]]] = {}
    student = None
    for line in log.splitlines():
        if m := re.search(r"Autograding .*/autograded/([^/]+)/", line):
            student = m[1]
            stops.setdefault(student, [])
        elif m := re.search(r"cell stopped: (.*) \(code cell at index (\d+)\)", line):
            cells = json.loads((course / "autograded" / student / NAME / NOTEBOOK).read_text())["cells"]
            index = int(m[2])
            gid = cells[index]["metadata"].get("nbgrader", {}).get("grade_id")
            if gid is None:
                following = next(c["metadata"]["nbgrader"]["grade_id"] for c in cells[index + 1:]
                                 if "grade_id" in c["metadata"].get("nbgrader", {}))
                gid = f"the cell before {following}"
            stops[student].append((gid, m[1]))
    return stops


@pytest.mark.skipif(not os.path.isdir("/sys/fs/cgroup/cpuacct") or os.geteuid() != 0,
                    reason="needs a cpuacct cgroup the grader may make (root, cgroups v1)")
def test_the_sandbox_counts_cpu_in_its_own_cgroup(tmp_path):
    from pm_course import sandbox

    made = sandbox.make_cpu_cgroup(f"test-{os.getpid()}")
    try:
        assert made and limits._cgroup_seconds(made[0]) == 0
    finally:
        sandbox.remove_cgroup(made)
