"""Kernels for student code: confined with bubblewrap, capped in memory and CPU time.

A student's notebook runs in a kernel that sees the machine read-only, a private
``/tmp``, and one writable folder: the copy of that student's notebook that the
grader is running. It cannot see the repository (the exercise sources with their
hidden tests, the site, ``.git``), the course folder (the gradebook, other
students' work, the feedback), the submissions folder or the instructor's home;
it has no network; it lives in its own process namespace, so nothing it starts
outlives it; and its address space and CPU time are capped with ``prlimit``.

nbgrader starts the kernel through :class:`SandboxKernelManager` (see
``nbgrader_config.py``). The limits come from the environment:

=====================  ================================================  ========
``PM_GRADE_MEMORY``    address space per kernel process (bytes, K/M/G)   ``2G``
``PM_GRADE_CPU``       CPU seconds per kernel process                    ``120``
                       (each cell's own limit: ``PM_GRADE_CELL_CPU``,
                       :mod:`pm_course.limits`)
``PM_GRADE_PROCS``     processes and threads per sandbox (cgroups only)  ``64``
``PM_GRADE_UNSAFE=1``  run kernels unconfined when bubblewrap is missing
                       (``make grade UNSAFE=1`` sets it)
``PM_GRADE_WARM=0``    start each kernel as a new Python (cold), not
                       forked from the warm template
=====================  ================================================  ========

Where the machine lets the grader create cgroups (Linux, as root), each sandbox
also gets a cgroup capping its number of processes (so a fork bomb stops at
``PM_GRADE_PROCS``) and its total memory (twice ``PM_GRADE_MEMORY``, for
processes that fork); elsewhere those two caps are missing, and ``check()`` says so.

A kernel is not a new Python: it is forked from a warm template
(:mod:`pm_course.warm`, one per grading process) that imported ipykernel,
numpy, attnlib and matplotlib once, which saves about 0.6 CPU seconds a
notebook. The sandbox is the same: bubblewrap makes it, with the same command
line, around a placeholder process; the forked child joins its cgroups and
its network, PID and mount namespaces, and the kernel it forks there drops
every capability and takes the limits before ipykernel starts. The template
never runs student code, so each kernel starts from a process that has only
imported modules (tests/course/test_warm_kernel.py).
"""
from __future__ import annotations

import functools
import json
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import traitlets
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MEMORY, DEFAULT_CPU = "2G", "120"


def limits() -> tuple[int, int]:
    """(bytes of address space, CPU seconds) per kernel process, from the environment."""
    memory = os.environ.get("PM_GRADE_MEMORY", DEFAULT_MEMORY).strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(memory[-1:], 1)
    try:
        nbytes = int(float(memory.rstrip("KMG")) * scale)
        cpu = int(os.environ.get("PM_GRADE_CPU", DEFAULT_CPU))
    except ValueError:
        raise SystemExit(f"PM_GRADE_MEMORY={memory!r} and PM_GRADE_CPU must be numbers (e.g. 2G and 120)") from None
    if nbytes < 256 * 2**20 or cpu < 1:
        raise SystemExit(f"the limits are too small to start Python: memory {nbytes} bytes, CPU {cpu} s")
    return nbytes, cpu


def max_procs() -> int:
    try:
        n = int(os.environ.get("PM_GRADE_PROCS", "64"))
    except ValueError:
        raise SystemExit(f"PM_GRADE_PROCS={os.environ['PM_GRADE_PROCS']!r} must be a whole number") from None
    if n < 16:
        raise SystemExit(f"PM_GRADE_PROCS={n} is too small: a kernel alone runs about 10 threads")
    return n


CGROUP_V1 = Path("/sys/fs/cgroup")


def cgroups_available() -> bool:
    return all(os.access(CGROUP_V1 / c, os.W_OK) for c in ("pids", "memory"))


def make_cgroup(name: str) -> list[Path]:
    """A pids and a memory cgroup (v1) for one sandbox; [] where they cannot be made."""
    if not cgroups_available():
        return []
    made = []
    try:
        for controller, limit_file, value in (("pids", "pids.max", max_procs()),
                                              ("memory", "memory.limit_in_bytes", 2 * limits()[0])):
            group = CGROUP_V1 / controller / name
            group.mkdir()
            made.append(group)
            (group / limit_file).write_text(str(value))
    except OSError:
        remove_cgroup(made)
        return []
    return made


