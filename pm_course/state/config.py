"""The course file, ``course.toml``: what the LMS cannot tell the tool.

Read with :mod:`tomllib` from the repository's root (or ``pm-course --config
FILE``, or ``$PM_COURSE_CONFIG``), once, when a command starts: its
:class:`Settings` are the course's (:attr:`pm_course.state.course.Course.settings`).
``pm-course init`` writes a commented one. Every key is optional::

    timezone = "America/Chicago"            # due dates and the LMS's submission times are read in it
    late_penalty = 10                       # percent of the score per day late (any part of a day counts)
    [assignments.01_copying]
    due = 2025-03-03T23:59:00
    canvas = "01_copying (4401)"            # the gradebook column this assignment fills
    moodle = "Exercise 1: Copying"          # the Moodle assignment (its worksheet's file name says it)
    scale = ["Not yet competent", "Competent", "Excellent"]   # a Moodle scale's items, lowest first
    scale_thresholds = [0, 0.5, 0.85]       # the fraction of the points from which each item is given
    moodle_id = 77                          # its id in Moodle's web services (pm-course push)
    dropped = ["obrienzoe_102"]             # left the course: push no longer expects the LMS to list them
    [extensions.garciaeva_107]              # a student's own due dates (by the course's student id)
    04_noisy_keys = 2025-03-13T23:59:00
    [canvas]                                # where pm-course push sends grades (the token: $CANVAS_API_TOKEN)
    url = "https://canvas.example.edu"
    course = 1234                           # the course's id (its address: /courses/1234)
    unlisted = "other section"              # this Canvas course is one section's: the others are pushed apart
    [moodle]                                # the token: $MOODLE_TOKEN
    url = "https://moodle.example.edu"
    course = 12

``scale`` and ``scale_thresholds`` may also be set once for the whole course
(at the top); an assignment's own win.

A due date is a TOML date-time (``2025-03-03T23:59:00``, or with a UTC offset),
a string in the same form (``"2025-03-03 23:59"``), or a date alone (the end of
that day, 23:59:59). An unknown key, an unknown assignment, a bad date or a
bad time zone is an error that names it and the file.
"""
from __future__ import annotations

import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime, time, tzinfo
from pathlib import Path

from pm_course.state.course import ROOT, CourseError, assignment_names

FILE_NAME = "course.toml"
TOP_KEYS = ("timezone", "late_penalty", "scale", "scale_thresholds", "assignments", "extensions", "canvas",
            "moodle", "dropped")
ASSIGNMENT_KEYS = ("due", "canvas", "moodle", "moodle_id", "scale", "scale_thresholds")
LMS_KEYS = ("url", "course", "unlisted")
OTHER_SECTION = "other section"  # [canvas] unlisted = "other section": the course there is one section's


def given() -> Path | None:
    """The course file the environment names (``$PM_COURSE_CONFIG``), None when it names none."""
    name = os.environ.get("PM_COURSE_CONFIG")
    return Path(name).resolve() if name else None


def path(file: Path | None = None) -> Path:
    """The course file: ``file`` (``pm-course --config FILE``), else ``$PM_COURSE_CONFIG``, else ``course.toml`` at
    the root."""
    return Path(file).resolve() if file else given() or ROOT / FILE_NAME


@dataclass
class Assignment:
    """What the course file says of one assignment."""

    due: datetime | None = None
    canvas: str | None = None   # the Canvas gradebook's column, e.g. "Exercise 4: Noisy keys (4404)"
    moodle: str | None = None   # the Moodle assignment's name, as its grading worksheet's file name has it
    moodle_id: int | None = None  # the Moodle assignment's id in its web services (pm-course push)
    scale: "Scale | None" = None  # the LMS's scale this assignment is graded with (its items), when it has one

    @property
    def canvas_id(self) -> int | None:
        """The Canvas assignment's id: the number ending its gradebook column ("... (4404)"), if any."""
        found = re.search(r"\((\d+)\)\s*$", self.canvas or "")
        return int(found.group(1)) if found else None

    @property
    def canvas_name(self) -> str:
        """The Canvas assignment's name: its gradebook column without the id ("HW 3 (502)" -> "HW 3")."""
        return re.sub(r"\s*\(\d+\)\s*$", "", self.canvas or "").strip()


