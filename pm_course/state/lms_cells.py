"""What pm-course exported to each LMS cell, so that a value the LMS holds of its own is never overwritten.

``course/export/exported.json`` keeps, for each gradebook cell (Canvas: user id
and the assignment's id, never the column's name, which can be renamed in
Canvas; Moodle: participant and assignment), every value pm-course has
exported to it. An export then keeps (and lists) what the LMS has that is not
pm-course's:

- a cell that is not a number (Canvas's ``EX``, excused; ``incomplete``,
  ``complete``, a letter grade): the LMS's own mark;
- a number pm-course never exported there: the instructor changed it in the
  LMS (SpeedGrader, Moodle's grader) since, and their fix stands unless the
  export is asked for ``--overwrite-lms-edits``.

An empty cell, or one holding a value pm-course exported, is pm-course's to fill.
"""
from __future__ import annotations

import json
import re

from pm_course.state.course import Course
from pm_course.state.files import write_text

BLANK = ("", "-")  # Moodle writes "-" for no grade


def number(text) -> float | None:
    """A number as a gradebook or an LMS writes it ("8", "8.0", "8,5" where commas are decimal points); None if not
    one.

    >>> number("8,5"), number(" 7 "), number("EX")
    (8.5, 7.0, None)
    """
    try:
        return float(str(text).strip().replace(",", "."))
    except ValueError:
        return None


def canvas_key(user_id: str, column: str) -> str:
    """A Canvas cell's key: the user's id and the assignment's id (the number ending its column, ``<name> (<id>)``).

    >>> canvas_key("101", "03_subspace (502)") == canvas_key("101", "Exercise 3: Subspaces (502)")
    True
    """
    found = re.search(r"\((\d+)\)\s*$", column or "")
    return f"{user_id}|#{found.group(1)}" if found else f"{user_id}|{column}"


def load(course: Course) -> dict[str, dict[str, list[str]]]:
    """The record: LMS -> cell -> the values exported to it ({} before the first export).

    Canvas cells recorded by a column's name (as earlier versions did) are read by the assignment's id.
    """
    try:
        record = json.loads(course.exported.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    canvas: dict[str, list[str]] = {}
    for key, values in record.get("canvas", {}).items():
        user, _, column = key.partition("|")
        merged = canvas.setdefault(canvas_key(user, column) if not column.startswith("#") else key, [])
        merged += [v for v in values if v not in merged]
    if canvas:
        record["canvas"] = canvas
    return record


class Guard:
    """Decide cell by cell what an export writes, keeping the LMS's own values; :meth:`save` records the export."""

    def __init__(self, course: Course, lms: str, overwrite_edits: bool = False):
        self.course, self.lms, self.overwrite = course, lms, overwrite_edits
        self.record = load(course)
        self.mine = self.record.setdefault(lms, {})
        self.kept_marks: list[str] = []
        self.kept_edits: list[str] = []
        self.overwritten: list[str] = []
        self.deducted: list[str] = []

    def cell(self, key: str, who: str, current: str, ours: str, items: tuple[str, ...] = (),
             late_policy: bool = False) -> str:
        """The value to write in cell ``key`` (``who`` names it in a message): the LMS's ``current`` or ``ours``.

        ``items``: the cell holds a scale's items, not numbers (a Moodle scale): an item pm-course exported
        there is its own to replace; another is the instructor's, kept as a number changed in the LMS is.
        """
        current = (current or "").strip()
        if not ours:  # nothing of pm-course's: the LMS keeps what it has
            return current
        if current in BLANK:
            return self._ours(key, ours)
        if items and current in items:
            if current == ours or current in self.mine.get(key, []):
                return self._ours(key, ours)
            what = f"{who}: {current!r} in the LMS (not exported by pm-course), pm-course's {ours!r}"
            if self.overwrite:
                self.overwritten.append(what)
                return self._ours(key, ours)
            self.kept_edits.append(what)
            return current
        now = number(current)
        if now is None:
            self.kept_marks.append(f"{who}: {current!r}")
            return current
        exported = [number(v) for v in self.mine.get(key, [])]
        if any(v is not None and abs(v - now) < 0.005 for v in exported) or abs((number(ours) or 0) - now) < 0.005:
            return self._ours(key, ours)
        last = exported[-1] if exported else None
        if late_policy and last is not None and 0 <= now < last - 0.005:
            # Canvas's Late Policy shows the grade written less its deduction (its gradebook file has no other):
            # what pm-course exported, deducted by Canvas, which deducts again from what is imported now
            self.deducted.append(f"{who}: {current} in Canvas is pm-course's {self.mine[key][-1]} less Canvas's"
                                 f" late deduction; pm-course's {ours} goes in (Canvas deducts from it again)")
            return self._ours(key, ours)
        what = f"{who}: {current} in the LMS" + (f" (pm-course exported {self.mine[key][-1]})" if exported else
                                                  " (not exported by pm-course)") + f", pm-course's {ours}"
        if self.overwrite:
            self.overwritten.append(what)
            return self._ours(key, ours)
        self.kept_edits.append(what)
        return current

    def _ours(self, key: str, ours: str) -> str:
        if ours not in self.mine.setdefault(key, []):
            self.mine[key].append(ours)
        return ours

    def save(self) -> None:
        """Record what was exported; print what was kept as the LMS has it."""
        write_text(self.course.exported, json.dumps(self.record, indent=1, sort_keys=True) + "\n")
        if self.kept_marks:
            print(f"Kept as the LMS has them (not numbers: excused, complete, ...): {len(self.kept_marks)} cell(s):")
            print("\n".join(f"  {w}" for w in self.kept_marks))
        if self.kept_edits:
            print(f"Kept: changed in the LMS since pm-course's last export ({len(self.kept_edits)} cell(s);"
                  " --overwrite-lms-edits replaces them):")
            print("\n".join(f"  {w}" for w in self.kept_edits))
        if self.deducted:
            print(f"Taken as Canvas's Late Policy at work ({len(self.deducted)} late cell(s) below what pm-course"
                  " exported; a hand edit below it cannot be told from the deduction in a gradebook file: pm-course"
                  " push reads what was entered and can):")
            print("\n".join(f"  {w}" for w in self.deducted))
        if self.overwritten:
            print(f"Replaced (--overwrite-lms-edits): {len(self.overwritten)} cell(s) changed in the LMS:")
            print("\n".join(f"  {w}" for w in self.overwritten))
