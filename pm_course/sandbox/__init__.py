"""Kernels for student code: confined with bubblewrap, capped in memory and CPU time.

The sandbox is an allow-list. A student's kernel is built a root of its own and
sees exactly this of the host, read-only: the operating system's programs and
libraries (``/usr`` and its links ``/bin``, ``/lib``, ...), a few files of
``/etc`` (the dynamic linker's cache, the time zone, fonts), the Python
installation (the virtual environment and the interpreter it was made from) and
attnlib's folder. It writes only to a private copy of that student's submitted
files (its home and working folder, ``/home/student``) and a private ``/tmp``.
Nothing else of the machine exists for it: not the repository (the exercise
sources with their hidden tests, ``.git``), not any course folder, gradebook or
LMS download, not another clone, ``/srv``, ``/opt``, ``/mnt``, ``/media``,
``/var`` or anyone's home. Its environment is an allow-list too
(:func:`kernel_environment`: the locale, the thread counts, a ``PATH`` of its
own and the grader's settings for it): an LMS token in the instructor's shell
never reaches it. It runs as an unprivileged user (``nobody``, 65534, when the
grader is root) with no capability; it has no network; it lives in its own
process namespace, so nothing it starts outlives it; and its address space
and CPU time are capped with ``prlimit``.

nbgrader starts the kernel through :class:`SandboxKernelManager` (see
``nbgrader_config.py``). The limits come from the environment:

=====================  ================================================  ========
``PM_GRADE_MEMORY``    address space per kernel process (bytes, K/M/G)   ``2G``
``PM_GRADE_CPU``       CPU seconds per kernel process                    ``120``
                       (each cell's own limit: ``PM_GRADE_CELL_CPU``,
                       :mod:`pm_course.sandbox.cell_limits`)
``PM_GRADE_PROCS``     processes and threads per sandbox (cgroups only)  ``64``
``PM_GRADE_UNSAFE=1``  run kernels unconfined where the sandbox cannot
                       start (``make grade UNSAFE=1`` sets it); in batch
                       use (``CI`` set, no terminal) only ``=unconfined``
``PM_GRADE_WARM=0``    start each kernel as a new Python (cold), not
                       forked from the warm template
=====================  ================================================  ========

Where the machine lets the grader create cgroups (Linux, as root), each sandbox
also gets a cgroup capping its number of processes (so a fork bomb stops at
``PM_GRADE_PROCS``) and its total memory (twice ``PM_GRADE_MEMORY``, for
processes that fork), and one counting its CPU time; elsewhere those caps are
missing, and ``check()`` says so. Each is a child of the grader's own cgroup of
that controller (:func:`own_cgroup`), never made elsewhere: a grader run in a
systemd slice, a container or a batch job's cgroup keeps its kernels inside
that cgroup's accounting and limits (tests/course/test_sandbox_cgroups.py).

A kernel is not a new Python: it is forked from a warm template
(:mod:`pm_course.sandbox.warm`, one per grading process) that imported ipykernel,
numpy, attnlib and matplotlib once, which saves about 0.6 CPU seconds a
notebook. The sandbox is the same: bubblewrap makes it, with the same command
line, around a placeholder process; the forked child joins its cgroups and
its network, PID and mount namespaces, and the kernel it forks there drops
every capability and takes the limits before ipykernel starts. The template
never runs student code, so each kernel starts from a process that has only
imported modules (tests/course/test_warm_kernel.py).

Where bubblewrap cannot start, :func:`check` shows its own error and the likely
cause with its fix (:func:`diagnose`, from the kernel's settings under
``/proc/sys``, or ``$PM_GRADE_PROC_SYS`` for tests). The unconfined mode runs
each kernel exactly as the sandbox does (:func:`unconfined`: the same start-up
file, limits, cgroups, environment and private copy of the student's files)
but for the namespaces and the hidden folders, so that it grades the same. A
kernel that does not start is the machine's fault, never the student's: it is
recorded in :data:`FAULTS` for :mod:`pm_course.steps.grade`.
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
PROC_CGROUP = Path("/proc/self/cgroup")


def own_cgroup(controller: str) -> Path | None:
    """This process's own cgroup of ``controller`` ("pids", "memory", "cpuacct") as a folder; None if none.

    Read from ``/proc/self/cgroup``: a v1 line names its hierarchy's controllers
    (``4:memory:/a/b``, mounted at ``/sys/fs/cgroup/memory``, or ``cpu,cpuacct``
    together); v2's one line (``0::/a/b``) is the unified hierarchy, where
    ``cpu.stat`` counts CPU time whatever controllers are enabled.
    """
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    unified = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            for mount in (CGROUP_V1 / controllers, CGROUP_V1 / controller):
                if mount.is_dir():
                    return mount / path.lstrip("/")
        if controllers == "":
            unified = path
    if unified is not None:
        for root in (CGROUP_V1, CGROUP_V1 / "unified"):
            if (root / "cgroup.controllers").exists() and (
                    controller == "cpuacct" or controller in (root / "cgroup.controllers").read_text().split()):
                return root / unified.lstrip("/")
    return None


def _child_of_own(controller: str, name: str) -> Path | None:
    """A new cgroup for one sandbox under this process's own ``controller`` group (so that the grader's
    group, and every group above it, counts and limits what the sandbox does); None where it cannot be made."""
    parent = own_cgroup(controller)
    if parent is None or not os.access(parent, os.W_OK):
        return None
    group = parent / f"pm-{name}"
    if group in _MADE:  # cgroups v2: one hierarchy, so one group serves every controller
        return group
    try:
        group.mkdir()
    except OSError:
        return None
    _MADE.add(group)
    return group


_MADE: set[Path] = set()  # the groups made here (a sandbox's name is new each time: pm_course.sandbox's runtime)


_SAID: set[str] = set()


def _say_once(text: str) -> None:
    if text not in _SAID:
        _SAID.add(text)
        print(text, file=sys.stderr)


def cgroups_available() -> bool:
    return all(own_cgroup(c) is not None and os.access(own_cgroup(c), os.W_OK) for c in ("pids", "memory"))


def make_cgroup(name: str) -> list[Path]:
    """A pids and a memory cgroup for one sandbox, children of the grader's own; [] where they cannot be made."""
    if not cgroups_available():
        return []
    made = []
    for controller, limit_file, value in (("pids", "pids.max", max_procs()),
                                          ("memory", "memory.limit_in_bytes", 2 * limits()[0])):
        group = _child_of_own(controller, name)
        if group is None:
            _say_once(f"sandbox: no {controller} cgroup could be made under the grader's own ({own_cgroup(controller)}):"
                      f" its cap is missing")
            continue
        made.append(group)
        try:
            target = group / limit_file
            if not target.exists() and controller == "memory":
                target = group / "memory.max"  # v2
            target.write_text(str(value))
        except OSError:
            pass
    return made


