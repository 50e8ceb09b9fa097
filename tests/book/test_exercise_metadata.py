"""Every exercise part says how hard it is, how much it matters and how long it takes.

As ARENA's exercises do: each part heading ``## N.M Title (P points)`` is followed, in the
same markdown cell, by one line ``**Difficulty** d/5 · **Importance** i/5 · **Time** about
t min``, and the notebook's first cell gives the time in all (the parts' times added up).
Checked on every source notebook (a glob: a new exercise is covered when it is added) and on
the student version made from it (``make assignments`` / ``make exercises`` release the same).
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import pytest

from pm_course.student import student_version

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for p in ROOT.glob("exercises/*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)
PART = re.compile(r"^## (\d+)\.(\d+) \S")
LINE = re.compile(r"^\*\*Difficulty\*\* ([1-5])/5 · \*\*Importance\*\* ([1-5])/5 · \*\*Time\*\* about (\d+) min$")
TOTAL = re.compile(r"^\*\*Time in all\*\* about (\d+) min\b", re.M)
MINUTES = range(5, 121)   # a part takes at least 5 minutes and at most two hours


def parts(nb) -> list[tuple[str, str]]:
    """Each part heading of a notebook, with the first non-blank line after it in its cell."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            if PART.match(line):
                out.append((line, next((nxt for nxt in lines[i + 1:] if nxt.strip()), "")))
    return out


def problems(nb, number: int) -> list[str]:
    """What is missing or out of range in exercise ``number``'s metadata (empty if nothing)."""
    found = parts(nb)
    out = [] if found else ["no part heading '## N.M Title' at all"]
    minutes = 0
    for i, (heading, line) in enumerate(found, 1):
        if PART.match(heading).groups() != (str(number), str(i)):
            out.append(f"{heading!r} is not numbered {number}.{i}")
        m = LINE.match(line)
        if not m:
            out.append(f"{heading!r} is followed by {line!r}, not '**Difficulty** d/5 · **Importance** i/5 · "
                       "**Time** about t min'")
        elif int(m.group(3)) not in MINUTES:
            out.append(f"{heading!r}: {m.group(3)} min is outside {MINUTES.start}-{MINUTES.stop - 1} min")
        else:
            minutes += int(m.group(3))
    total = TOTAL.search(nb.cells[0].source) if nb.cells else None
    if not total:
        out.append("the first cell does not give the time in all ('**Time in all** about N min')")
    elif not out and int(total.group(1)) != minutes:
        out.append(f"the first cell says {total.group(1)} min in all, the parts add up to {minutes} min")
    return out


def number(path: Path) -> int:
    return int(path.parent.name.split("_")[0])


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_every_part_gives_difficulty_importance_and_time(path):
    assert problems(nbformat.read(path, as_version=4), number(path)) == []


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_the_student_version_keeps_them(path):
    source = nbformat.read(path, as_version=4)
    student = student_version(path)
    assert "### BEGIN SOLUTION" not in "".join(c.source for c in student.cells)   # a student version indeed
    assert parts(student) == parts(source)
    assert TOTAL.search(student.cells[0].source).group(0) == TOTAL.search(source.cells[0].source).group(0)


def test_the_check_finds_a_missing_line_a_wrong_value_and_a_wrong_total():
    """The check itself: each defect, made in a copy of exercise 1, is reported."""
    path = next(p for p in SOURCES if number(p) == 1)
    nb = nbformat.read(path, as_version=4)
    assert problems(nb, 1) == []

    def defect(old, new, count=1):
        broken = copy.deepcopy(nb)
        cell = next(c for c in broken.cells if old in c.source)
        cell.source = cell.source.replace(old, new, count)
        return problems(broken, 1)

    first_line = parts(nb)[0][1]
    assert any("is followed by" in p for p in defect(first_line, "Write the function."))
    assert any("is followed by" in p for p in defect(first_line, first_line.replace("/5", "/10", 1)))
    minutes = LINE.match(first_line).group(3)
    assert any("add up to" in p for p in defect(first_line, first_line.replace(f"about {minutes} min",
                                                                               f"about {int(minutes) + 5} min")))
    assert any("time in all" in p for p in defect("**Time in all**", "**Time**"))