def make_cpu_cgroup(name: str) -> list[Path]:
    """A cgroup that counts one sandbox's CPU time (cgroups v1 ``cpuacct``, else v2); [] where none can be made.

    Cell time limits count its CPU seconds (:mod:`pm_course.limits`); without it they
    count those of the kernel's process tree.
    """
    for parent in (CGROUP_V1 / "cpuacct", CGROUP_V1 / "cpu,cpuacct", CGROUP_V1, CGROUP_V1 / "unified"):
        v2 = (parent / "cgroup.controllers").exists()
        if not (v2 or (parent / "cpuacct.usage").exists()) or not os.access(parent, os.W_OK):
            continue
        group = parent / f"pm-{name}" if v2 else parent / name
        try:
            group.mkdir()
        except OSError:
            continue
        return [group]
    return []


def remove_cgroup(groups: list[Path], wait: float = 5.0) -> None:
    """Remove a sandbox's cgroups, waiting up to ``wait`` seconds for its last processes to be gone.

    The PID namespace is torn down with the kernel, a few milliseconds after
    the kernel is killed: the first look comes after 1 ms, and the wait doubles
    up to 0.1 s (a fixed 0.1 s cost one notebook in five a tenth of a second).
    """
    for group in groups:
        deadline, pause = time.monotonic() + wait, 0.001
        while True:
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(pause)
                pause = min(2 * pause, 0.1)


def unsafe() -> bool:
    """Whether ``$PM_GRADE_UNSAFE`` (set by ``make grade UNSAFE=1``) lets student code run unconfined."""
    return os.environ.get("PM_GRADE_UNSAFE", "") not in ("", "0")


@functools.cache
def works() -> bool:
    """bubblewrap and prlimit are installed, and bubblewrap can make its namespaces here."""
    if not (shutil.which("bwrap") and shutil.which("prlimit")):
        return False
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent",
                            "prlimit", "--as=1073741824", "--", "true"], capture_output=True)
    return probe.returncode == 0


def check() -> str:
    """One line saying how student code will run; exits if it cannot run safely."""
    nbytes, cpu = limits()
    if works():
        procs = (f"at most {max_procs()} processes and {2 * nbytes / 2**30:.1f} GiB in all per sandbox (PM_GRADE_PROCS)"
                 if cgroups_available() else "no cap on the number of processes (cgroups are not writable here)")
        return (f"Student code runs in a sandbox (bubblewrap): no network, no view of the repository, the course"
                f" folder or other students' work; {nbytes / 2**30:.1f} GiB of memory and {cpu} s of CPU per"
                f" process (PM_GRADE_MEMORY, PM_GRADE_CPU); {procs}; "
                + ("each kernel forked from a warm template that imported numpy, attnlib and matplotlib"
                   " (PM_GRADE_WARM=0: a new Python each)." if warm_wanted() else
                   "each kernel a new Python (PM_GRADE_WARM=0)."))
    if unsafe():
        return ("WARNING: bubblewrap (bwrap) is missing and PM_GRADE_UNSAFE=1 (make grade UNSAFE=1) was given:"
                " student code runs as you, with your files and network. Grade only work you trust.")
    raise SystemExit("bubblewrap (bwrap) and prlimit are needed to run student code safely, and bwrap must be"
                     " allowed to create namespaces: install the Debian packages bubblewrap and util-linux (make"
                     " install and make grade do so as root), or set PM_GRADE_UNSAFE=1 (PM_GRADE_UNSAFE=1 pm-course"
                     " grade; make grade UNSAFE=1) to run it unconfined, as you.")


def hidden_paths() -> list[Path]:
    """What the kernel must not see: the repository (this package with it), the course folder, the
    submissions, the home folder."""
    from .course import exercises_dir

    paths = [ROOT, course_dir(), exercises_dir(), Path.home()]
    # the folders submissions were collected from (pm_course.grade sets them)
    paths += [Path(p) for p in os.environ.get("PM_SUBMISSIONS", "").split(os.pathsep) if p]
    paths = sorted({p.resolve() for p in paths if p.exists()})
    # a folder inside another hidden one is hidden with it
    return [p for p in paths if not any(p != q and p.is_relative_to(q) for q in paths)]


def visible_again() -> list[Path]:
    """What the kernel needs from inside the hidden folders: Python, the virtual environment, attnlib."""
    import attnlib

    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(attnlib.__file__).parent]
    return sorted({q for p in needed if p.exists() for q in (p.absolute(), p.resolve())})


def probes_dir(runtime: Path) -> Path:
    """Where the kernel leaves the values its hidden tests probed (see pm_course/hidden.py)."""
    folder = runtime / "probes"
    folder.mkdir(exist_ok=True)
    return folder


