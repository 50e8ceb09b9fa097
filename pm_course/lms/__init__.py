"""What Canvas and Moodle give and take: names in their downloads, rosters, gradebooks and worksheets.

=========================  ===================================================================
Canvas, Download           one flat zip: ``<lastfirst>_[LATE_]<user id>_<submission id>_<original>``,
Submissions                with ``-N`` before the extension when a name was uploaded again (older
                           Canvas writes ``late_``); every entry is dated when the zip was made, so
                           the mark is all it says of lateness (instructure/canvas-lms#2219)
Canvas gradebook           ``Student,ID,SIS User ID,SIS Login ID,Section,<Assignment> (<id>),...``
(export, and import)       and a ``Points Possible`` row; a column without ``(<id>)`` makes a new
                           assignment on import, values overwrite
Moodle, Download all       folders ``<Full name>_<participant id>_assignsubmission_file_/<original>``
submissions                (or, not in folders, ``<Full name>_<participant id>_assignsubmission_file_<original>``)
Canvas, anonymous grading  ``anon_<anonymous id>_<file id>_<original>``: no student named, refused
Moodle grading worksheet   ``Identifier`` ("Participant N"), ``Full name``, ``Email address``,
                           ``Status`` ("... - 1 day 2 hours late"), ``Grade``, ``Maximum Grade``,
                           ``Last modified (submission)`` (the real time), ... ``Feedback comments``;
                           graded with a scale: ``Scale`` (its items, comma-separated) in place of
                           ``Maximum Grade``, and only those items in ``Grade``
Canvas, a group            one entry per group: ``<group name>_[LATE_]<user id of the member who
assignment's download      handed it in>_<submission id>_<original>``
Canvas groups export       a row per student: ``name, canvas_user_id, user_id, login_id, sections,
                           group_name, canvas_group_id, group_id`` (:func:`read_groups`)
=========================  ===================================================================

A student of an LMS gets the course id ``<name>_<LMS id>`` (:func:`student_id`):
readable in the summary table, unique by the LMS's id, and safe as a folder name.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from pm_course.state.course import CourseError
from pm_course.state.submissions import is_test_student, slug  # noqa: F401 -- who a student is, below the LMSs

LMSS = ("canvas", "moodle")

# nbgrader's FileNameCollectorPlugin wants the groups student_id and file_id
CANVAS_NAME = (r"^(?P<last_first>[^/]+?)_(?:(?P<late>LATE|late)_)?(?P<student_id>\d+)_(?P<submission_id>\d+)_"
               r"(?P<file_id>[^/]+)$")
# what Canvas's download makes of a website URL or text entry submission: no submission id, no original name
CANVAS_ONLINE = (r"^(?P<last_first>[^/]+?)_(?:(?P<late>LATE|late)_)?(?P<student_id>\d+)_"
                 r"(?P<file_id>(?:link|text)\.html)$")
# in a folder per student (``..._file_/<original>``) or, "Download submissions in folders" unticked, flat
# (``..._file_<original>``): the participant id names the student either way
MOODLE_NAME = r"^(?P<full_name>[^/]+)_(?P<student_id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_/?(?P<file_id>.+)$"
# Canvas's download of an assignment graded anonymously: ``[LATE_]anon_<anonymous id>_<file id>_<original>``,
# no name and no user id (the anonymous id is in no gradebook export), so nothing says whose work a file is
CANVAS_ANONYMOUS = r"^(?:(?:LATE|late)_)?anon_(?P<anonymous_id>[A-Za-z0-9]+)_(?P<file_id>\d+)_(?P<original>[^/]+)$"
CANVAS_IDS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section")
CANVAS_TEST_STUDENT = "Student, Test"  # Canvas's "Student View" student, in every course (also "Test Student")
POINTS_POSSIBLE = "Points Possible"
MOODLE_ID = "Identifier"


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


DELIMITERS = (",", ";", "\t")  # Canvas writes semicolons where the user's locale asks for them


@dataclass
class Table:
    """An LMS's CSV as read: its columns, rows and the way to write it back alike."""

    path: Path
    columns: list[str]
    rows: list[dict]
    encoding: str = "utf-8"   # "utf-8-sig" when it came with a byte-order mark
    delimiter: str = ","
    lines: list[int] = field(default_factory=list)  # each row's line number in the file (the header is line 1)

    def where(self, i: int, column: str | None = None) -> str:
        """``file, row N[, column C]`` of row ``i``, for an error message."""
        return f"{self.path}, row {self.lines[i]}" + (f", column {column!r}" if column else "")


def _delimiter(header: str) -> str:
    """The delimiter that splits the header line into the most columns (comma on a tie)."""
    counts = {d: len(next(csv.reader([header], delimiter=d), [])) for d in DELIMITERS}
    return max(DELIMITERS, key=lambda d: (counts[d], d == ","))