def make_cpu_cgroup(name: str) -> list[Path]:
    """A cgroup that counts one sandbox's CPU time, a child of the grader's own (v1 ``cpuacct``, else v2);
    [] where none can be made there.

    Cell time limits count its CPU seconds (:mod:`pm_course.sandbox.cell_limits`); without it they count those of the
    kernel's process tree, and this is said once. Never a group elsewhere: a kernel outside the grader's
    group would leave its accounting and its quotas (a systemd slice's, a container's, a batch job's).
    """
    group = _child_of_own("cpuacct", name)
    if group is None or not ((group / "cpuacct.usage").exists() or (group / "cpu.stat").exists()):
        if group is not None:
            remove_cgroup([group])
        _say_once(f"sandbox: no CPU-accounting cgroup could be made under the grader's own"
                  f" ({own_cgroup('cpuacct')}): cell time limits count the kernel's process tree instead")
        return []
    return [group]


def remove_cgroup(groups: list[Path], wait: float = 5.0) -> None:
    """Remove a sandbox's cgroups, waiting up to ``wait`` seconds for its last processes to be gone.

    The PID namespace is torn down with the kernel, a few milliseconds after
    the kernel is killed: the first look comes after 1 ms, and the wait doubles
    up to 0.1 s (a fixed 0.1 s cost one notebook in five a tenth of a second).
    """
    for group in groups:
        _MADE.discard(group)
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
    """Whether ``$PM_GRADE_UNSAFE`` (set by ``make grade UNSAFE=1``) lets student code run unconfined.

    Only where the sandbox cannot run: with a working bubblewrap the sandbox is
    used whatever this says.
    """
    return os.environ.get("PM_GRADE_UNSAFE", "").strip().lower() not in ("", "0", "false", "no")


