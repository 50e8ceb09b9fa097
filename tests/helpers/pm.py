"""``subprocess.run`` for the tests, with ``python -m pm_course ARGS`` run in this process.

The course tests start a few hundred pm-course commands, and a new Python spent
about 2.5 s of CPU importing nbgrader, nbconvert and SQLAlchemy before the
command began. As nbgrader's own tests run nbgrader (``run_nbgrader``), a
command line ``[sys.executable, "-m", "pm_course", ...]`` is run here by
:func:`pm_course.cli.main`: the course is an object the command makes from its
arguments and the environment it is given, so nothing of an earlier command is
left in the modules. :func:`run` takes :func:`subprocess.run`'s arguments and
gives its result: the environment, working folder and standard input are the
command's while it runs, its standard output and error (Python's and its child
processes') are captured at the file descriptors, ``SystemExit`` is its exit
status and an uncaught exception its traceback and status 1, and a timeout
raises :class:`subprocess.TimeoutExpired` in the command. Then the process is
put back as it was: environment, folder, time zone, streams, signal handlers,
logging handlers and warning filters (tests/course/test_pm_helper.py checks it).
What only a new interpreter can do is left to one: an environment that changes
how Python starts (``PYTHONPATH`` and the rest of ``PYTHON*``), a command run
from a thread other than the main one or while another runs, and every other
command line.
"""
from __future__ import annotations

import contextlib
import io
import locale
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings

_lock = threading.Lock()
here = 0  # commands run in this process (tests/course/test_pm_helper.py counts them)


def _python(env) -> dict:
    """What of ``env`` changes how a Python starts."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def run(cmd, *, env=None, cwd=None, capture_output=False, text=False, timeout=None, input=None, check=False,
        **kwargs) -> subprocess.CompletedProcess:
    """:func:`subprocess.run`, with pm-course's command lines run in this process by :func:`pm_course.cli.main`."""
    if kwargs.get("stdin") == subprocess.DEVNULL and input is None:
        kwargs.pop("stdin")  # what the command reads anyway: an empty file
    ours = [str(c) for c in cmd[:3]] == [sys.executable, "-m", "pm_course"] and not kwargs
    if (ours and threading.current_thread() is threading.main_thread()
            and _python(env if env is not None else os.environ) == _python(os.environ)
            and _lock.acquire(blocking=False)):
        try:
            return _run(cmd, env, cwd, capture_output, text, timeout, input, check)
        finally:
            _lock.release()
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=capture_output, text=text, timeout=timeout,
                          input=input, check=check, **kwargs)


def _decode(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` gives them: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


class _Timeout(BaseException):
    """Raised in the command when its time is up (a BaseException: no ``except Exception`` keeps it)."""


def _expire(signum, frame) -> None:
    """SIGALRM: the command's time is up. Raised where the command is, but for a finalizer or a weak reference's
    callback (where the interpreter would print the exception and carry on): there, again 10 ms later."""
    code = frame.f_code if frame is not None else None
    if code is not None and (code.co_name == "__del__" or code.co_filename.endswith(("weakref.py", "_weakrefset.py"))):
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    raise _Timeout


def _main(argv: list[str]) -> int:
    """``python -m pm_course ARGV``'s exit status, its messages written as the interpreter writes them."""
    from pm_course.cli import main

    try:
        main(argv)
        return 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return (stop.code or 0) & 0xFF
        print(stop.code, file=sys.stderr)
        return 1
    except _Timeout:
        raise
    except KeyboardInterrupt:
        traceback.print_exc()
        return -signal.SIGINT  # as a Python ended by Ctrl-C
    except BaseException:  # noqa: BLE001 -- an uncaught exception: its traceback, and status 1
        traceback.print_exc()
        return 1


def _loggers() -> list:
    return [logging.getLogger(), *(log for log in list(logging.Logger.manager.loggerDict.values())
                                   if isinstance(log, logging.Logger))]


@contextlib.contextmanager
def _as_found():
    """Put the process back as it was: environment, folder, time zone, streams, signal handlers, loggers' handlers
    and levels, warning filters, and the threads the command left running (joined, as an interpreter does)."""
    environ, cwd = dict(os.environ), os.getcwd()
    streams = sys.stdin, sys.stdout, sys.stderr
    handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if signal.getsignal(s) is not None}
    loggers = {log: (log.handlers[:], log.level, log.propagate, log.disabled) for log in _loggers()}
    threads = set(threading.enumerate())
    filters = warnings.filters[:]
    try:
        yield
    finally:
        for thread in set(threading.enumerate()) - threads:
            if not thread.daemon:
                thread.join(timeout=60)
        sys.stdin, sys.stdout, sys.stderr = streams
        for number, handler in handlers.items():
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)
        for log, (kept, level, propagate, disabled) in loggers.items():  # a logger made since is an import's
            log.handlers[:], log.level, log.propagate, log.disabled = kept, level, propagate, disabled
        warnings.filters[:] = filters
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        time.tzset()


def _run(cmd, env, cwd, capture_output, text, timeout, input, check) -> subprocess.CompletedProcess:
    global here
    here += 1
    with tempfile.TemporaryDirectory(prefix="pm-run-") as tmp, _as_found():
        paths = {name: os.path.join(tmp, name) for name in ("stdin", "stdout", "stderr")}
        data = input.encode(locale.getpreferredencoding(False)) if isinstance(input, str) else (input or b"")
        with open(paths["stdin"], "wb") as f:
            f.write(data)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        saved = [os.dup(fd) for fd in (0, 1, 2)]
        opened = [os.open(paths["stdin"], os.O_RDONLY),
                  os.open(paths["stdout"], os.O_WRONLY | os.O_CREAT | os.O_APPEND),
                  os.open(paths["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)]
        timed_out = False
        environ = dict(env if env is not None else os.environ)  # the command's: given, else this process's
        try:
            for fd, source in enumerate(opened):
                os.dup2(source, fd)
            # Python's streams over the descriptors, as a new interpreter has them (what child processes inherit)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True,
                                          errors="backslashreplace")
            os.environ.clear()
            os.environ.update(environ)
            time.tzset()  # TZ as the command's environment says
            if cwd is not None:
                os.chdir(cwd)
            if timeout is not None:
                signal.signal(signal.SIGALRM, _expire)
                signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                status = _main([str(a) for a in cmd[3:]])
            except _Timeout:
                status, timed_out = -signal.SIGKILL, True
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
        finally:
            for fd, old in enumerate(saved):
                os.dup2(old, fd)
                os.close(old)
            for fd in opened:
                os.close(fd)
        with open(paths["stdout"], "rb") as f:
            out = f.read()
        with open(paths["stderr"], "rb") as f:
            err = f.read()
    if text:
        out, err = _decode(out), _decode(err)
    if not capture_output:
        (sys.stdout.write if text else sys.stdout.buffer.write)(out)
        (sys.stderr.write if text else sys.stderr.buffer.write)(err)
        out = err = None
    if timed_out:
        raise subprocess.TimeoutExpired(cmd, timeout, out, err)
    done = subprocess.CompletedProcess(cmd, status, out, err)
    if check:
        done.check_returncode()
    return done