def course_dir() -> Path:
    """The course folder (:data:`pm_course.course.COURSE`), resolved."""
    return Path(os.environ.get("PM_COURSE_DIR", ROOT / "course")).resolve()


def graded_copy(work: Path) -> tuple[str, str] | None:
    """(student, assignment) when ``work`` is nbgrader's folder for a graded notebook."""
    try:
        student, assignment = work.resolve().relative_to(course_dir() / "autograded").parts[:2]
    except ValueError:
        return None
    return student, assignment


def scratch_for(work: Path, runtime: Path) -> Path:
    """A private copy of what the student handed in, mounted where the kernel runs.

    nbgrader runs a notebook in its graded copy's folder, and that copy already
    holds the hidden tests (they are put back before the notebook runs): the
    kernel sees the student's own submitted files instead, and whatever it
    writes there is thrown away with the sandbox.
    """
    scratch = runtime / "work"
    graded = graded_copy(work)  # None: not a graded notebook (a test, say): an empty folder
    submitted = course_dir() / "submitted" / graded[0] / graded[1] if graded else None
    if submitted and submitted.is_dir():
        shutil.copytree(submitted, scratch, symlinks=True)
    else:
        scratch.mkdir()
    return scratch


OUTPUT_CAP = """\
# Loaded by the grader's sandboxed kernel. A cell prints at most a megabyte per
# stream. A loop that prints without end would otherwise fill the kernel's
# memory faster than the output can be sent, and break every later cell.
import contextlib
import sys

from IPython import get_ipython

LIMIT = 1_000_000


class CappedStream:
    def __init__(self, stream):
        self._stream, self.written = stream, 0

    def write(self, text):
        room = LIMIT - self.written
        self.written += len(text)
        if room > 0:
            self._stream.write(text[:room] + ("\\n[output cut by the grader]\\n" if len(text) > room else ""))
        return len(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


sys.stdout, sys.stderr = CappedStream(sys.stdout), CappedStream(sys.stderr)


def _new_cell(*args):
    sys.stdout.written = sys.stderr.written = 0


get_ipython().events.register("pre_execute", _new_cell)

# IPython keeps a copy of everything a cell prints, for its history of outputs:
# a printing loop would fill the memory all the same. The grader needs no history.
get_ipython()._tee = lambda channel: contextlib.nullcontext()

# Nor does it keep images: with matplotlib's Agg backend no figure is shown, and
# the feedback shows an output's HTML before any image. Not drawing the print
# forms of the interactive figures (image/png) saves over half a second each.
get_ipython().display_formatter.formatters["image/png"].enabled = False
"""


def output_cap(runtime: Path) -> Path:
    """The start-up file that caps each cell's output (read-only in the sandbox)."""
    path = runtime / "startup" / "output_cap.py"
    path.parent.mkdir()
    path.write_text(OUTPUT_CAP)
    return path


@functools.cache
def _font_list() -> Path | None:
    """The grader's matplotlib font list (made here once if it is missing)."""
    import matplotlib
    from matplotlib import font_manager  # noqa: F401 -- importing it writes the list

    found = sorted(Path(matplotlib.get_cachedir()).glob("fontlist-*.json"))
    return found[-1] if found else None


def matplotlib_cache(runtime: Path) -> Path:
    """A matplotlib cache folder for one kernel, holding a copy of the grader's font list.

    The kernel's home is the student's folder, where matplotlib finds no cache:
    it would search the system's fonts again on every import (about a second
    of CPU per notebook).
    """
    folder = runtime / "matplotlib"
    folder.mkdir()
    if _font_list():
        shutil.copy(_font_list(), folder)
    return folder


def bwrap_argv(work: Path, runtime: Path) -> list[str]:
    """The bubblewrap command line that confines a kernel to ``work`` (and its socket folder ``runtime``)."""
    nbytes, cpu = limits()
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in hidden_paths():
        argv += ["--tmpfs", str(path)]
    for path in visible_again():
        argv += ["--ro-bind", str(path), str(path)]
    startup = output_cap(runtime).parent
    argv += ["--bind", str(scratch_for(work, runtime)), str(work), "--bind", str(runtime), str(runtime),
             "--ro-bind", str(startup), str(startup), "--setenv", "IPYTHONDIR", "/tmp/ipython",
             "--unshare-net", "--unshare-pid", "--die-with-parent",
             # ipykernel exits when its parent PID looks gone, and the grader's PID means nothing
             # in a new PID namespace: 1 tells it not to poll (the sandbox dies with the grader)
             "--setenv", "JPY_PARENT_PID", "1",
             "--setenv", "HOME", str(work), "--setenv", "OPENBLAS_NUM_THREADS", "1",
             "--setenv", "PM_PROBES", str(probes_dir(runtime)),
             "--setenv", "MPLBACKEND", "Agg", "--setenv", "MPLCONFIGDIR", str(matplotlib_cache(runtime)),
             "--chdir", str(work),
             "prlimit", f"--as={nbytes}", f"--cpu={cpu}", "--core=0", f"--fsize={nbytes}", "--"]
    return argv