def batch_use() -> bool:
    """Whether this looks like unattended batch use: ``$CI`` set (as every CI service sets it) and no terminal on stdin."""
    ci = os.environ.get("CI", "").strip().lower()
    try:
        terminal = sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # stdin closed
        terminal = False
    return ci not in ("", "0", "false", "no") and not terminal


UNCONFINED_BY_NAME = "unconfined"  # PM_GRADE_UNSAFE=unconfined: the mode asked for by name (needed in batch use)
UNCONFINED_MEANS = ("student code runs unconfined, as you: it can read and change your files (your LMS token's file"
                    " among them), the course folder (the gradebook, other students' work) and the hidden tests, and"
                    " reach the network; only its environment is still the allow-list")


def proc_sys() -> Path:
    """Where the kernel's settings are read (``/proc/sys``; ``$PM_GRADE_PROC_SYS`` points elsewhere, for tests)."""
    return Path(os.environ.get("PM_GRADE_PROC_SYS") or "/proc/sys")


def sysctl(name: str) -> str | None:
    """A kernel setting (``user.max_user_namespaces``) as text; None where this kernel has no such setting."""
    try:
        return (proc_sys() / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def in_container() -> bool:
    """Whether this runs in a container (Docker, Podman, systemd-nspawn, LXC, Kubernetes)."""
    if os.environ.get("container") or Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    try:
        cgroup = Path("/proc/1/cgroup").read_text()
    except OSError:
        return False
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "libpod", "lxc"))


APPARMOR_PROFILE = """\
abi <abi/4.0>,
include <tunables/global>

profile bwrap {bwrap} flags=(unconfined) {{
  userns,

  include if exists <local/bwrap>
}}
"""


def diagnose(error: str) -> list[str]:
    """Why bubblewrap could not make its namespaces here, each cause with its fix (the kernel's settings read
    under :func:`proc_sys`); the unconfined mode comes last, with what it means."""
    bwrap = Path(shutil.which("bwrap") or "/usr/bin/bwrap").resolve()
    causes = []
    if sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        causes.append(
            "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10 and later, 24.04 included): AppArmor"
            " lets only programs with a profile that allows it make user namespaces. Give bwrap one: save\n\n"
            + "\n".join("        " + line if line else "" for line in
                        APPARMOR_PROFILE.format(bwrap=bwrap).splitlines())
            + "\n\n    as /etc/apparmor.d/bwrap and load it: sudo apparmor_parser -r /etc/apparmor.d/bwrap."
            " Or lift the restriction for every program (a hardening Ubuntu chose): sudo sysctl -w"
            " kernel.apparmor_restrict_unprivileged_userns=0 (and the same line, without sysctl -w, in"
            " /etc/sysctl.d/60-userns.conf to keep it after a reboot).")
    if sysctl("user.max_user_namespaces") == "0":
        causes.append("user.max_user_namespaces = 0: this kernel allows no user namespaces. Allow them: sudo sysctl"
                      " -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/ to keep it after a reboot).")
    if sysctl("kernel.unprivileged_userns_clone") == "0":
        causes.append("kernel.unprivileged_userns_clone = 0 (Debian's and some other kernels): only root may make"
                      " user namespaces. Allow them: sudo sysctl -w kernel.unprivileged_userns_clone=1.")
    if not causes and in_container():
        causes.append("this runs in a container, whose runtime forbids user namespaces (Docker's default seccomp"
                      " profile does): grade on the host, or start the container with namespaces allowed (e.g."
                      " docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined).")
    if not causes:
        causes.append("none of the usual causes shows here (kernel.apparmor_restrict_unprivileged_userns,"
                      " user.max_user_namespaces, kernel.unprivileged_userns_clone, a container): bwrap's own"
                      " message above says what failed.")
    return causes


def last_resort() -> str:
    return (f"Last resort: PM_GRADE_UNSAFE=1 pm-course grade (make grade UNSAFE=1; in batch use with CI set,"
            f" PM_GRADE_UNSAFE={UNCONFINED_BY_NAME}): {UNCONFINED_MEANS}. It grades exactly as the sandbox does;"
            " use it only for work you trust.")


