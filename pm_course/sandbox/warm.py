"""A warm kernel template: Python with ipykernel, numpy, attnlib and matplotlib imported once, forked per notebook.

Run as a script by :class:`pm_course.sandbox.Template` (never imported by the
grader): ``python warm.py``. It imports the modules every graded notebook
needs, then waits on its standard input. For each notebook the grader first
starts that notebook's sandbox exactly as for a cold kernel (bubblewrap, with
the same mounts, namespaces and cgroups; :func:`pm_course.sandbox.bwrap_argv`),
holding a placeholder process, and then writes one byte here. This process
forks; the child reads the request (the sandbox's process id, the kernel's
connection file, its environment and limits) and

1. joins the sandbox's cgroups, then its network, PID and mount namespaces
   (so its root is the sandbox's root: the hidden folders are empty, the
   network is gone);
2. forks the kernel inside them, which becomes the sandbox's user (not root),
   drops every capability (bounding set included), sets ``no_new_privs`` and the memory, CPU, core and file-size
   limits, closes every file descriptor it inherited (this template's pipes
   among them), takes the kernel's environment and working folder, and only
   then starts ipykernel, before any student code runs.

The template never runs student code and never reads a notebook; the request
reaches only the forked child (this process reads a single byte of it), so no
student's files, names or values are ever in its memory, and each kernel is a
fresh copy of a process that has only imported modules. The kernel dies with
its sandbox: when the placeholder's PID namespace ends, the kernel in it is killed.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

sys.path[:] = [p for p in sys.path[1:]]  # not this package's folder: the kernel must not import pm_course

# What the graded notebooks import: paid once here, not once per notebook.
os.environ.setdefault("MPLBACKEND", "Agg")
import numpy  # noqa: E402,F401
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401
import attnlib  # noqa: E402,F401
import attnlib.checks  # noqa: E402,F401
import attnlib.plots  # noqa: E402,F401
import attnlib.probes  # noqa: E402,F401
import attnlib.widgets  # noqa: E402,F401
import ipywidgets  # noqa: E402,F401
from ipykernel.kernelapp import IPKernelApp  # noqa: E402
# and what ipykernel itself imports while it starts (its debugger, the history's sqlite3)
import ipykernel.debugger  # noqa: E402,F401
import ipykernel.ipkernel  # noqa: E402,F401
import numpy.random  # noqa: E402,F401
import pdb  # noqa: E402,F401
import sqlite3  # noqa: E402,F401
import tornado.queues  # noqa: E402,F401

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x40000000, 0x20000000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges(uid: int, gid: int) -> None:
    """The sandbox's user (``uid``, ``gid``; no other group), no capability left, none to gain by exec
    (empty bounding set, no_new_privs): what ``setpriv`` gives a cold kernel."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"dropping capability {cap}")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    if os.getuid() != uid or os.getgid() != gid:  # as root: become the sandbox's user, in this order
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if open("/proc/self/status").read().split("CapEff:")[1].split()[0].strip("0"):
        raise OSError("capabilities are still effective")


def _read_request(fd: int) -> dict:
    size = int.from_bytes(_read_exactly(fd, 8), "big")
    return json.loads(_read_exactly(fd, size))


def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the grader closed the template's pipe")
        data += chunk
    return data


def _open_writer(fifo: str, wait: float = 10.0) -> int:
    """The FIFO opened for writing, once its reader (the sandbox's placeholder) has opened it."""
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as err:  # ENXIO: no reader yet
            if time.monotonic() > deadline:
                raise OSError(f"the sandbox never opened {fifo}: {err}") from None
            time.sleep(0.002)


def _kernel(request: dict, alive_fd: int) -> None:
    """In the sandbox, as the forked kernel: drop everything, then be ipykernel (never returns)."""
    drop_privileges(*request["user"])
    nbytes, cpu = request["memory"], request["cpu"]
    for limit, value in ((resource.RLIMIT_AS, nbytes), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_FSIZE, nbytes)):
        resource.setrlimit(limit, (value, value))
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):  # this template's pipes: nothing a kernel writes may reach the grader this way
        os.dup2(null, fd)
    os.closerange(3, alive_fd)  # every other descriptor the template or its child had open
    os.closerange(alive_fd + 1, os.sysconf("SC_OPEN_MAX"))
    os.set_inheritable(alive_fd, False)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0:0] = [request["cwd"]]  # as `python -m ipykernel_launcher` run in the notebook's folder
    numpy.random.seed()  # the legacy global generator, fresh as in a new process
    for cached in (matplotlib.get_configdir, matplotlib.get_cachedir):  # the kernel's own MPLCONFIGDIR
        getattr(cached, "cache_clear", lambda: None)()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["ipykernel_launcher", *request["argv"]]
    app = IPKernelApp.instance()
    app.initialize(request["argv"])
    app.start()
    os._exit(0)


def _child(stdout: int) -> None:
    """The fork for one notebook: read its request, enter its sandbox, fork the kernel there, report."""
    try:
        request = _read_request(0)
        for group in request["cgroups"]:
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        pid = request["sandbox_pid"]
        alive = _open_writer(request["alive"])  # the placeholder waits for this FIFO's last writer
        fifo = os.fstat(alive)
        namespaces = [(kind, flag, os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
                      for kind, flag in (("net", CLONE_NEWNET), ("pid", CLONE_NEWPID), ("mnt", CLONE_NEWNS))]
        for kind, _, fd in namespaces:  # never the template's own (a process ID reused by another process)
            if os.fstat(fd).st_ino == os.stat(f"/proc/self/ns/{kind}").st_ino:
                raise OSError(f"process {pid} is not in a sandbox: its {kind} namespace is the grader's")
        for kind, flag, fd in namespaces:  # the PID namespace for the kernel forked below; the mount
            _check(_libc.setns(fd, flag), f"setns {kind}")  # namespace last: its root becomes ours
            os.close(fd)
        seen = os.stat(request["alive"])  # the sandbox that holds this notebook's FIFO, and no other
        if (seen.st_dev, seen.st_ino) != (fifo.st_dev, fifo.st_ino):
            raise OSError(f"process {pid} is not this notebook's sandbox")
        kernel = os.fork()
        if kernel == 0:
            try:
                _kernel(request, alive)
            except BaseException as err:  # noqa: BLE001 -- the kernel never starts (the grader sees it die)
                os.write(2, f"warm kernel: {type(err).__name__}: {err}\n".encode())
            finally:
                os._exit(1)
        os.close(alive)
        os.write(stdout, f"ok {kernel}\n".encode())
    except BaseException as err:  # noqa: BLE001
        os.write(stdout, f"error {type(err).__name__}: {err}\n".encode())
    finally:
        os._exit(0)


def serve() -> None:
    """Wait for a byte per notebook; fork a child that reads the rest of the request."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if len(os.listdir("/proc/self/task")) != 1:
        raise SystemExit("the template has threads: forking it would be unsafe")
    os.write(1, b"ready\n")
    while True:
        if os.read(0, 1) != b"G":
            return  # the grader is gone
        child = os.fork()
        if child == 0:
            _child(1)
        os.waitpid(child, 0)  # the child has read its whole request before this loop reads again


if __name__ == "__main__":
    try:
        serve()
    finally:  # its folder (the matplotlib cache it was started with) goes with it, however the grader ended
        if len(sys.argv) > 1:
            import shutil

            shutil.rmtree(sys.argv[1], ignore_errors=True)
