"""What Canvas and Moodle give and take: names in their downloads, rosters, gradebooks and worksheets.

=========================  ===================================================================
Canvas, Download           one flat zip: ``<lastfirst>_[LATE_]<user id>_<submission id>_<original>``,
Submissions                with ``-N`` before the extension when a name was uploaded again
Canvas gradebook           ``Student,ID,SIS User ID,SIS Login ID,Section,<Assignment> (<id>),...``
(export, and import)       and a ``Points Possible`` row; a column without ``(<id>)`` makes a new
                           assignment on import, values overwrite
Moodle, Download all       folders ``<Full name>_<participant id>_assignsubmission_file_/<original>``
submissions
Moodle grading worksheet   ``Identifier`` ("Participant N"), ``Full name``, ``Email address``,
                           ``Status``, ``Grade``, ``Maximum Grade``, ... ``Feedback comments``
=========================  ===================================================================

A student of an LMS gets the course id ``<name>_<LMS id>`` (:func:`student_id`):
readable in the summary table, unique by the LMS's id, and safe as a folder name.
"""
from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .course import CourseError

LMSS = ("canvas", "moodle")

# nbgrader's FileNameCollectorPlugin wants the groups student_id and file_id
CANVAS_NAME = (r"^(?P<last_first>[^/]+?)_(?:(?P<late>LATE)_)?(?P<student_id>\d+)_(?P<submission_id>\d+)_"
               r"(?P<file_id>[^/]+)$")
MOODLE_NAME = r"^(?P<full_name>[^/]+)_(?P<student_id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?/(?P<file_id>.+)$"
CANVAS_IDS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section")
CANVAS_TEST_STUDENT = "Student, Test"
POINTS_POSSIBLE = "Points Possible"
MOODLE_ID = "Identifier"


def slug(name: str) -> str:
    """A name folded to ASCII letters and digits, as Canvas writes ``lastfirst``.

    >>> slug("Núñez, José"), slug("Zoë O'Brien-Smith")
    ('nunezjose', 'zoeobriensmith')
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", folded.lower()) or "student"


def student_id(name: str, lms_id: str) -> str:
    """The course's id of an LMS's student: ``<slug of the name>_<LMS id>``.

    >>> student_id("José Núñez", "12345")
    'josenunez_12345'
    """
    return f"{slug(name)}_{lms_id}"


@dataclass
class Student:
    """One student of a roster."""

    lms_id: str
    name: str
    late: bool = False      # the worksheet's status says the work came late
    submitted: str = ""     # the worksheet's "Last modified (submission)"


def read_csv(path: Path) -> tuple[list[str], list[dict], str]:
    """(columns, rows, encoding) of an LMS's CSV; a byte-order mark is kept as the encoding to write back."""
    if not path.is_file():
        raise CourseError(f"{path}: no such file")
    raw = path.read_bytes()
    encoding = "utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as err:
        raise CourseError(f"{path}: not UTF-8 text ({err}); export it again from the LMS") from None
    reader = csv.DictReader(text.splitlines())
    columns = list(reader.fieldnames or [])
    return columns, list(reader), encoding


def kind(columns: list[str]) -> str:
    """Which LMS exported a CSV with these ``columns``: "canvas" or "moodle" (else an error saying what is missing)."""
    if {"Student", "ID", "Section"} <= set(columns):
        return "canvas"
    if {MOODLE_ID, "Full name", "Grade"} <= set(columns):
        return "moodle"
    raise CourseError(f"neither a Canvas gradebook (Student, ID, ..., Section) nor a Moodle grading worksheet"
                      f" (Identifier, Full name, ..., Grade): its columns are {columns[:8]}")


def moodle_participant(identifier: str) -> str:
    """The number in a worksheet's ``Identifier`` ("Participant 12345" -> "12345")."""
    found = re.search(r"(\d+)\s*$", identifier or "")
    return found.group(1) if found else ""


def is_student_row(lms: str, row: dict) -> bool:
    """Whether a row of a gradebook is a student (not Canvas's ``Points Possible`` row or its test student)."""
    if lms == "canvas":
        return bool(row.get("ID", "").strip()) and POINTS_POSSIBLE not in row.get("Student", "") \
            and row.get("Student", "").strip() != CANVAS_TEST_STUDENT
    return bool(moodle_participant(row.get(MOODLE_ID, "")))


def roster(path: Path, lms: str) -> list[Student]:
    """The students of a Canvas gradebook export or a Moodle grading worksheet.

    Parameters
    ----------
    path : Path
        The CSV the LMS exported.
    lms : {"canvas", "moodle"}
        The LMS the submissions came from: the roster must be that LMS's.

    Returns
    -------
    list of Student
        In the file's order; Canvas's test student and ``Points Possible`` row left out.
    """
    columns, rows, _ = read_csv(path)
    if kind(columns) != lms:
        raise CourseError(f"{path}: a {kind(columns).title()} file, but the submissions come from {lms.title()}")
    if lms == "canvas":
        return [Student(r["ID"].strip(), r["Student"].strip()) for r in rows if is_student_row(lms, r)]
    return [Student(moodle_participant(r[MOODLE_ID]), r["Full name"].strip(),
                    late="late" in r.get("Status", "").lower(), submitted=r.get("Last modified (submission)", ""))
            for r in rows if is_student_row(lms, r)]
