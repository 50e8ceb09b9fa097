"""``subprocess.run`` for the tests, with ``python -m pm_course ARGS`` run in a fork of a warm Python.

The course tests start a few hundred pm-course commands. Each new Python spent
about 2.5 s of CPU importing nbgrader, nbconvert and SQLAlchemy before the
command began: more than most commands' own work. :func:`run` takes the same
arguments as :func:`subprocess.run` and gives the same result; a command line
``[sys.executable, "-m", "pm_course", ...]`` is run by a server process
(``pm_server.py``, one per test process) that imported those modules once and
forks for each command. The fork is a whole process of its own: its own
folder, environment, files, exit status and interpreter exit; pm_course itself
is imported afresh in it. What only a new interpreter can do is left to one:
an environment that changes how Python starts (``PYTHONPATH`` and the rest of
``PYTHON*``), a second command while one runs, and every other command line.
"""
from __future__ import annotations

import json
import locale
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SERVER = Path(__file__).with_name("pm_server.py")
_lock = threading.Lock()
_server: dict = {}
forked = 0  # commands run in a fork of the server (tests/course/test_pm_helper.py counts them)


def _start() -> dict:
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, str(SERVER), str(theirs.fileno())], pass_fds=[theirs.fileno()],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None,
                            env={k: v for k, v in os.environ.items() if not k.startswith("PM_")})
    theirs.close()
    return {"proc": proc, "sock": ours, "channel": ours.makefile("rwb"), "env": dict(os.environ)}


def _python(env) -> dict:
    """What of ``env`` changes how a Python starts."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def run(cmd, *, env=None, cwd=None, capture_output=False, text=False, timeout=None, input=None, check=False,
        **kwargs) -> subprocess.CompletedProcess:
    """:func:`subprocess.run`, with pm-course's command lines run in a fork of the warm server."""
    if kwargs.get("stdin") == subprocess.DEVNULL and input is None:
        kwargs.pop("stdin")  # what the fork reads anyway: an empty file
    ours = [str(c) for c in cmd[:3]] == [sys.executable, "-m", "pm_course"] and not kwargs
    if ours and _lock.acquire(blocking=False):
        try:
            if not _server or _server["proc"].poll() is not None:
                _server.update(_start())
            if _python(env if env is not None else os.environ) == _python(_server["env"]):
                return _run(cmd, env, cwd, capture_output, text, timeout, input, check)
        finally:
            _lock.release()
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=capture_output, text=text, timeout=timeout,
                          input=input, check=check, **kwargs)


def _decode(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` gives them: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _run(cmd, env, cwd, capture_output, text, timeout, input, check) -> subprocess.CompletedProcess:
    global forked
    forked += 1
    with tempfile.TemporaryDirectory(prefix="pm-run-") as tmp:
        files = {name: Path(tmp, name) for name in ("stdin", "stdout", "stderr")}
        data = input.encode(locale.getpreferredencoding(False)) if isinstance(input, str) else (input or b"")
        files["stdin"].write_bytes(data)
        files["stdout"].touch()
        files["stderr"].touch()
        request = {"argv": [str(a) for a in cmd[3:]], "env": dict(env if env is not None else os.environ),
                   "cwd": str(cwd if cwd is not None else os.getcwd()),
                   **{name: str(path) for name, path in files.items()}}
        channel, sock = _server["channel"], _server["sock"]
        channel.write(json.dumps(request).encode() + b"\n")
        channel.flush()
        pid = json.loads(channel.readline())["pid"]
        sock.settimeout(timeout)
        try:
            status = json.loads(channel.readline())["status"]
            timed_out = False
        except (TimeoutError, socket.timeout):
            os.kill(pid, 9)
            sock.settimeout(None)
            channel = _server["channel"] = sock.makefile("rwb")  # a timed-out read leaves the old one unusable
            status = json.loads(channel.readline())["status"]
            timed_out = True
        finally:
            sock.settimeout(None)
        out, err = files["stdout"].read_bytes(), files["stderr"].read_bytes()
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
