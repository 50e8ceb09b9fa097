"""The other end of :func:`pm.run`: runs ``python -m pm_course ARGS`` in a fork of one warm process.

Started by :func:`pm.run` with one end of a socket pair (its file descriptor is
the only argument). It imports the third-party modules pm-course's commands load
(nbgrader's API and apps, nbconvert, SQLAlchemy, the LMS clients: about 2.5 s of
CPU in every command), and nothing of pm_course itself, whose modules read the
environment (``PM_COURSE_DIR``) when imported. Then, for each request (one JSON
line: argv, env, cwd and the files for stdin, stdout and stderr), it forks; the
child takes the request's directory, environment and files and runs
``pm_course`` as ``__main__``, as ``python -m pm_course`` does, and ends as a
new interpreter would (:func:`finish`), with the command's exit status. The parent answers with the child's
pid, then with its exit status.
"""
from __future__ import annotations

import importlib
import json
import os
import socket
import sys

PRELOAD = ("nbgrader.api", "nbgrader.apps", "nbgrader.preprocessors", "nbconvert", "sqlalchemy", "jinja2",
           "canvasapi", "requests", "nbformat", "traitlets")


def _answer(channel, **message) -> None:
    channel.write(json.dumps(message).encode() + b"\n")
    channel.flush()


def serve(fd: int) -> dict | None:
    """Fork a child for each request; return the request in the child, None in the server when the client is gone."""
    sock = socket.socket(fileno=fd)
    channel = sock.makefile("rwb")
    for line in channel:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            channel.close()
            sock.close()
            return request
        _answer(channel, pid=pid)
        _, status = os.waitpid(pid, 0)
        _answer(channel, status=os.waitstatus_to_exitcode(status))
    return None


def become(request: dict) -> None:
    """This process as ``python -m pm_course`` started in the request's folder, environment and files."""
    import random
    import time

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()  # TZ is read once, when a Python starts
    random.seed()  # as a new Python's: not the server's state, shared by every fork
    for fd, (path, flags) in enumerate([(request["stdin"], os.O_RDONLY),
                                        (request["stdout"], os.O_WRONLY | os.O_TRUNC),
                                        (request["stderr"], os.O_WRONLY | os.O_TRUNC)]):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["-m", *request["argv"]]  # as python -m starts: runpy puts the module's path first
    sys.path[0] = os.getcwd()  # what -m puts first


def finish(command) -> None:
    """Run ``command``, then end this process as the interpreter ends: the exit status ``SystemExit`` gives
    (a message printed, as Python prints it), an uncaught exception's traceback and 1, non-daemon threads
    joined, ``atexit`` functions run, the standard streams flushed. The modules' teardown, which a new
    interpreter does not show either, is skipped (in a fork it would copy the server's memory page by page)."""
    import atexit
    import gc
    import threading

    try:
        command()
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    gc.collect()  # finalizers of what is left in reference cycles (open files among them)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


if __name__ == "__main__":
    import gc
    import runpy

    os.dup2(os.open(os.devnull, os.O_RDWR), 0)
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # what was imported stays out of the children's collections (and their copies of memory)
    request = serve(int(sys.argv[1]))
    if request is None:
        sys.exit(0)
    become(request)
    finish(lambda: runpy.run_module("pm_course", run_name="__main__", alter_sys=True))