def _probe() -> tuple[bool, str]:
    """(whether bubblewrap and prlimit work here, what went wrong when they do not)."""
    return _probe_tools(shutil.which("bwrap"), shutil.which("prlimit"))


@functools.lru_cache(maxsize=8)
def _probe_tools(bwrap: str | None, prlimit: str | None) -> tuple[bool, str]:
    """:func:`_probe` of these two programs: run once per process and pair, not once per kernel."""
    missing = [tool for tool, found in (("bwrap", bwrap), ("prlimit", prlimit)) if not found]
    if missing:
        return False, ("not installed: " + " and ".join(missing) + " (the Debian packages bubblewrap and util-linux;"
                       " make install and make grade install them as root)")
    try:
        probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent",
                                prlimit, "--as=1073741824", "--", "true"], capture_output=True, text=True,
                               timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"bwrap could not be run: {err}"
    if probe.returncode == 0:
        return True, ""
    said = (probe.stderr or probe.stdout).strip()[-600:] or f"nothing (exit status {probe.returncode})"
    return False, f"bwrap is installed but failed here; it said: {said}"


def works() -> bool:
    """bubblewrap and prlimit are installed, and bubblewrap can make its namespaces here."""
    return _probe()[0]


def why_not() -> str:
    """What stops the sandbox here: bwrap's own error, each likely cause with its fix, the unconfined mode last."""
    ok, said = _probe()
    if ok:
        return ""
    if said.startswith("not installed"):
        return (f"The sandbox cannot run: {said}.\n  {last_resort()}")
    return ("The sandbox cannot run: " + said + "\n"
            + "\n".join(f"  Cause and fix: {cause}" for cause in diagnose(said))
            + f"\n  {last_resort()}")


def unconfined_banner() -> str:
    """The warning printed (to stderr and in grade's summary) on every run where student code ran unconfined."""
    return (f"WARNING: UNCONFINED GRADING (PM_GRADE_UNSAFE={os.environ.get('PM_GRADE_UNSAFE', '')}): no sandbox;"
            f" {UNCONFINED_MEANS}.")


def check(announce: bool = True) -> str:
    """One line saying how student code will run; exits if it cannot run safely.

    Unconfined (no working sandbox, ``PM_GRADE_UNSAFE`` set) it also warns on
    stderr, with why the sandbox cannot run; in batch use (:func:`batch_use`)
    it exits unless the mode is asked for by name, ``PM_GRADE_UNSAFE=unconfined``:
    a ``PM_GRADE_UNSAFE=1`` (or ``UNSAFE=1`` for make) left in a CI job's
    environment does not turn the sandbox off unnoticed.
    """
    nbytes, cpu = limits()
    if works():
        procs = (f"at most {max_procs()} processes and {2 * nbytes / 2**30:.1f} GiB in all per sandbox (PM_GRADE_PROCS)"
                 if cgroups_available() else "no cap on the number of processes (cgroups are not writable here)")
        return (f"Student code runs in a sandbox (bubblewrap) as an unprivileged user: it sees only the system's"
                f" programs, Python and attnlib (read-only) and its own copy of the student's files; no network, no"
                f" variable of your environment outside the allow-list; {nbytes / 2**30:.1f} GiB of memory and {cpu} s of CPU per"
                f" process (PM_GRADE_MEMORY, PM_GRADE_CPU); {procs}; "
                + ("each kernel forked from a warm template that imported numpy, attnlib and matplotlib"
                   " (PM_GRADE_WARM=0: a new Python each)." if warm_wanted() else
                   "each kernel a new Python (PM_GRADE_WARM=0)."))
    if unsafe() and batch_use() and os.environ.get("PM_GRADE_UNSAFE", "").strip().lower() != UNCONFINED_BY_NAME:
        raise SystemExit(f"{why_not()}\nRefused: PM_GRADE_UNSAFE={os.environ['PM_GRADE_UNSAFE']} in batch use (CI is"
                         " set and stdin is not a terminal). Unattended, the unconfined mode must be asked for by"
                         f" name: PM_GRADE_UNSAFE={UNCONFINED_BY_NAME} ({UNCONFINED_MEANS}).")
    if unsafe():
        if announce:
            print(f"{unconfined_banner()}\n{why_not()}", file=sys.stderr)
        return (f"{unconfined_banner()} {nbytes / 2**30:.1f} GiB of memory and {cpu} s of CPU per process"
                " (PM_GRADE_MEMORY, PM_GRADE_CPU), as in the sandbox.")
    raise SystemExit(f"{why_not()}\nGrading refuses to run student code without the sandbox.")


