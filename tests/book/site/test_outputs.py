"""The outputs stored in every notebook are the ones the book build computed, cell by cell.

``make test`` builds the book executing every chapter and exercise afresh
(``PM_EXECUTE=force``: never from the execution cache ``make book`` keeps) and
keeps what it ran in ``_build/jupyter_execute/``. The stored outputs
are what a reader of a notebook, the course edition (which executes nothing) and
its PDF show, so they must be what the code computes today. This compares each
code cell's stored outputs with the build's, as ``pytest --nbval`` would compare
them with a run of its own (the same rules, the same sanitising patterns from
``tests/helpers/nbval_sanitize.cfg``, the same ``nbval-skip`` and
``nbval-ignore-output`` tags), without running every notebook a second time.
Images are not compared (nbval does not either), nor the PDF form of figures
that the book build adds for the PDF.

Needs a book built from the current sources (``make test`` builds it before this
file); skips without one, except under CI=true.
"""
from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import coalesce_streams, get_sanitize_patterns, transform_streams_for_comparison

ROOT = Path(__file__).resolve().parents[3]
EXECUTED = Path(os.environ.get("PM_EXECUTED", ROOT / "_build" / "jupyter_execute"))
SANITIZE = get_sanitize_patterns((ROOT / "tests" / "helpers" / "nbval_sanitize.cfg").read_text())
NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for pattern in ("chapters/*.ipynb", "exercises/*/*.ipynb")
                   for p in ROOT.glob(pattern))
# what nbval leaves out of a comparison (its defaults without --nbdime), and the PDF form of a figure
SKIPPED = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
           "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg", "application/pdf"}

pytestmark = [pytest.mark.book,
              pytest.mark.skipif(not EXECUTED.is_dir() and os.environ.get("CI") != "true",
                                 reason=f"no executed notebooks at {EXECUTED}: run `make book` first")]


def sanitize(value):
    if not isinstance(value, str):
        return value
    for regex, replace in SANITIZE:
        value = re.sub(regex, replace, value)
    return value


def flatten(outputs) -> dict[str, list]:
    """A cell's outputs as nbval compares them: each field and MIME type, with the values it takes in order."""
    flat = defaultdict(list)
    for output in transform_streams_for_comparison(coalesce_streams(nbformat.from_dict(outputs))):
        for key, value in output.items():
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIPPED:
                        flat[mime].append(sanitize(data))
            elif key not in SKIPPED:
                flat[key].append(sanitize(value))
    return dict(flat)


def differences(stored, executed) -> list[str]:
    """Where the stored notebook's outputs differ from the executed one's, cell by cell."""
    code = [[c for c in nb.cells if c.cell_type == "code"] for nb in (stored, executed)]
    if [c.source for c in code[0]] != [c.source for c in code[1]]:
        return ["its code is not the code the book executed: the build is older than the notebook (make book)"]
    found = []
    for n, (mine, theirs) in enumerate(zip(*code), start=1):
        tags = set(mine.metadata.get("tags", ()))
        if tags & {"nbval-skip", "nbval-ignore-output"}:
            continue
        if mine.execution_count is None:  # a cell stored unrun is not compared, and must show nothing
            found += [f"code cell {n} is stored unrun but has outputs"] if mine.outputs else []
            continue
        want, got = flatten(mine.outputs), flatten(theirs.outputs)
        if want != got:
            keys = sorted(set(want) | set(got))
            changed = next(k for k in keys if want.get(k) != got.get(k))
            found.append(f"code cell {n} ({mine.source.strip().splitlines()[0][:50]!r}): {changed} stored"
                         f" {str(want.get(changed))[:300]!r}, computed {str(got.get(changed))[:300]!r}")
    return found


def test_every_notebook_was_executed_by_the_build():
    missing = [nb for nb in NOTEBOOKS if not (EXECUTED / nb).is_file()]
    assert len(NOTEBOOKS) >= 20 and not missing, f"not executed by the book build: {missing}"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_stored_outputs_are_what_the_build_computed(notebook):
    stored = nbformat.read(ROOT / notebook, as_version=4)
    executed = nbformat.read(EXECUTED / notebook, as_version=4)
    found = differences(stored, executed)
    assert not found, (f"{notebook}: stored outputs differ from the book build's (rerun it and store its outputs:"
                       " make notebooks):\n  " + "\n  ".join(found))


def test_the_comparison_sees_a_changed_number_a_new_output_and_old_code():
    """The check itself, on a copy of a real notebook: one changed digit, one output more, one edited line."""
    notebook = next(nb for nb in NOTEBOOKS if nb.startswith("chapters/01"))
    stored = nbformat.read(ROOT / notebook, as_version=4)
    assert differences(stored, stored) == []
    cell = next(c for c in stored.cells if c.cell_type == "code" and any(
        o.output_type == "stream" and any(ch.isdigit() for ch in o.text) for o in c.outputs))
    executed = nbformat.from_dict(stored)  # a deep copy
    out = next(o for o in executed.cells[stored.cells.index(cell)].outputs if o.output_type == "stream")
    digit = next(ch for ch in out.text if ch.isdigit())
    out.text = out.text.replace(digit, str((int(digit) + 1) % 10), 1)
    assert len(differences(stored, executed)) == 1
    executed = nbformat.from_dict(stored)
    executed.cells[stored.cells.index(cell)].outputs.append(nbformat.v4.new_output("stream", text="more\n"))
    assert len(differences(stored, executed)) == 1
    executed = nbformat.from_dict(stored)
    executed.cells[stored.cells.index(cell)].source += "\n# edited"
    assert "older than the notebook" in differences(stored, executed)[0]
    # sanitised as nbval does: a memory address is not a difference
    executed = nbformat.from_dict(stored)
    stored_cell = nbformat.from_dict(stored)
    stored_cell.cells[stored.cells.index(cell)].outputs.append(nbformat.v4.new_output("stream", text="<at 0x7f3a>\n"))
    executed.cells[stored.cells.index(cell)].outputs.append(nbformat.v4.new_output("stream", text="<at 0x55e1>\n"))
    assert differences(stored_cell, executed) == []