def read_table(path: Path) -> Table:
    """An LMS's CSV: comma, semicolon or tab separated (sniffed), UTF-8 with or without a byte-order mark.

    Raises
    ------
    CourseError
        Naming the file (and the row and column) when it is missing, not
        UTF-8, has a column named twice, or a row with more or fewer fields
        than the header.
    """
    if not path.is_file():
        raise CourseError(f"{path}: no such file")
    raw = path.read_bytes()
    encoding = "utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as err:
        raise CourseError(f"{path}: not UTF-8 text ({err}); export it again from the LMS") from None
    if not text.strip():
        raise CourseError(f"{path}: empty; export it again from the LMS")
    delimiter = _delimiter(text.splitlines()[0])
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        columns = next(reader)
        twice = sorted({c for c in columns if columns.count(c) > 1 and c})
        if twice:
            raise CourseError(f"{path}, row 1: column(s) named twice: {twice}")
        table = Table(path, columns, [], encoding, delimiter)
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            if len(fields) != len(columns):
                what = (f"no value for column {columns[len(fields)]!r}" if len(fields) < len(columns)
                        else f"{len(fields) - len(columns)} field(s) past the last column {columns[-1]!r}")
                raise CourseError(f"{path}, row {reader.line_num}: {len(fields)} fields, but the header has"
                                  f" {len(columns)} columns ({what}); export it again from the LMS")
            table.rows.append(dict(zip(columns, fields)))
            table.lines.append(reader.line_num)
    except csv.Error as err:
        raise CourseError(f"{path}, row {reader.line_num}: not CSV ({err})") from None
    return table


def read_csv(path: Path) -> tuple[list[str], list[dict], str]:
    """(columns, rows, encoding) of an LMS's CSV (:func:`read_table`, for callers that need no more)."""
    table = read_table(path)
    return table.columns, table.rows, table.encoding


CANVAS_NEEDS = ("Student", "ID", "Section")
MOODLE_NEEDS = (MOODLE_ID, "Full name", "Grade")


def kind(columns: list[str], path: Path | str = "the file") -> str:
    """Which LMS exported a CSV with these ``columns``: "canvas" or "moodle" (else an error saying what is missing)."""
    have = set(columns)
    if set(CANVAS_NEEDS) <= have:
        return "canvas"
    if set(MOODLE_NEEDS) <= have:
        return "moodle"
    canvas, moodle = have & set(CANVAS_NEEDS), have & set(MOODLE_NEEDS)
    if canvas and len(canvas) >= len(moodle):
        lacks = [c for c in CANVAS_NEEDS if c not in have]
        raise CourseError(f"{path}: a Canvas gradebook without the column(s) {', '.join(map(repr, lacks))}: its"
                          f" columns are {columns[:8]}; export the gradebook again (Grades > Export)")
    if moodle:
        lacks = [c for c in MOODLE_NEEDS if c not in have]
        raise CourseError(f"{path}: a Moodle grading worksheet without the column(s) {', '.join(map(repr, lacks))}:"
                          f" its columns are {columns[:8]}; download the grading worksheet again")
    raise CourseError(f"{path}: neither a Canvas gradebook (Student, ID, ..., Section) nor a Moodle grading"
                      f" worksheet (Identifier, Full name, ..., Grade): its columns are {columns[:8]}")


def moodle_participant(identifier: str) -> str:
    """The number in a worksheet's ``Identifier`` ("Participant 12345" -> "12345")."""
    found = re.search(r"(\d+)\s*$", identifier or "")
    return found.group(1) if found else ""


def is_student_row(lms: str, row: dict) -> bool:
    """Whether a row of a gradebook is a student (not Canvas's ``Points Possible`` row or its test student)."""
    if lms == "canvas":
        return bool((row.get("ID") or "").strip()) and POINTS_POSSIBLE not in (row.get("Student") or "") \
            and not is_test_student(row.get("Student") or "")
    return bool(moodle_participant(row.get(MOODLE_ID, "")))


def _moodle_time(text: str) -> str:
    """A worksheet's "Last modified (submission)" ("-" when there is none: "")."""
    text = (text or "").strip()
    return "" if text in ("-", "") else text


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
    if kind(columns, path) != lms:
        raise CourseError(f"{path}: a {kind(columns).title()} file, but the submissions come from {lms.title()}")
    if lms == "canvas":
        return [Student(r["ID"].strip(), r["Student"].strip()) for r in rows if is_student_row(lms, r)]
    return [Student(moodle_participant(r[MOODLE_ID]), r["Full name"].strip(),
                    late="late" in r.get("Status", "").lower(), submitted=_moodle_time(r.get("Last modified (submission)", "")))
            for r in rows if is_student_row(lms, r)]