def warm_wanted() -> bool:
    """Whether kernels are forked from the warm template (``PM_GRADE_WARM=0``: a new Python each)."""
    return os.environ.get("PM_GRADE_WARM", "1").strip() not in ("0", "") and works()


class Template:
    """This process's warm template (:mod:`pm_course.warm`): started on first use, one per process.

    A grading worker forked from the grader starts its own: a template's pipes
    are never shared between processes.
    """

    _by_pid: dict[int, Template | None] = {}
    _lock = threading.Lock()

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="pm-template-"))
        mpl = self.folder / "matplotlib"
        mpl.mkdir()
        if _font_list():
            shutil.copy(_font_list(), mpl)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg", MPLCONFIGDIR=str(mpl),
                   HOME=str(self.folder), JPY_PARENT_PID="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("warm.py")), str(self.folder)],
                                     cwd=self.folder,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self._line(timeout=120) != "ready":
            self.close()
            raise RuntimeError("the warm kernel template did not start")

    @classmethod
    def get(cls) -> Template | None:
        """This process's template; None when it could not start (kernels then start cold, as safe)."""
        with cls._lock:
            if os.getpid() not in cls._by_pid:
                try:
                    cls._by_pid[os.getpid()] = cls()
                except (OSError, RuntimeError) as err:
                    print(f"warm kernel template: {err}; each kernel starts as a new Python", file=sys.stderr)
                    cls._by_pid[os.getpid()] = None
            return cls._by_pid[os.getpid()]

    def _line(self, timeout: float) -> str:
        out, data, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + timeout
        while not data.endswith(b"\n"):
            ready, _, _ = select.select([out], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(out, 4096) if ready else b""
            if not chunk:
                return ""
            data += chunk
        return data.decode().strip()

    def fork(self, request: dict) -> int:
        """Fork a kernel into the sandbox the request names; its process ID (raises if it cannot)."""
        data = json.dumps(request).encode()
        with self._lock:
            try:
                self.proc.stdin.write(b"G" + len(data).to_bytes(8, "big") + data)
                self.proc.stdin.flush()
            except OSError as err:
                raise RuntimeError(f"the warm kernel template is gone: {err}") from None
            reply = self._line(timeout=30)
        if not reply.startswith("ok "):
            raise RuntimeError(f"the warm kernel template could not fork a kernel: {reply or 'no answer'}")
        return int(reply.split()[1])

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def _close_template() -> None:
    template = Template._by_pid.pop(os.getpid(), None)
    if template:
        template.close()


import atexit  # noqa: E402

atexit.register(_close_template)


class SandboxKernelClient(AsyncKernelClient):
    """The grader's client: ready as soon as the kernel answers on both channels.

    jupyter_client's ``wait_for_ready`` then waits until IOPub has been quiet for
    0.2 s, to drop the kernel's start-up messages; nbclient ignores messages
    that do not answer its own requests, so the grader need not wait.
    """

    def _create_connected_socket(self, channel, identity=None):
        """A channel's socket, retrying its connection every 5 ms rather than ZeroMQ's 100 ms.

        The client connects as soon as the kernel's process exists, before the
        kernel has bound its sockets: the first attempt finds no socket, and
        ZeroMQ's default interval made every kernel wait about 0.1 s for the second.
        """
        import zmq

        self.context.setsockopt(zmq.RECONNECT_IVL, 5)  # the default for sockets made from now on
        return super()._create_connected_socket(channel, identity)

    async def wait_for_ready(self, timeout=None):
        """Return once the kernel has answered ``kernel_info`` and IOPub carries its messages.

        ``timeout`` seconds (default 60) at most; raises RuntimeError when the
        kernel dies or does not answer in time.
        """
        timeout = 60 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except queue.Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:  # IOPub is connected once it carries the kernel's status for that request
                    await self.iopub_channel.get_msg(timeout=0.2)
                except queue.Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
        raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run in :func:`bwrap_argv`'s sandbox.

    The kernel talks to the grader over Unix sockets in a private folder (TCP on
    loopback does not cross into a new network namespace).
    """

    @traitlets.default("client_factory")
    def _client_factory_default(self):
        return SandboxKernelClient

    async def start_kernel(self, **kw):
        self._runtime = Path(tempfile.mkdtemp(prefix="pm-kernel-"))
        self.transport = "ipc"
        self.ip = str(self._runtime / "kernel-ipc")
        self.connection_file = str(self._runtime / "kernel.json")
        # a signal would reach bubblewrap, not the kernel (and end the sandbox): interrupt
        # with a message on the control channel, which the kernel turns into its own SIGINT
        self.kernel_spec.interrupt_mode = "message"
        self._warm = warm_wanted() and Template.get() is not None  # started before the sandbox that waits for it
        if self._warm:
            os.mkfifo(self._runtime / "alive")
        started = await super().start_kernel(**kw)
        if self._warm:
            await self._fork_warm_kernel()
        return started

    async def _fork_warm_kernel(self) -> None:
        """The sandbox is up around its placeholder: fork the kernel into it from the warm template."""
        import asyncio

        info, deadline = self._runtime / "info.json", time.monotonic() + 30
        while True:
            try:
                pid = json.loads(info.read_text())["child-pid"]
                break
            except (OSError, ValueError, KeyError):
                if time.monotonic() > deadline or not await self.is_alive():
                    raise RuntimeError("the sandbox did not start (bubblewrap wrote no child-pid)") from None
                await asyncio.sleep(0.002)
        nbytes, cpu = limits()
        self._kernel_pid = Template.get().fork({"sandbox_pid": pid, "alive": str(self._runtime / "alive"), "cwd": self._work,
                             "env": {**self._env, **self._setenv}, "argv": self._kernel_args,
                             "memory": nbytes, "cpu": cpu, "cgroups": [str(g) for g in self._cgroups]})

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        work = Path(self._launch_args.get("cwd") or os.getcwd())
        if not works():
            check()  # exits unless UNSAFE=1
            return cmd
        kernel = cmd + [f"--IPKernelApp.exec_files={self._runtime / 'startup' / 'output_cap.py'}"]
        argv = bwrap_argv(work, self._runtime)
        self._cgroups = make_cgroup(self._runtime.name) + make_cpu_cgroup(self._runtime.name)
        self._warm = getattr(self, "_warm", False) and "ipykernel_launcher" in kernel
        if self._warm:
            # the sandbox holds a placeholder until the kernel forked into it ends (the FIFO's last
            # writer closes it); bubblewrap writes the placeholder's process ID to info.json
            self._work = str(work)
            self._kernel_args = kernel[kernel.index("ipykernel_launcher") + 1:]
            self._setenv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
            argv = ["sh", "-c", 'exec 3>"$0" && exec "$@"', str(self._runtime / "info.json"),
                    "bwrap", "--info-fd", "3", *argv[1:], "cat", str(self._runtime / "alive")]
        else:
            argv = argv + kernel
        if self._cgroups:  # join the cgroups first, so that everything the sandbox starts is counted
            join = 'for g; do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs" || exit 97; shift; done; shift; exec "$@"'
            argv = ["sh", "-c", join, "sh", *map(str, self._cgroups), "--", *argv]
        return argv

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        self._env = dict(kw.get("env") or os.environ)  # what the kernel's process gets (bubblewrap's --setenv aside)
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_wait(self, pollinterval=0.1):
        """Wait for the kernel to end, looking every 10 ms (a killed sandbox ends at once)."""
        await super()._async_wait(pollinterval=min(pollinterval, 0.01))

    async def _async_cleanup_resources(self, restart=False):
        if not restart and getattr(self, "_created_context", False) and not self.context.closed:
            # the kernel is gone: what its sockets still hold (a heartbeat's ping) can never be
            # delivered, and jupyter_client's destroy(linger=100) waited 0.1 s for it
            self.context.destroy(linger=0)
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_runtime", None):
            graded = graded_copy(Path(self._launch_args.get("cwd") or "."))
            if graded and (self._runtime / "probes").is_dir():  # kept for pm_course/hidden.py; added to
                # what earlier kernels of the same notebook probed (a kernel made again after a cell was
                # stopped: pm_course/limits.py); the grader empties the folder before the notebook runs
                keep = course_dir() / "probes" / graded[0] / graded[1]
                shutil.copytree(self._runtime / "probes", keep, dirs_exist_ok=True)
            shutil.rmtree(self._runtime, ignore_errors=True)
            remove_cgroup(getattr(self, "_cgroups", []))