# Where the student's files are inside the sandbox: a neutral path, so that nothing the kernel prints (its
# working folder, its home) shows where the grader keeps the course or the submissions.
SANDBOX_HOME = "/home/student"
# The user student code runs as when the grader is root: nobody's, which owns nothing on the host.
SANDBOX_UID = SANDBOX_GID = 65534

# The operating system's programs and libraries (read-only): Python and its compiled modules load from here.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc a kernel reads: the dynamic linker's cache, the time zone, fonts. Nothing else of it (no
# passwd of the host's users, no credentials, no configuration of other programs).
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "alternatives", "mime.types")

# The environment a kernel gets: these names and the LC_ prefix from the grader's, and the settings of
# :func:`kernel_settings`. Nothing else of the instructor's shell (an LMS token lives there).
ENV_NAMES = ("LANG", "LANGUAGE", "TZ", "TERM",
             "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",  # (OpenBLAS needs these on some CPUs)
             "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONUTF8", "JPY_PARENT_PID")
ENV_PREFIXES = ("LC_",)


def kernel_uid() -> tuple[int, int]:
    """(uid, gid) of student code: nobody's when the grader is root, else the grader's own.

    A grader that is not root runs bubblewrap in a user namespace of its own,
    where it has no power over the host's files that it did not have already.
    """
    return (SANDBOX_UID, SANDBOX_GID) if os.getuid() == 0 else (os.getuid(), os.getgid())


def kernel_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``env`` (default: this process's), with a ``PATH`` of the sandbox's own.

    >>> sorted(kernel_environment({"CANVAS_API_TOKEN": "x", "LANG": "C.UTF-8", "LC_ALL": "C"}))
    ['LANG', 'LC_ALL', 'PATH']
    """
    env = os.environ if env is None else env
    kept = {k: v for k, v in env.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    kept["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    return kept


def python_paths() -> list[Path]:
    """What the kernel needs of the host besides the system: the Python installation (the virtual
    environment and the interpreter it was made from) and attnlib's folder, each as named and as resolved."""
    import attnlib

    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.base_exec_prefix),
              Path(sys.executable).resolve().parent.parent, Path(attnlib.__file__).parent]
    paths = sorted({q for p in needed if p.exists() for q in (p.absolute(), p.resolve())})
    inside = [p for p in paths if any(p.is_relative_to(s) for s in SYSTEM_PATHS)]  # mounted with the system
    paths = [p for p in paths if p not in inside]
    return [p for p in paths if not any(p != q and p.is_relative_to(q) for q in paths)]


def root_argv(runtime: Path) -> list[str]:
    """bubblewrap's options that make the sandbox's root from nothing: the allow-list of what it sees.

    The system's folders and the Python installation read-only, a few files of
    /etc, a user table naming only the sandbox's user, a private /tmp, /dev and
    /proc of its own. Every folder made on the way is world-readable (bubblewrap
    makes them private to root, which the sandbox's user could not enter).
    """
    argv = ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    made: set[str] = {"/", "/tmp", "/dev", "/proc"}

    def folders(path: Path) -> list[str]:
        out = []
        for parent in reversed(path.parents):
            if str(parent) not in made and not any(parent.is_relative_to(s) for s in SYSTEM_PATHS):
                made.add(str(parent))
                out += ["--perms", "0755", "--dir", str(parent)]
        return out

    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += folders(Path("/etc/x"))
    for name in ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    uid, gid = kernel_uid()
    users = runtime / "users"
    users.mkdir(exist_ok=True)
    (users / "passwd").write_text(f"student:x:{uid}:{gid}:student:{SANDBOX_HOME}:/bin/sh\n")
    (users / "group").write_text(f"student:x:{gid}:\n")
    argv += ["--ro-bind", str(users / "passwd"), "/etc/passwd", "--ro-bind", str(users / "group"), "/etc/group"]
    for path in python_paths():
        argv += folders(path) + ["--ro-bind", str(path), str(path)]
    argv += folders(Path(SANDBOX_HOME))
    return argv


