"""The course folder as one state: one writer at a time, and files replaced whole.

Every command that writes the course folder holds :func:`lock` while it runs:
an exclusive ``fcntl`` lock on ``course/.lock`` (released by the kernel when
the process ends, however it ends), with ``course/.lock-holder`` saying which
command holds it, since when, and its process id. A second writer waits,
printing who holds the folder, or (``--no-wait``) refuses, naming them.
``status`` writes (it brings grades.csv up to date with reviews) only while
holding the lock; when another command holds it, it reads only.

Every file of the state is written by :func:`write_text` / :func:`write_bytes`:
to a temporary name beside it, flushed, then renamed over the old one, so an
interrupted command (Ctrl-C, a closed pipe, a killed process, a full disk)
leaves the old file or the new one, never half of one.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from pm_course.state.course import Course, CourseError


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` whole: a temporary file beside it, flushed, renamed over it.

    On any error (a full disk) the temporary file is removed and ``path`` is as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_text(path: Path, text: str, encoding: str = "utf-8") -> Path:
    """:func:`write_bytes` of ``text`` in ``encoding``."""
    return write_bytes(path, text.encode(encoding))


def holder(course: Course) -> str:
    """Who holds the course folder's lock, as :func:`lock` wrote it ("" when unknown)."""
    try:
        return course.holder.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


@contextlib.contextmanager
def lock(course: Course, command: str, wait: bool = True, poll: float = 0.2):
    """Hold the course folder's exclusive lock while the block runs.

    Parameters
    ----------
    course : Course
        The course whose folder it locks.
    command : str
        What holds it (``pm-course grade``), for the message a second writer reads.
    wait : bool
        Wait for the holder to finish (printing who it is), else refuse at once.

    Raises
    ------
    CourseError
        With ``wait=False``, when another command holds the lock (naming it).
    """
    course.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(course.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = holder(course) or "another pm-course command"
            if not wait:
                raise CourseError(f"the course folder {course.folder} is in use by {who}; nothing was changed. Run this"
                                  " again when it has finished (without --no-wait, it waits).") from None
            print(f"Waiting for the course folder {course.folder}: in use by {who} ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            print(f"... the course folder is free (waited {time.monotonic() - started:.0f} s).", file=sys.stderr,
                  flush=True)
        with contextlib.suppress(OSError):  # a full disk: the lock holds all the same, unnamed
            write_text(course.holder, f"{command} (process {os.getpid()}, since {datetime.now():%Y-%m-%d %H:%M:%S})\n")
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                course.holder.unlink()
    finally:
        os.close(fd)  # closing the descriptor releases the lock
