"""The book build's execution cache, keyed by what the notebooks' outputs depend on beyond their code.

``execute_notebooks: cache`` in ``_config.yml`` has MyST-NB keep each notebook's
outputs in a jupyter-cache database and execute only the notebooks whose code
cells changed since they were stored. That key knows nothing of ``attnlib``,
which every notebook calls, nor of the trained models it reads: an output made
by an older library would be reused. So the cache lives in a folder named by a
hash of everything else the outputs depend on (:func:`key`): ``attnlib``'s
source and its shipped models (``attnlib/models/``), the pinned environment
(``requirements.txt``), the Python version and the figure formats the kernels
make (``PM_FIGURE_FORMATS``). A change to any of them gives a new, empty folder
(the old ones are removed), and every notebook is executed afresh.

``PM_EXECUTE=force`` (as ``make test`` sets it) executes every notebook whatever
is cached, and stores nothing; ``PM_EXECUTE`` takes any of MyST-NB's modes
(``off``, ``force``, ``cache``, ``auto``, ``inline``). A book whose configuration
executes nothing (``off``: the course edition, ``pm-course book``) stays so.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
MODES = ("off", "force", "cache", "auto", "inline")


def key(root: Path = ROOT, environ=os.environ) -> str:
    """A hash of attnlib's files (source and models), requirements.txt, Python's version and the figure formats.

    >>> len(key()) == 16 and key() == key()
    True
    """
    h = hashlib.sha256()
    files = sorted(p for p in (root / "attnlib").rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for path in [*files, root / "requirements.txt"]:
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest() if path.exists() else b"missing")
    h.update(f"python {sys.version_info[:3]}; figures {environ.get('PM_FIGURE_FORMATS', '')}".encode())
    return h.hexdigest()[:16]


def _configure(app, config):
    mode = os.environ.get("PM_EXECUTE")
    if mode and config.nb_execution_mode != "off":
        if mode not in MODES:
            raise ValueError(f"PM_EXECUTE={mode!r}: MyST-NB's execution modes are {', '.join(MODES)}")
        config.nb_execution_mode = mode
    if config.nb_execution_mode != "cache" or config.nb_execution_cache_path:
        return
    caches = Path(app.outdir).parent / ".jupyter_cache"
    here = caches / key()
    if caches.is_dir():
        for old in caches.iterdir():  # made for an older attnlib, its models or environment
            if old != here:
                shutil.rmtree(old, ignore_errors=True)
    config.nb_execution_cache_path = str(here)
    logger.info(f"execution cache for this attnlib, its models and environment: {here}")


def setup(app):
    app.connect("config-inited", _configure, priority=900)  # after jupyter-book's own settings
    return {"parallel_read_safe": True, "parallel_write_safe": True}
