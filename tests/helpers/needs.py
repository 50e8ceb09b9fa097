"""What the reference tests need and may lack: PyTorch, the tokenizers package, the corpus wheel, bubblewrap.

A reference test compares attnlib or the grader with an independent implementation
(PyTorch's multi-head attention and autograd, the training script, the tokenizers
package) or needs the machine's sandbox. Where what it needs is missing it skips,
saying why (``pytest -rs`` lists the reasons), except under ``CI=true``: there it
fails, since ``make test`` installs the references (``make test-deps``, the test
extra of pyproject.toml) and a skip would mean the strongest checks did not run.
The browser tests do the same (``browser.required``).
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(reason: str) -> None:
    """Something a reference test uses is missing: under CI=true the test fails saying so."""
    if in_ci():
        pytest.fail(f"{reason}; under CI=true a reference test may not skip (make test-deps installs "
                    "what the reference tests need)", pytrace=False)


def skip(reason: str) -> None:
    """Skip this test (or, called at a module's top level, the module) saying why; fail under CI=true."""
    missing(reason)
    pytest.skip(reason, allow_module_level=True)


def module(name: str, reason: str) -> ModuleType:
    """``import name``, or skip saying why (``pytest.importorskip``), or fail under CI=true."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        skip(f"{reason} ({error})")
