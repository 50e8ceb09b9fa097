"""Cell limits that measure the student's code, not the machine: CPU seconds, and a fresh kernel after a stop.

A cell's time limit counts the CPU seconds of the kernel's whole sandbox (every
process and thread in it), read from the sandbox's cgroup (cgroups v1's
``cpuacct.usage``, v2's ``cpu.stat``), or, where the grader cannot make
cgroups, summed over the kernel's process tree from ``/proc``. A correct but
slow function therefore gets the same verdict on a quiet machine and on one
where other work takes half the cores: its CPU seconds are the same. The
wall clock only backs this up, at :func:`cell_limits`'s several times the CPU
limit, for code that blocks without computing (``time.sleep``, a socket).

A cell that reaches either limit, or whose kernel dies (a crash, a memory
cap), is stopped by killing its kernel: student code that swallows the
interrupt (a bare ``except`` around a loop or around ``input()``) cannot keep
running into the next cell. Before the next code cell runs, a new kernel (in
a new sandbox) replays the notebook's earlier cells that finished, the setup
and the student's solution cells alike but no test cell, silently; of a
stopped cell only the definitions it began with (``import``, ``def``,
``class``), which certainly ran before it was stopped. A replayed cell finished
once within the limit, so its second run may take :data:`REPLAY_FACTOR` times
the limits: the noise of a second run does not drop it from the state. Each later test cell is
thus judged from a known state, whatever the load, and the same notebook gets
the same score on every regrade. On the normal path (no cell stopped) nothing
is replayed; the watch costs a read of one file every 0.1 s.

=========================  ===============================================  ======
``PM_GRADE_CELL_CPU``      CPU seconds a cell may use                        ``10``
=========================  ===============================================  ======

The wall-clock backstop is :data:`WALL_FACTOR` times that.
"""
from __future__ import annotations

import ast
import asyncio
import os
import time
from pathlib import Path

from jupyter_core.utils import ensure_async, run_sync
from nbclient.client import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Integer, default

from pm_course.state.course import is_test

DEFAULT_CELL_CPU = 10
WALL_FACTOR = 6  # the wall-clock backstop, in CPU limits: generous, for a loaded machine
REPLAY_FACTOR = 3  # a replayed cell finished once within the limit: its second run may take this many limits
POLL = 0.1  # seconds between two looks at the kernel's CPU time


def cell_limits() -> tuple[int, int]:
    """(CPU seconds, wall-clock seconds) a cell may run: ``$PM_GRADE_CELL_CPU`` and :data:`WALL_FACTOR` times it."""
    raw = os.environ.get("PM_GRADE_CELL_CPU", "").strip() or str(DEFAULT_CELL_CPU)
    try:
        cpu = int(raw)
    except ValueError:
        raise SystemExit(f"PM_GRADE_CELL_CPU={raw!r} must be a whole number of CPU seconds per cell") from None
    if cpu < 1:
        raise SystemExit(f"PM_GRADE_CELL_CPU={cpu}: a cell needs at least 1 CPU second")
    return cpu, WALL_FACTOR * cpu


def describe() -> str:
    """One line saying how long a cell may run (an error when ``$PM_GRADE_CELL_CPU`` is not a number)."""
    cpu, wall = cell_limits()
    return (f"Each cell may use {cpu} s of CPU time (PM_GRADE_CELL_CPU), whatever the machine's load, or wait"
            f" {wall} s without computing; a new kernel replays the earlier cells after a cell is stopped.")


# --- the kernel's CPU time ----------------------------------------------------------------------

def _cgroup_seconds(group: Path) -> float | None:
    """CPU seconds used by the processes of ``group`` (cgroups v1 cpuacct or v2), None if it cannot be read."""
    try:
        if (group / "cpuacct.usage").exists():
            return int((group / "cpuacct.usage").read_text()) / 1e9
        for line in (group / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        return None
    return None


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_seconds(roots: list[int]) -> float:
    """CPU seconds of the processes ``roots`` and all their descendants (their own, and their reaped children's)."""
    parent, used = {}, {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])  # after the name: state, ppid, ...; utime is field 14 of stat(5)
        used[pid] = sum(int(x) for x in fields[11:15]) / _TICK  # utime, stime, cutime, cstime
    wanted, todo = set(), [p for p in roots if p in used]
    while todo:
        pid = todo.pop()
        if pid not in wanted:
            wanted.add(pid)
            todo += [child for child, up in parent.items() if up == pid]
    return sum(used[p] for p in wanted)