def as_student_argv() -> list[str]:
    """The command prefix that makes a kernel the sandbox's user (``setpriv``; none unless the grader is root)."""
    uid, gid = kernel_uid()
    if os.getuid() != 0 or not shutil.which("setpriv"):
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--bounding-set=-all",
            "--inh-caps=-all", "--no-new-privs", "--"]


def give_to_student(runtime: Path) -> None:
    """What the kernel writes, owned by the sandbox's user: its socket folder (``runtime`` itself), its
    connection file and FIFO, its working copy, probes and matplotlib cache; never the start-up file or
    the user table, which it reads through read-only mounts."""
    uid, gid = kernel_uid()
    if os.getuid() != 0 or uid == 0:
        return
    os.chown(runtime, uid, gid)
    for entry in runtime.iterdir():
        if entry.name in ("work", "probes", "matplotlib"):
            for folder, _, files in os.walk(entry):
                os.chown(folder, uid, gid)
                for name in files:
                    os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)
        elif entry.name in ("kernel.json", "alive"):
            os.chown(entry, uid, gid)


def probes_dir(runtime: Path) -> Path:
    """Where the kernel leaves the values its hidden tests probed (see pm_course/grading/hidden.py)."""
    folder = runtime / "probes"
    folder.mkdir(exist_ok=True)
    return folder


def graded_copy(work: Path, course: Path | None) -> tuple[str, str] | None:
    """(student, assignment) when ``work`` is nbgrader's folder for a graded notebook of the course folder
    ``course`` (None: no course, no graded notebook)."""
    if not course:
        return None
    try:
        student, assignment = work.resolve().relative_to(Path(course) / "autograded").parts[:2]
    except ValueError:
        return None
    return student, assignment


def scratch_for(work: Path, runtime: Path, course: Path | None = None) -> Path:
    """A private copy of what the student handed in, mounted where the kernel runs.

    nbgrader runs a notebook in its graded copy's folder, and that copy already
    holds the hidden tests (they are put back before the notebook runs): the
    kernel sees the student's own submitted files instead, and whatever it
    writes there is thrown away with the sandbox.
    """
    scratch = runtime / "work"
    graded = graded_copy(work, course)  # None: not a graded notebook (a test, say): an empty folder
    submitted = Path(course) / "submitted" / graded[0] / graded[1] if graded else None
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