@dataclass
class Server:
    """An LMS's address and course (``[canvas]``, ``[moodle]``): where ``pm-course push`` sends grades."""

    url: str
    course: int
    # "other section": a student collected here whom this LMS course does not list is another section's
    # (taught in its own LMS course, with its own course file), not a student to add; "" otherwise
    unlisted: str = ""


@dataclass(frozen=True)
class Scale:
    """A grading scale's items (lowest first) and the fraction of the points from which each is given.

    >>> Scale(("Not yet competent", "Competent", "Excellent"), (0.0, 0.5, 0.85)).item(2.5, 3)
    'Competent'
    """

    items: tuple[str, ...]
    thresholds: tuple[float, ...]

    def item(self, points: float, most: float) -> str:
        """The item ``points`` of ``most`` earn: the highest whose threshold the fraction reaches."""
        fraction = points / most if most > 0 else 0.0
        chosen = self.items[0]
        for item, threshold in zip(self.items, self.thresholds):
            if fraction >= threshold - 1e-9:  # 0.85 of 20 points is 17, not 16.999...
                chosen = item
        return chosen

    def describe(self) -> str:
        """``Not yet competent (from 0%), Competent (from 50%), ...``"""
        return ", ".join(f"{i} (from {t * 100:g}%)" for i, t in zip(self.items, self.thresholds))


@dataclass
class Settings:
    """The course file, read and checked (:func:`load`); empty when there is none."""

    source: Path | None = None
    timezone: tzinfo | None = None
    late_penalty: float | None = None   # percent of the score per day late, for export and feedback alike
    scale: Scale | None = None          # the course-wide scale (an assignment's own wins)
    assignments: dict[str, Assignment] = field(default_factory=dict)
    extensions: dict[str, dict[str, datetime]] = field(default_factory=dict)
    servers: dict[str, Server] = field(default_factory=dict)  # "canvas", "moodle": the [canvas] and [moodle] tables
    dropped: tuple[str, ...] = ()  # students (course ids) who left the course: push no longer expects the LMS to list them

    def assignment(self, name: str) -> Assignment:
        """The settings of assignment ``name`` (all None when the file does not mention it)."""
        return self.assignments.get(name, Assignment())

    def scale_of(self, name: str) -> Scale | None:
        """The scale assignment ``name`` is graded with: its own, else the course's, else None."""
        return self.assignment(name).scale or self.scale

    def due(self, assignment: str, student: str | None = None) -> tuple[datetime | None, str]:
        """(due date, where it comes from) of ``assignment`` for ``student``: their extension, else the assignment's."""
        own = self.extensions.get(student or "", {}).get(assignment)
        if own is not None:
            return own, f"extension in {self.source.name}"
        due = self.assignment(assignment).due
        return due, (self.source.name if due is not None and self.source else "")

    def localize(self, when: datetime) -> datetime:
        """A naive time read in the course's time zone (unchanged without one, or when it has its own offset)."""
        if when.tzinfo is None and self.timezone is not None:
            return when.replace(tzinfo=self.timezone)
        return when


_WARNED: set[str] = set()


def _warn_once(text: str) -> None:
    """Print a warning of the course file on stderr, once per command."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"warning: {text}", file=sys.stderr)


def _local_zone() -> str:
    """The name of this machine's time zone (``$TZ``, ``/etc/timezone``, else its abbreviation)."""
    if os.environ.get("TZ"):
        return os.environ["TZ"]
    for source in (Path("/etc/timezone"),):
        if source.is_file() and source.read_text().strip():
            return source.read_text().strip()
    link = Path("/etc/localtime")
    if link.is_symlink() and "zoneinfo/" in str(link.resolve()):
        return str(link.resolve()).split("zoneinfo/", 1)[1]
    return datetime.now().astimezone().tzname() or "UTC"


def _timezone(value, where: str) -> tzinfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(value, str):
        raise CourseError(f"{where}: timezone = {value!r}: expected a name like \"America/Chicago\" or \"UTC\"")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise CourseError(f"{where}: timezone = {value!r} is not a time zone: expected a name like"
                          " \"America/Chicago\", \"Europe/Paris\" or \"UTC\"") from None


