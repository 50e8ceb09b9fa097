"""``course/grades.csv``: the table every step reads and writes, one row per student and assignment.

``grade`` writes it; ``review``, ``export`` and ``feedback`` read it. It lives here, apart
from grading, so that what reads it never imports the grader.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from pm_course.state.course import CourseError
from pm_course.state.files import write_text

COLUMNS = ("student_id", "assignment", "status", "reason", "score", "max_score",
           "late", "submitted", "name", "lms", "lms_id")
COLUMNS += ("written_score", "written_max", "awaiting_review")  # the written answers (pm_course/steps/review.py)


def read_grades(path: Path) -> dict[tuple[str, str], dict]:
    """grades.csv's rows (``path``: :attr:`pm_course.state.course.Course.grades`) by (student, assignment) ({} when
    there is none)."""
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(r["student_id"], r["assignment"]): {c: r.get(c) or "" for c in COLUMNS} for r in csv.DictReader(f)}


def entries(path: Path) -> list:
    """grades.csv as :class:`pm_course.state.submissions.Entry` (scores as numbers), Canvas's test student left out.

    Raises
    ------
    CourseError
        When nothing was graded yet.
    """
    from pm_course.state.submissions import is_test_student
    from pm_course.state.submissions import Entry

    if not path.is_file():
        raise CourseError(f"no grades yet ({path} is missing): run pm-course grade first")
    found = []
    for row in read_grades(path).values():
        entry = Entry(row["student_id"], row["assignment"], status=row["status"], reason=row["reason"],
                      name=row.get("name", ""), lms=row.get("lms", ""), lms_id=row.get("lms_id", ""),
                      late=row.get("late") == "late", submitted=row.get("submitted", ""),
                      written_score=row.get("written_score") or "", written_max=row.get("written_max") or "",
                      awaiting_review=row.get("awaiting_review") or "")
        entry.score = float(row["score"]) if row["score"] else None
        entry.max_score = float(row["max_score"]) if row.get("max_score") else None
        if not is_test_student(entry.name):
            found.append(entry)
    return found


def write_grades(rows: dict, out: Path) -> None:
    """Write grades.csv whole (:func:`pm_course.state.files.write_text`): :data:`COLUMNS`, sorted by student and assignment."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows[k] for k in sorted(rows))
    write_text(out, buffer.getvalue())