def kernel_settings(runtime: Path, home: Path, ipython: str) -> dict[str, str]:
    """The environment of every grading kernel, sandboxed or unconfined: where it leaves its probes
    (:mod:`pm_course.grading.hidden`), its home (the student's files), matplotlib's backend and cache, one BLAS thread."""
    return {"IPYTHONDIR": ipython, "HOME": str(home), "OPENBLAS_NUM_THREADS": "1",
            "PM_PROBES": str(probes_dir(runtime)), "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(matplotlib_cache(runtime))}


def limit_argv() -> list[str]:
    """The command prefix that caps each kernel process: ``prlimit`` (memory, CPU seconds, no core, file size)."""
    nbytes, cpu = limits()
    return ["prlimit", f"--as={nbytes}", f"--cpu={cpu}", "--core=0", f"--fsize={nbytes}", "--"]


# the same limits as limit_argv's where prlimit is missing (the unconfined mode only: the sandbox needs prlimit)
_SETRLIMIT = ("import os, resource, sys\n"
              "for name, value in zip(('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_CORE', 'RLIMIT_FSIZE'), sys.argv[1:5]):\n"
              "    resource.setrlimit(getattr(resource, name), (int(value), int(value)))\n"
              "os.execvp(sys.argv[5], sys.argv[5:])\n")


def unconfined_limit_argv() -> list[str]:
    if shutil.which("prlimit"):
        return limit_argv()
    nbytes, cpu = limits()
    return [sys.executable, "-c", _SETRLIMIT, str(nbytes), str(cpu), "0", str(nbytes)]


def bwrap_argv(work: Path, runtime: Path, course: Path | None = None) -> list[str]:
    """The bubblewrap command line that confines a kernel: :func:`root_argv`'s allow-list, a private copy
    of the student's files at :data:`SANDBOX_HOME` (from nbgrader's folder ``work`` in the course folder
    ``course``), its socket folder
    ``runtime``; no network, its own process, IPC and host-name namespaces; the sandbox's user; the limits."""
    # bwrap found on the grader's PATH: the kernel's own (kernel_environment) is the sandbox's
    argv = [shutil.which("bwrap") or "bwrap", *root_argv(runtime)]
    startup = output_cap(runtime).parent
    argv += ["--bind", str(scratch_for(work, runtime, course)), SANDBOX_HOME, "--bind", str(runtime), str(runtime),
             "--ro-bind", str(startup), str(startup),
             "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox",
             "--die-with-parent",
             # ipykernel exits when its parent PID looks gone, and the grader's PID means nothing
             # in a new PID namespace: 1 tells it not to poll (the sandbox dies with the grader)
             "--setenv", "JPY_PARENT_PID", "1"]
    for name, value in kernel_settings(runtime, home=Path(SANDBOX_HOME), ipython="/tmp/ipython").items():
        argv += ["--setenv", name, value]
    return argv + ["--chdir", SANDBOX_HOME, *as_student_argv(), *limit_argv()]


def unconfined(work: Path, runtime: Path, course: Path | None = None) -> tuple[list[str], str, dict[str, str]]:
    """Without a sandbox: (the command prefix, the working folder, the environment added) for a kernel.

    The same as in the sandbox but for the confinement itself: the kernel runs
    in a private copy of the student's files (:func:`scratch_for`), with the
    same start-up file, limits and environment, and leaves its probes where the
    grader reads them. Only the namespaces and the hidden folders are missing.
    """
    output_cap(runtime)
    scratch = scratch_for(work, runtime, course)
    (runtime / "ipython").mkdir(exist_ok=True)
    return unconfined_limit_argv(), str(scratch), kernel_settings(runtime, home=scratch, ipython=str(runtime / "ipython"))


def warm_wanted() -> bool:
    """Whether kernels are forked from the warm template (``PM_GRADE_WARM=0``: a new Python each)."""
    return os.environ.get("PM_GRADE_WARM", "1").strip() not in ("0", "") and works()


class Template:
    """This process's warm template (:mod:`pm_course.sandbox.warm`): started on first use, one per process.

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
        # the kernels are forks of it, so their /proc/self/environ is its: the allow-list, as theirs
        env = dict(kernel_environment(), OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg", MPLCONFIGDIR=str(mpl),
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


def close_template() -> None:
    """Stop this process's warm template, if it has one (the next kernel starts another)."""
    template = Template._by_pid.pop(os.getpid(), None)
    if template:
        template.close()


import atexit  # noqa: E402

atexit.register(close_template)


# what went wrong with each kernel this process could not start (a sandbox that failed, a kernel that never
# answered): the machine's faults, read by pm_course.steps.grade after each notebook and never put on a student's row
FAULTS: list[str] = []


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
                self._not_started("Kernel died before replying to kernel_info")
        self._not_started(f"Kernel didn't respond in {timeout} seconds")

    def _not_started(self, why: str):
        """No student code has run yet: a kernel that is not ready is the machine's fault, never the student's."""
        if isinstance(self.parent, SandboxKernelManager):
            self.parent.fault(f"the kernel did not start ({why})")
        raise RuntimeError(why)


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run in :func:`bwrap_argv`'s sandbox.

    The kernel talks to the grader over Unix sockets in a private folder (TCP on
    loopback does not cross into a new network namespace).
    """

    # the course folder whose notebooks it runs (pm_course.state.course.configure): the student's files are copied
    # from it into the sandbox, and the probes are kept in it
    course_folder = traitlets.Unicode("", help="the course folder").tag(config=True)

    @traitlets.default("client_factory")
    def _client_factory_default(self):
        return SandboxKernelClient

    async def start_kernel(self, **kw):
        try:
            return await self._start_kernel(**kw)
        except Exception as err:
            self.fault(f"the sandbox or its kernel did not start ({type(err).__name__}: {err})")
            raise

    async def _start_kernel(self, **kw):
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
        self._kernel_pid = Template.get().fork({"sandbox_pid": pid, "alive": str(self._runtime / "alive"), "cwd": SANDBOX_HOME,
                             "env": {**self._env, **self._setenv}, "argv": self._kernel_args,
                             "memory": nbytes, "cpu": cpu, "cgroups": [str(g) for g in self._cgroups],
                             "user": kernel_uid()})

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        work = Path(self._launch_args.get("cwd") or os.getcwd())
        kernel = cmd + [f"--IPKernelApp.exec_files={self._runtime / 'startup' / 'output_cap.py'}"]
        if not works():
            check(announce=False)  # exits unless the unconfined mode was asked for
            argv, self._unconfined_cwd, self._unconfined_env = unconfined(work, self._runtime, self.course_folder or None)
            self._warm = False
            argv = argv + kernel
        else:
            argv = bwrap_argv(work, self._runtime, self.course_folder or None)
            self._warm = getattr(self, "_warm", False) and "ipykernel_launcher" in kernel
        self._cgroups = make_cgroup(self._runtime.name) + make_cpu_cgroup(self._runtime.name)
        if self._warm:
            # the sandbox holds a placeholder until the kernel forked into it ends (the FIFO's last
            # writer closes it); bubblewrap writes the placeholder's process ID to info.json
            self._kernel_args = kernel[kernel.index("ipykernel_launcher") + 1:]
            self._setenv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
            argv = [shutil.which("sh") or "sh", "-c", 'exec 3>"$0" && exec "$@"', str(self._runtime / "info.json"),
                    argv[0], "--info-fd", "3", *argv[1:], "cat", str(self._runtime / "alive")]
        elif works():
            argv = argv + kernel
        if self._cgroups:  # join the cgroups first, so that everything the sandbox starts is counted
            join = 'for g; do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs" || exit 97; shift; done; shift; exec "$@"'
            argv = [shutil.which("sh") or "sh", "-c", join, "sh", *map(str, self._cgroups), "--", *argv]
        return argv

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        # the kernel's environment is an allow-list: nothing else of the instructor's shell (an LMS token) reaches it
        kw["env"] = kernel_environment(kw.get("env") or os.environ)
        if getattr(self, "_unconfined_env", None) is not None:  # no sandbox: the same folder and settings, directly
            kw["cwd"], kw["env"] = self._unconfined_cwd, {**kw["env"], **self._unconfined_env}
        else:
            give_to_student(self._runtime)  # its sockets, connection file, working copy: the sandbox user's
        self._env = dict(kw["env"])  # what the kernel's process gets (bubblewrap's --setenv aside)
        # what bubblewrap (or the kernel, before it is ready) says when it fails: the reason of a machine fault
        if getattr(self, "_stderr", None):  # a restarted kernel's
            self._stderr.close()
        self._stderr = open(self._runtime / "kernel-stderr.txt", "wb+")  # noqa: SIM115 -- closed in cleanup
        kw["stderr"] = self._stderr
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    def said(self) -> str:
        """The last lines the sandbox (or the kernel, before it was ready) wrote to stderr."""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace")
        except (AttributeError, OSError, ValueError):
            return ""
        return " / ".join(line.strip() for line in text.strip().splitlines()[-3:])[-400:]

    def fault(self, what: str) -> None:
        """The kernel did not start: the machine's fault, recorded once in :data:`FAULTS` for the grader."""
        if getattr(self, "_fault", None) is None:
            said = self.said()
            self._fault = what + (f"; it said: {said}" if said else "")
            FAULTS.append(self._fault)

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
            graded = graded_copy(Path(self._launch_args.get("cwd") or "."), self.course_folder or None)
            if graded and (self._runtime / "probes").is_dir():  # kept for pm_course/grading/hidden.py; added to
                # what earlier kernels of the same notebook probed (a kernel made again after a cell was
                # stopped: pm_course/sandbox/cell_limits.py); the grader empties the folder before the notebook runs
                keep = Path(self.course_folder) / "probes" / graded[0] / graded[1]
                shutil.copytree(self._runtime / "probes", keep, dirs_exist_ok=True)
            if getattr(self, "_stderr", None):
                self._stderr.close()
            shutil.rmtree(self._runtime, ignore_errors=True)
            remove_cgroup(getattr(self, "_cgroups", []))