def parse_due(value, where: str, zone: tzinfo | None = None) -> datetime:
    """A due date from the course file or the command line, read in ``zone``; an error names ``where``.

    >>> parse_due("2025-03-03 23:59", "--due 01_copying")
    datetime.datetime(2025, 3, 3, 23, 59)
    >>> parse_due(date(2025, 3, 3), "due").time()
    datetime.time(23, 59, 59)
    """
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CourseError(f"{where} = {value!r} is not a date and time like 2025-03-03T23:59:00"
                              " or \"2025-03-03 23:59\"") from None
    if isinstance(value, datetime):
        pass
    elif isinstance(value, date):
        value = datetime.combine(value, time(23, 59, 59))  # a date alone: due by the end of that day
    else:
        raise CourseError(f"{where} = {value!r} is not a date and time like 2025-03-03T23:59:00")
    if value.tzinfo is None and zone is not None:
        value = value.replace(tzinfo=zone)
    return value


def _scale(table: dict, where: str) -> Scale | None:
    """The ``scale`` and ``scale_thresholds`` of a table of the course file (None when it sets neither)."""
    if "scale" not in table and "scale_thresholds" not in table:
        return None
    example = ('scale = ["Not yet competent", "Competent", "Excellent"] and scale_thresholds = [0, 0.5, 0.85]'
               " (the fraction of the points from which each item is given)")
    if "scale" not in table or "scale_thresholds" not in table:
        lacks = "scale" if "scale" not in table else "scale_thresholds"
        raise CourseError(f"{where}: {lacks} is missing: a scale needs its items and thresholds, e.g. {example}")
    items, thresholds = table["scale"], table["scale_thresholds"]
    if not isinstance(items, list) or len(items) < 2 or not all(isinstance(i, str) and i.strip() for i in items):
        raise CourseError(f"{where}: scale = {items!r}: expected the scale's items in quotes, lowest first (at least"
                          f" two), as the LMS names them, e.g. {example}")
    items = [i.strip() for i in items]
    twice = sorted({i for i in items if items.count(i) > 1})
    if twice:
        raise CourseError(f"{where}: scale names {', '.join(map(repr, twice))} twice")
    if any("," in i for i in items):
        raise CourseError(f"{where}: scale = {items!r}: an item with a comma (Moodle separates a scale's items with"
                          " commas: no item has one)")
    if (not isinstance(thresholds, list) or len(thresholds) != len(items)
            or not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in thresholds)):
        raise CourseError(f"{where}: scale_thresholds = {thresholds!r}: expected one number per item of scale"
                          f" ({len(items)}), the fraction of the points (0 to 1) from which each is given, e.g."
                          f" {example}")
    if thresholds[0] != 0 or any(not 0 <= t <= 1 for t in thresholds) \
            or any(b <= a for a, b in zip(thresholds, thresholds[1:])):
        raise CourseError(f"{where}: scale_thresholds = {thresholds!r}: expected fractions of the points from 0 to 1,"
                          " the first 0 (every score gets an item) and each larger than the one before, e.g."
                          " [0, 0.5, 0.85]")
    return Scale(tuple(items), tuple(float(t) for t in thresholds))


def _check_keys(table, allowed, where: str) -> None:
    if not isinstance(table, dict):
        raise CourseError(f"{where} must be a table ([{where.split(': ')[-1]}]), not {table!r}")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise CourseError(f"{where}: unknown key(s) {', '.join(unknown)}: expected {', '.join(allowed)}")


def _assignment(name: str, where: str, known: list[str]) -> str:
    if name not in known:
        raise CourseError(f"{where}: {name!r} is not an assignment: expected one of {', '.join(known)}")
    return name