def _kernel_process(roots: list[int], known: int | None) -> int | None:
    """The kernel's own process (ipykernel) among ``roots`` and their descendants: ``known`` if given."""
    if known:
        return known
    todo, seen = list(roots), set()
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"python" in Path(argv[0].decode()).name.encode() and any(b"ipykernel" in a for a in argv):
                return pid  # the Python that runs ipykernel (not bubblewrap, whose arguments name it too)
            todo += [int(c) for task in os.scandir(f"/proc/{pid}/task")
                     for c in Path(f"{task.path}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return None


def _active_seconds(pid: int) -> float | None:
    """Seconds the kernel's main thread (where a cell runs) has run or waited for a core to run on; None if unknown.

    What the wall clock adds to this is time it was blocked: sleeping, waiting for
    input, a lock or a pipe. A busy machine makes a computing cell wait for a core,
    which counts here: only blocked time counts against the wall-clock backstop.
    """
    try:
        ran, waited = Path(f"/proc/{pid}/schedstat").read_text().split()[:2]
        return (int(ran) + int(waited)) / 1e9
    except (OSError, ValueError):
        return None


class KernelCpu:
    """The CPU seconds a kernel's sandbox has used so far (its CPU cgroup, else its process tree), and how long
    its main thread has been computing or ready to (:func:`_active_seconds`)."""

    def __init__(self, km):
        self.groups = [g for g in getattr(km, "_cgroups", []) or [] if _cgroup_seconds(Path(g)) is not None]
        provisioner = getattr(km, "provisioner", None)
        self.roots = [p for p in (getattr(provisioner, "pid", None), getattr(km, "_kernel_pid", None)) if p]
        self.kernel = _kernel_process(self.roots, getattr(km, "_kernel_pid", None))
        self.last = 0.0

    def active(self) -> float | None:
        return _active_seconds(self.kernel) if self.kernel else None

    @property
    def source(self) -> str:
        return "cgroup" if self.groups else "process tree"

    def seconds(self) -> float:
        """CPU seconds so far (the last reading once the sandbox is gone)."""
        if self.groups:
            got = _cgroup_seconds(Path(self.groups[0]))
        else:
            got = _tree_seconds(self.roots) if self.roots else None
        if got is not None:
            self.last = max(self.last, got)
        return self.last


# --- what to replay -----------------------------------------------------------------------------

DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def leading_definitions(source: str) -> str:
    """The imports and definitions a cell begins with: what certainly ran before it was stopped ("" if none)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return ""
    lines = source.splitlines(keepends=True)
    end = 0
    for node in body:
        if not isinstance(node, DEFINITIONS):
            break
        end = node.end_lineno
    return "".join(lines[:end])


class CpuLimitedExecute(Execute):
    """nbgrader's Execute with per-cell CPU limits, a wall-clock backstop, and a fresh kernel after a stop."""

    cpu_limit = Integer(help="CPU seconds a cell may use").tag(config=True)
    wall_limit = Integer(help="wall-clock seconds a cell may take (a backstop"
                         " for code that blocks without computing)").tag(config=True)

    @default("cpu_limit")
    def _cpu_limit_default(self):
        return cell_limits()[0]

    @default("wall_limit")
    def _wall_limit_default(self):
        return cell_limits()[1]

    def preprocess(self, nb, resources=None, km=None):
        self._replay: dict[int, str] = {}  # cell index -> the code a new kernel runs again
        self._stale = False  # a cell was stopped or its kernel died: a new kernel before the next cell
        self._alive_polls: set = set()
        self.restarts = 0
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        """nbclient's own timeout: none for a cell (this class's limits stop it; nbclient's would interrupt the
        kernel and move on while it still ran), the wall-clock backstop for the kernel's first answer."""
        return None if cell is not None else self.wall_limit

    async def _async_poll_kernel_alive(self) -> None:
        self._alive_polls.add(asyncio.current_task())  # so that a killed kernel's poll is stopped with it
        try:
            await super()._async_poll_kernel_alive()
        finally:
            self._alive_polls.discard(asyncio.current_task())

    def preprocess_cell(self, cell, resources, index):
        self._check_assign_resources(resources)
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, self.resources
        if self._stale:
            run_sync(self._fresh_state)()
        run_sync(self._execute_limited)(cell, index)
        return cell, self.resources

    # --- one cell, watched --------------------------------------------------------------------

    async def _execute_limited(self, cell, index: int) -> None:
        source = cell.source
        work = asyncio.ensure_future(NotebookClient.async_execute_cell(self, cell, index, store_history=True))
        stopped = await self._watch(work, lambda: self.task_poll_for_reply.cancel())
        if stopped is None:
            if not is_test(cell):
                self._replay[index] = source
            return
        self._stale = True
        if not is_test(cell) and (head := leading_definitions(source)):
            self._replay[index] = head
        cell.outputs.append(self._stop_output(stopped, index))

    def _stop_output(self, stopped: str, index: int):
        if stopped == "died":
            ename, evalue = "DeadKernelError", ("the kernel died while running this cell (a memory or process cap,"
                                                " or a crash)")
        elif stopped == "cpu":
            ename, evalue = "CellTimeoutError", f"the cell used more than {self.cpu_limit} s of CPU time"
        else:
            ename, evalue = "CellTimeoutError", (f"the cell waited {self.wall_limit} s without computing (sleep,"
                                                 " input(), a lock?)")
        # the log line names no exception: grade.py reads exception names in a failed notebook's log as its cause
        self.log.warning("cell stopped: %s (code cell at index %d)", evalue, index)
        return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])

    async def _watch(self, work: asyncio.Future, cancel, factor: int = 1) -> str | None:
        """Wait for ``work`` (a cell, or a replayed one), stopping the kernel at ``factor`` times the limits; how it
        stopped (None: it finished; "cpu", "wall", or "died")."""
        meter = KernelCpu(self.km)
        start, began, active, stopped = meter.seconds(), time.monotonic(), meter.active(), None
        while stopped is None:
            done, _ = await asyncio.wait({work}, timeout=POLL)
            if done:
                try:
                    work.result()
                except DeadKernelError:  # nbclient saw the kernel die
                    stopped = "died"
                    break
                return None
            if meter.seconds() - start > factor * self.cpu_limit:
                stopped = "cpu"
            elif self._blocked(began, active, meter) > factor * self.wall_limit:
                stopped = "wall"
            elif not await ensure_async(self.km.is_alive()):
                stopped = "died"
        await self._kill()
        if not work.done():
            cancel()
            await asyncio.wait({work}, timeout=2)
            if not work.done():  # it was waiting on something else than the reply it was told to drop
                work.cancel()
            try:
                await work
            except (DeadKernelError, asyncio.CancelledError):
                pass
        return stopped

    @staticmethod
    def _blocked(began: float, active: float | None, meter: KernelCpu) -> float:
        """Seconds the cell has been blocked, neither computing nor waiting for a core (all its wall time when the
        kernel's scheduling statistics cannot be read)."""
        wall = time.monotonic() - began
        now = meter.active() if active is not None else None
        return wall if now is None else wall - (now - active)

    async def _kill(self) -> None:
        """The kernel and its sandbox gone at once (a kernel that ignores interrupts cannot hold on)."""
        for task in list(self._alive_polls):
            task.cancel()
        try:
            if await ensure_async(self.km.is_alive()):
                await ensure_async(self.km.shutdown_kernel(now=True))
            else:  # it died: what it probed is kept all the same (the sandbox's manager keeps it on cleaning up)
                await self.km._async_cleanup_resources()
        except RuntimeError:  # "No kernel is running!"
            pass

    # --- a new kernel in the state of the cells that finished ---------------------------------

    async def _fresh_state(self) -> None:
        """A new kernel, where the earlier cells that finished have run again (a replay that is stopped in turn
        is left out, and the kernel made again)."""
        while True:
            await self._async_cleanup_kernel()
            self.km = self.create_kernel_manager()
            await self.async_start_new_kernel()
            await self.async_start_new_kernel_client()
            self.restarts += 1
            self.log.info("a new kernel, replaying %d earlier cell(s)", len(self._replay))
            for index, source in sorted(self._replay.items()):
                if (stopped := await self._run_quietly(source)) is not None:
                    self.log.warning("a replayed cell (%d) was stopped (%s) and is left out", index, stopped)
                    del self._replay[index]
                    break
            else:
                break
        self._stale = False

    async def _run_quietly(self, source: str) -> str | None:
        """Run ``source`` in the kernel, its output and execution count left out; how it stopped (None: it finished)."""
        msg_id = await ensure_async(self.kc.execute(source, store_history=False, allow_stdin=False,
                                                    stop_on_error=False))

        async def reply():
            while True:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=None))
                if msg["parent_header"].get("msg_id") == msg_id:
                    return msg

        work = asyncio.ensure_future(reply())
        # the cell finished once within the limit: the noise of a second run must not drop it from the state
        stopped = await self._watch(work, work.cancel, factor=REPLAY_FACTOR)
        if stopped is None:  # what it printed is not for this notebook: read and dropped
            await self._drain(msg_id)
        return stopped

    async def _drain(self, msg_id: str, wait: float = 5.0) -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=max(0.01, deadline - time.monotonic())))
            except Exception:  # noqa: BLE001 -- queue.Empty: nothing more came
                return
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" \
                    and msg["content"].get("execution_state") == "idle":
                return