# --- Canvas group assignments -------------------------------------------------------------
GROUP_WORD = re.compile(r"group|team", re.I)  # Canvas names new groups "Project Group N"; instructors "Team 3"
CANVAS_GROUPS_COLUMNS = ("canvas_user_id", "group_name")  # Canvas's groups export (a group set's "Export")


@dataclass
class Groups:
    """Who is in which group: the group's name folded as Canvas names its files (:func:`slug`) -> its members."""

    path: Path
    names: dict[str, str] = field(default_factory=dict)            # slug -> the group's name as written
    members: dict[str, list[Student]] = field(default_factory=dict)  # slug -> its members (Canvas ids)

    def group_of(self, lms_id: str) -> str | None:
        return next((g for g, people in self.members.items() if any(p.lms_id == lms_id for p in people)), None)


def read_groups(path: Path, people: list[Student] | None = None) -> Groups:
    """The groups of a Canvas group set: Canvas's groups export, or a CSV of two columns ``group,student``.

    Canvas's export has a row per student (``name, canvas_user_id, user_id,
    login_id, sections, group_name, canvas_group_id, group_id``; a student in
    no group has no ``group_name``). In the two-column file a student is the
    course's id (``curiemarie_411``, as grades.csv has it), the Canvas user id,
    or the name as the roster (``people``) has it.

    Raises
    ------
    CourseError
        Naming the file, row and column: neither shape, a student not found,
        a student in two groups, two groups whose names fold alike.
    """
    table = read_table(path)
    columns = {c.strip().lower(): c for c in table.columns}
    groups = Groups(path)
    people = people or []
    by_name = {}
    for p in people:
        by_name.setdefault(slug(p.name), p)
        if "," in p.name:  # "Curie, Marie" is also written "Marie Curie"
            last, first = p.name.split(",", 1)
            by_name.setdefault(slug(f"{first} {last}"), p)
    if all(c in columns for c in CANVAS_GROUPS_COLUMNS):
        group_column, who_column = columns["group_name"], columns["canvas_user_id"]
    elif {"group", "student"} <= set(columns):
        group_column, who_column = columns["group"], columns["student"]
    else:
        raise CourseError(f"{path}: not a groups file: its columns are {table.columns[:8]}; expected Canvas's groups"
                          " export (People > Groups, the group set's menu > Export: name, canvas_user_id, ...,"
                          " group_name) or a CSV of two columns group,student")
    seen: dict[str, int] = {}
    for i, row in enumerate(table.rows):
        group, who = (row.get(group_column) or "").strip(), (row.get(who_column) or "").strip()
        if not group or not who:
            continue  # Canvas lists the students in no group with an empty group_name
        if who.isdigit():
            person = next((p for p in people if p.lms_id == who), None) or Student(who, (row.get(columns.get("name", ""))
                                                                                         or "").strip())
        elif re.fullmatch(r"[a-z0-9]+_\d+", who):  # the course's id: <name>_<Canvas id>
            lms_id = who.rsplit("_", 1)[1]
            person = next((p for p in people if p.lms_id == lms_id), None) or Student(lms_id, "")
        elif slug(who) in by_name:
            person = by_name[slug(who)]
        else:
            raise CourseError(f"{table.where(i, who_column)}: {who!r} is not a student: give the course id (as in"
                              " course/grades.csv, e.g. curiemarie_411), the Canvas user id, or the name as the"
                              " roster (--roster) has it")
        if person.lms_id in seen:
            raise CourseError(f"{table.where(i, who_column)}: {who!r} is in two groups (also on row"
                              f" {table.lines[seen[person.lms_id]]}): one group per student in a group set")
        seen[person.lms_id] = i
        key = slug(group)
        if key in groups.names and groups.names[key] != group:
            raise CourseError(f"{table.where(i, group_column)}: groups {groups.names[key]!r} and {group!r} are named"
                              " alike in Canvas's file names: rename one in Canvas")
        groups.names[key] = group
        groups.members.setdefault(key, []).append(person)
    if not groups.members:
        raise CourseError(f"{path}: no student in a group: export the group set again from Canvas")
    return groups


def looks_like_group(name_part: str, lms_id: str, people: list[Student]) -> bool:
    """Whether a Canvas file's name part (``projectgroup1``) names a group rather than its submitter.

    Not when the roster names that id so; when the name says group or team.

    >>> looks_like_group("projectgroup1", "411", []), looks_like_group("curiemarie", "411", [])
    (True, False)
    """
    on_roster = next((p for p in people if p.lms_id == lms_id), None)
    if on_roster is not None and slug(on_roster.name) == slug(name_part):
        return False
    return bool(GROUP_WORD.search(name_part))