def load(file: Path | None = None) -> Settings:
    """Read and check the course file ``file`` (default :func:`path`); empty :class:`Settings` when there is none.

    Raises
    ------
    CourseError
        When the file given with ``--config`` is missing, or the file is not
        TOML, or has an unknown key or assignment, a bad date or a bad time zone.
    """
    file = path(file)
    if not file.is_file():
        if file != ROOT / FILE_NAME:  # given (--config, $PM_COURSE_CONFIG): it must be there
            raise CourseError(f"--config {file}: no such file (pm-course init writes one)")
        return Settings()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise CourseError(f"{file}: not a TOML file: {err}") from None
    _check_keys(data, TOP_KEYS, str(file))
    known = assignment_names()
    config = Settings(source=file)
    if "timezone" in data:
        config.timezone = _timezone(data["timezone"], str(file))
    else:
        _warn_once(f"{file}: no timezone: due dates and submission times are read in this machine's time zone,"
                   f" {_local_zone()}; set timezone = \"America/Chicago\" (the course's own) to say which")
    if "late_penalty" in data:
        value = data["late_penalty"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
            raise CourseError(f"{file}: late_penalty = {value!r}: expected a percent of the score per day late,"
                              " 0 to 100 (e.g. late_penalty = 10)")
        config.late_penalty = float(value)
    config.scale = _scale(data, str(file))
    dropped = data.get("dropped", [])
    if not (isinstance(dropped, list) and all(isinstance(d, str) and d.strip() for d in dropped)):
        raise CourseError(f"{file}: dropped = {dropped!r}: expected a list of student ids as in course/grades.csv,"
                          " in quotes (e.g. dropped = [\"obrienzoe_102\"])")
    config.dropped = tuple(d.strip() for d in dropped)
    assignments = data.get("assignments", {})
    if not isinstance(assignments, dict):
        raise CourseError(f"{file}: assignments must be tables ([assignments.<name>]), not {assignments!r}")
    for name, table in assignments.items():
        where = f"{file}: [assignments.{name}]"
        _assignment(name, f"{file}: [assignments.{name}]", known)
        _check_keys(table, ASSIGNMENT_KEYS, where)
        for key in ("canvas", "moodle"):
            if key in table and not (isinstance(table[key], str) and table[key].strip()):
                raise CourseError(f"{where}: {key} = {table[key]!r}: expected the LMS's name for it, in quotes")
        moodle_id = table.get("moodle_id")
        if moodle_id is not None and (isinstance(moodle_id, bool) or not isinstance(moodle_id, int) or moodle_id < 1):
            raise CourseError(f"{where}: moodle_id = {moodle_id!r}: expected the assignment's id in Moodle, a whole"
                              " number (its address: /mod/assign/view.php?id=... is the course module's, not it;"
                              " pm-course push lists the course's assignments with their ids)")
        config.assignments[name] = Assignment(
            due=parse_due(table["due"], f"{where} due", config.timezone) if "due" in table else None,
            canvas=table.get("canvas", "").strip() or None, moodle=table.get("moodle", "").strip() or None,
            moodle_id=moodle_id, scale=_scale(table, where))
    for kind in ("canvas", "moodle"):
        if kind in data:
            config.servers[kind] = _server(data[kind], f"{file}: [{kind}]")
    columns = [a.canvas for a in config.assignments.values() if a.canvas]
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise CourseError(f"{file}: two assignments fill the same Canvas column: {', '.join(twice)}")
    extensions = data.get("extensions", {})
    if not isinstance(extensions, dict):
        raise CourseError(f"{file}: extensions must be tables ([extensions.<student id>]), not {extensions!r}")
    for student, table in extensions.items():
        where = f"{file}: [extensions.{student}]"
        if not isinstance(table, dict):
            raise CourseError(f"{where} must be a table of assignment = due date, not {table!r}")
        config.extensions[student] = {_assignment(a, where, known): parse_due(v, f"{where} {a}", config.timezone)
                                      for a, v in table.items()}
        for a, own in config.extensions[student].items():
            due = config.assignment(a).due
            try:
                earlier = due is not None and own < due
            except TypeError:  # one with a UTC offset, the other without
                earlier = due is not None and own.replace(tzinfo=None) < due.replace(tzinfo=None)
            if earlier:
                raise CourseError(f"{where}: {a} = {own:%Y-%m-%d %H:%M} is earlier than {a}'s due date"
                                  f" ({due:%Y-%m-%d %H:%M}): an extension gives more time; fix the date, or remove"
                                  " it")
    return config


def _server(table, where: str) -> Server:
    """A ``[canvas]`` or ``[moodle]`` table: the LMS's address and the course's id there (never a token)."""
    if not isinstance(table, dict):
        raise CourseError(f"{where} must be a table with url and course, not {table!r}")
    if any("token" in str(k).lower() for k in table):
        raise CourseError(f"{where}: a token does not belong in the course file (it is read by others, and kept in"
                          " git): set $CANVAS_API_TOKEN or $MOODLE_TOKEN, or pass --token-file; remove it here")
    _check_keys(table, LMS_KEYS, where)
    url, course = table.get("url"), table.get("course")
    if not (isinstance(url, str) and re.match(r"https?://[^/\s]+", url.strip())):
        raise CourseError(f"{where}: url = {url!r}: expected the LMS's address, e.g. url = \"https://canvas.example.edu\"")
    if isinstance(course, bool) or not isinstance(course, int) or course < 1:
        raise CourseError(f"{where}: course = {course!r}: expected the course's id, a whole number (in its"
                          " address: /courses/1234 on Canvas, /course/view.php?id=12 on Moodle)")
    unlisted = table.get("unlisted", "")
    if unlisted not in ("", OTHER_SECTION):
        raise CourseError(f"{where}: unlisted = {unlisted!r}: the one value is \"{OTHER_SECTION}\" (students this"
                          " LMS course does not list are another section's, pushed with that section's course file)")
    return Server(url.strip().rstrip("/"), course, unlisted)


def template(names: list[str] | None = None) -> str:
    """The commented course file ``pm-course init`` writes, one table per assignment."""
    names = assignment_names() if names is None else names
    lines = [
        "# The course file of pm-course: what the LMS cannot tell it. Every key is optional;",
        "# an unknown key or assignment is an error. (pm-course --help; guides/instructors.md: For instructors)",
        "",
        "# Due dates and the LMS's submission times are read in this time zone (a tz database name;",
        "# without one, this machine's, with a warning).",
        '# timezone = "America/Chicago"',
        "",
        "# The late policy of export and feedback alike: percent of the score per day late, any part of a",
        "# day counting as a day (--late-penalty overrides it for one run). For Canvas, prefer Canvas's own",
        "# Late Policy (Gradebook settings): its download has no submission times (guides/instructors.md).",
        "# late_penalty = 10",
        "",
        "# Students who left the course (their ids as in course/grades.csv): push no longer expects the LMS",
        "# to list them, and lists them plainly.",
        '# dropped = ["obrienzoe_102"]',
        "",
        "# One table per assignment:",
        "#   due     the deadline late penalties count from (a TOML date-time; a date alone is 23:59:59)",
        "#   canvas  the Canvas gradebook column it fills, exactly as in the gradebook export's header",
        "#           (default: the column named \"<assignment> (<id>)\"; else export refuses)",
        "#   moodle  the Moodle assignment's name, as in its grading worksheet's file name",
        "#   scale   a Moodle assignment graded with a scale: its items, lowest first, and the fraction of",
        "#           the points from which each is given (also at the top, for every assignment):",
        '#           scale = ["Not yet competent", "Competent", "Excellent"]',
        "#           scale_thresholds = [0, 0.5, 0.85]",
        "#   moodle_id  its id in Moodle's web services (for pm-course push --to moodle)",
        "",
        "# Where pm-course push sends grades and feedback (the tokens come from $CANVAS_API_TOKEN or",
        "# $MOODLE_TOKEN, or --token-file: never write one in this file):",
        "# [canvas]",
        "# url = \"https://canvas.example.edu\"",
        "# course = 1234",
        "# unlisted = \"other section\"   # this LMS course is one section's; the others have their own course files",
        "# [moodle]",
        "# url = \"https://moodle.example.edu\"",
        "# course = 12",
    ]
    for name in names:
        lines += ["", f"[assignments.{name}]", "# due = 2025-03-03T23:59:00", f'# canvas = "{name} (1234)"']
    lines += ["", "# A student's own due dates, by the course's student id (as in course/grades.csv):",
              "# [extensions.nunezjose_101]", f"# {names[0] if names else '01_copying'} = 2025-03-06T23:59:00", ""]
    return "\n".join(lines)


def init(file: Path | None = None) -> Path:
    """Write the commented course file (refusing to replace one); the path written."""
    file = path(file)
    if file.exists():
        raise CourseError(f"{file} exists already: edit it, or move it away to write a new one")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(template(), encoding="utf-8")
    load(file)  # what init writes must read back
    print(f"Course file: {file} (every key commented out: fill in the due dates and gradebook columns)")
    return file
