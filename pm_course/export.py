"""Grades and feedback out, as an LMS takes them back (``pm-course export``, ``pm-course feedback``).

- ``export --to canvas GRADEBOOK.csv``: Canvas's gradebook import, made from
  its own export: the template's identity columns (``Student, ID, SIS User ID,
  SIS Login ID, Section``), then one column per assignment (the column the
  course file names, else the template's own ``<assignment> (<id>)``, so the
  values overwrite; an assignment with neither is refused, unless
  ``--new-columns`` asks for the bare name, which makes a new assignment) with
  the score on the gradebook's Points Possible, its ``Points Possible`` row,
  and one row per student of the template (Canvas's test student left out).
- ``export --to moodle WORKSHEET.csv``: the offline grading worksheet, every
  column and row as it came, with Grade (on its Maximum Grade) and Feedback
  comments filled in; a worksheet whose file name names another assignment
  than ``--assignment`` is refused. A worksheet graded with a scale (a
  ``Scale`` column) gets the scale's items, mapped from the points by the
  course file's ``scale`` and ``scale_thresholds``, or is refused, naming its
  items (:func:`_worksheet_scale`).
- ``export --to csv``: grades.csv with the late policy's columns.

Where the LMS's points differ from the assignment's, scores are rescaled and
each rescaling printed (``--no-rescale`` refuses). The LMS's files are read
comma or semicolon separated and written back alike; a missing column or a bad
row stops the export naming the file, the row and the column.

A score is left empty where there is none (not submitted, could not be graded):
the LMS keeps what it had. Late work is marked; a late penalty (the course
file's ``late_penalty``, or ``--late-penalty PERCENT_PER_DAY`` for one run;
none by default) is applied to the score exported and stated on the feedback
page alike, counted from each assignment's own due date and each student's
extension and the LMS's real submission time (:class:`Late`), and every
penalty is printed and written beside the score, never applied silently. A
penalty that cannot be computed (a Canvas download has no submission times)
is refused, naming the students.
"""
from __future__ import annotations

import csv
import io
import math
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from html import escape as html_escape
from pathlib import Path

from . import exported, fingerprints, lms, state, submissions
from .config import Settings
from .course import Course, CourseError, assignment_names, expected_notebooks, max_points
from .grades import entries as grades
from .grades import read_grades
from .pages import CSP, is_test_student, remove_stale
from .submissions import GRADED, MISSING
TARGETS = ("canvas", "moodle", "csv")


MOODLE_TIME = "%A, %d %B %Y, %I:%M %p"  # a worksheet's "Last modified (submission)": "Sunday, 2 March 2025, 2:00 PM"


def submitted_at(text: str) -> datetime | None:
    """When an entry was submitted, from the zip's time (ISO) or Moodle's worksheet; None when unreadable."""
    for parse in (datetime.fromisoformat, lambda t: datetime.strptime(t, MOODLE_TIME)):
        try:
            return parse(text.strip())
        except ValueError:
            continue
    return None


LMS_NAMES = {"canvas": "Canvas", "moodle": "Moodle", "": "the folder"}
CANVAS_LATE_POLICY = ("Canvas's own Late Policy (Gradebook > Settings > Late Policies) applies the penalty from the"
                      " real submission times when the imported grades are saved")


def read_times(path: Path) -> dict[tuple[str, str], datetime]:
    """Real submission times from a CSV of ``student, assignment, submitted_at`` (``--times FILE``).

    ``student`` is the course's id (``nunezjose_101``) or the LMS's (``101``); ``submitted_at`` an
    ISO date and time (``2025-03-05 10:00``, read in the course's time zone unless it has an offset).

    Raises
    ------
    CourseError
        Naming the row and column of a missing column, an unknown assignment or a bad time.
    """
    table = lms.read_table(path)
    need = ("student", "assignment", "submitted_at")
    lacks = [c for c in need if c not in table.columns]
    if lacks:
        raise CourseError(f"{path}: no column(s) {', '.join(lacks)}: --times needs the columns {', '.join(need)}"
                          f" (its columns are {table.columns[:6]})")
    known = assignment_names()
    times = {}
    for i, row in enumerate(table.rows):
        if row["assignment"].strip() not in known:
            raise CourseError(f"{table.where(i, 'assignment')}: {row['assignment']!r} is not an assignment:"
                              f" expected one of {', '.join(known)}")
        try:
            when = datetime.fromisoformat(row["submitted_at"].strip())
        except ValueError:
            raise CourseError(f"{table.where(i, 'submitted_at')}: {row['submitted_at']!r} is not a date and time"
                              " like 2025-03-05 10:00") from None
        times[(row["student"].strip(), row["assignment"].strip())] = when
    return times


@dataclass
class Late:
    """The late policy: ``percent`` of the score per day late (None: no penalty).

    One policy for export and feedback alike: the course file's top-level
    ``late_penalty`` (``--late-penalty`` overrides it for one run). Days late
    count from each assignment's own due date: ``dues`` (``--due
    A=DATETIME``, for one run) or the course file's, and a student's extension
    in the course file beats both; any part of a day counts as a day. The
    submission time is the LMS's real one (Moodle's worksheet, or ``times``
    from ``--times FILE``), never a zip entry's date. Work marked late with no
    real time (a Canvas download) is marked late, and a penalty for it is
    refused (:meth:`check`). Naive times are read in the course file's time zone.
    """

    percent: float | None = None
    dues: dict[str, datetime] = field(default_factory=dict)
    config: Settings = field(default_factory=Settings)
    times: dict[tuple[str, str], datetime] = field(default_factory=dict)
    origin: str = "--late-penalty"

    @classmethod
    def of(cls, config: Settings | None, percent: float | None = None, dues: list[tuple[str, datetime]] | None = None,
           times: Path | None = None) -> Late:
        """The policy of the command line (``--late-penalty``, ``--due A=DATETIME`` pairs, ``--times FILE``)
        and the course file ``config`` (``late_penalty``, due dates, extensions; None: none)."""
        config = config or Settings()
        known = assignment_names()
        given: dict[str, datetime] = {}
        for name, when in dues or []:
            if name not in known:
                raise CourseError(f"--due {name}=...: {name!r} is not an assignment: expected one of {', '.join(known)}")
            if name in given:
                raise CourseError(f"--due {name}=... given twice")
            given[name] = config.localize(when)
        origin = "--late-penalty"
        if percent is None and config.late_penalty is not None:
            percent, origin = config.late_penalty, f"late_penalty in {config.source.name}"
        return cls(percent, given, config, read_times(times) if times else {}, origin)

    def due(self, entry) -> tuple[datetime | None, str]:
        """(due date, where it comes from) for one entry: the student's extension, ``--due``, the course file."""
        own = self.config.extensions.get(entry.student, {}).get(entry.assignment)
        if own is not None:
            return own, "extension"
        if entry.assignment in self.dues:
            return self.dues[entry.assignment], "--due"
        return self.config.due(entry.assignment)

    def when(self, entry) -> datetime | None:
        """The real submission time of an entry: ``--times``, else the LMS's (Moodle's worksheet); None if unknown."""
        given = self.times.get((entry.student, entry.assignment)) or self.times.get((entry.lms_id, entry.assignment))
        if given is None and entry.submitted:
            given = submitted_at(entry.submitted)
        return None if given is None else self.config.localize(given)

    def days(self, entry) -> tuple[int | None, str]:
        """(days late, how they were counted) for one graded entry; None days: late, but by how much is unknown."""
        due, _ = self.due(entry)
        when = self.when(entry)
        if due is not None and when is not None:
            if (when.tzinfo is None) != (due.tzinfo is None):  # one with an offset, no time zone for the other
                when = when.replace(tzinfo=due.tzinfo)
            days = math.ceil((when - due).total_seconds() / 86400)
            if days > 0:
                return days, f"submitted {when:%Y-%m-%d %H:%M}, due {due:%Y-%m-%d %H:%M}"
            return 0, ""
        if not entry.late:
            return 0, ""
        where = LMS_NAMES.get(entry.lms, entry.lms)
        if when is None:
            return None, f"marked late by {where}, which gave no submission time"
        return None, f"marked late by {where}; no due date for {entry.assignment}"

    def apply(self, entry) -> tuple[float | None, str]:
        """(score after the penalty, a note saying what was done; "" when on time).

        Late work whose days cannot be counted is never penalised here (:meth:`check` refuses a penalty for it).
        """
        days, how = self.days(entry)
        if entry.score is None or days == 0:
            return entry.score, ""
        if days is None:
            return entry.score, f"late ({how}); no penalty applied here"
        if not self.percent:
            return entry.score, f"late {days} day(s) ({how}); no penalty"
        cut = min(100.0, self.percent * days)
        final = round(entry.score * (1 - cut / 100), 2)
        return final, f"late {days} day(s), -{cut:g}%: {entry.score:g} -> {final:g} ({how})"

    def check(self, entries) -> None:
        """Refuse a penalty that cannot be computed; warn when most of an assignment's class would be late.

        Raises
        ------
        CourseError
            When a penalty is asked for and a graded entry is marked late without a real time or a due
            date, naming each student and what to do (Canvas: its own Late Policy, or ``--times FILE``).
        """
        graded = [e for e in entries if e.status == GRADED]
        unknown = [(e, self.days(e)[1]) for e in graded if self.days(e)[0] is None]
        if self.percent and unknown:
            canvas = any(e.lms == "canvas" and self.when(e) is None for e, _ in unknown)
            names = "; ".join(f"{e.student}/{e.assignment} ({how})" for e, how in unknown[:8])
            more = f" and {len(unknown) - 8} more" if len(unknown) > 8 else ""
            advice = (f" {CANVAS_LATE_POLICY}: use it, and take late_penalty out of the course file (a second"
                      " penalty here would double it); or give the real times with --times FILE (a CSV of student,"
                      " assignment, submitted_at)." if canvas else
                      " Set each assignment's due date ([assignments.<name>] due), or give the real times with"
                      " --times FILE (a CSV of student, assignment, submitted_at).")
            raise CourseError(f"cannot compute the late penalty ({self.percent:g}% per day, {self.origin}) for"
                              f" {len(unknown)} late submission(s): {names}{more}.{advice} Nothing was written.")
        # Moodle's worksheet says "Submitted for grading" without "late" from its own due date (and the extensions
        # granted in Moodle): a penalty from an earlier due date here would contradict what the student was shown
        disagree = [e for e in graded if e.lms == "moodle" and not e.late and e.submitted and self.days(e)[0]]
        if self.percent and disagree:
            names = "; ".join(f"{e.student}/{e.assignment} (submitted {e.submitted}, {self.due(e)[1]} due"
                              f" {self.due(e)[0]:%Y-%m-%d %H:%M})" for e in disagree[:8])
            raise CourseError(f"Moodle's worksheet says {len(disagree)} submission(s) came on time (their status"
                              f" does not say late) that the due date here makes late: {names}. Moodle's status"
                              " follows its own due date and the extensions granted in Moodle: make the course"
                              " file's due date Moodle's, or give those students an extension ([extensions.<student>]"
                              " in the course file). Nothing was written.")
        for a in sorted({e.assignment for e in graded}):
            mine = [e for e in graded if e.assignment == a]
            late = [e for e in mine if self.days(e)[0] != 0]
            if len(mine) >= 3 and 2 * len(late) > len(mine):
                print(f"warning: {len(late)} of {len(mine)} graded submissions of {a} are late: check its due date"
                      " and the course file's time zone before this reaches the class")

    def describe(self, entries) -> None:
        """Print the policy: the due date in force for each assignment exported, extensions, what has none."""
        names = sorted({e.assignment for e in entries})
        if self.percent is not None:
            print(f"Late policy: -{self.percent:g}% of the score per day late ({self.origin}).")
        for a in names:
            due, where = (self.dues[a], "--due") if a in self.dues else self.config.due(a)
            if due is not None:
                print(f"  {a}: due {due:%Y-%m-%d %H:%M %Z}".rstrip() + f" ({where})")
            elif any(e.late for e in entries if e.assignment == a):
                print(f"  {a}: no due date (set due under [assignments.{a}] in the course file, or --due"
                      f" {a}=DATETIME): work the LMS marked late is marked late, with no penalty")
        students = {e.student for e in entries}
        for student, own in sorted(self.config.extensions.items()):
            for a, due in sorted(own.items()):
                if a in names:
                    print(f"  {student}: {a} due {due:%Y-%m-%d %H:%M} (extension)"
                          + ("" if student in students else ": no such student in grades.csv"))

    def check_extensions(self, students: set[str]) -> None:
        """Refuse an extension for a student who is not in the class (a mistyped id), naming it."""
        if not students:
            return
        stray = sorted(set(self.config.extensions) - students)
        if stray:
            near = sorted(students)[:3]
            raise CourseError(f"{self.config.source}: [extensions.{stray[0]}]: no student {stray[0]!r} in the class"
                              f"{f' (nor {len(stray) - 1} more: ' + ', '.join(stray[1:]) + ')' if len(stray) > 1 else ''};"
                              f" a student's id is as in course/grades.csv (e.g. {', '.join(near)}): fix the id,"
                              " or the real student is penalised. Nothing was written.")


def _points(x: float | None, delimiter: str = ",") -> str:
    """Points as a gradebook writes them: ``5.5``; ``5,5`` in a semicolon-separated file (a comma locale)."""
    text = "" if x is None else f"{x:.2f}".rstrip("0").rstrip(".")
    return text.replace(".", ",") if delimiter == ";" else text


def comment(entry, final: float | None, note: str) -> str:
    """The short summary a student reads beside the grade in the LMS (and at the top of the feedback page).

    Written for the student: what happened and what to do, never the
    instructor's command-line advice (``note`` is the instructor's account
    of a late penalty; the student reads what it did to the score).
    """
    notebook = expected_notebooks().get(entry.assignment, "the notebook")
    if entry.status == MISSING:
        other = re.fullmatch(r"submitted (.+), not a notebook", entry.reason or "")
        if other:
            return (f"{entry.assignment}: you submitted {other.group(1)}, not a notebook, so nothing could be"
                    f" graded. Submit {notebook}, the .ipynb file Jupyter saves (File > Download).")
        return f"{entry.assignment}: no notebook was submitted."
    if entry.status == submissions.FAILED and re.match(r"submitted (?!\S+'s notebook)", entry.reason or ""):
        return f"{entry.assignment}: you {entry.reason}."  # a script, a link, a PDF: what to hand in instead
    if entry.status == submissions.FAILED and (entry.reason or "").startswith("two notebooks"):
        both = re.match(r"two notebooks, (.+?), both hold work", entry.reason)
        return (f"{entry.assignment}: you handed in two notebooks{f', {both.group(1)},' if both else ''} that both"
                " hold work; your instructor will choose the one to grade.")
    if entry.status != GRADED:
        why = entry.reason or "the grader could not run it"
        if why.startswith("not a notebook"):
            why = f"the file submitted as {notebook} is not a notebook Jupyter can open"
        return f"{entry.assignment}: your notebook could not be graded automatically ({why}); your instructor will look at it."
    waiting = int(entry.awaiting_review or 0)
    # a written answer left blank gets 0 with no review: only points given to one say a reviewer read them
    reviewed = float(entry.written_score or 0) > 0
    how = ("graded automatically" if not entry.written_max else
           f"graded automatically; {waiting} written answer(s) await your instructor's review" if waiting else
           "graded automatically, written answers reviewed by your instructor" if reviewed else
           f"graded automatically; written answers 0 of {entry.written_max} points")
    so_far = " so far (a partial grade: it changes once they are reviewed)" if waiting else ""
    text = f"{entry.assignment}: {entry.score:g} of {entry.max_score:g} points{so_far}, {how}"
    if note:
        days = re.search(r"late (\d+) day", note)
        late = "submitted late" + (f" ({days.group(1)} day{'s' if days.group(1) != '1' else ''})" if days else "")
        if final is not None and entry.score is not None and final < entry.score:
            text += f"; {late}: the late penalty leaves {final:g} of {entry.max_score:g} points"
        elif note.endswith("no penalty applied here"):  # the LMS's own late policy may apply
            text += f"; {late}"
        else:
            text += f"; {late}, no penalty"
    return text + ". The feedback page shows each check and why any point was lost."


def _by_lms_id(kind: str, entries) -> dict[tuple[str, str], object]:
    return {(e.lms_id, e.assignment): e for e in entries
            if e.lms == kind and e.lms_id}


def fresh(course: Course, entries, force: bool, what: str) -> list:
    """``entries`` checked against the course folder's fingerprints (:func:`pm_course.fingerprints.stale`).

    Raises
    ------
    CourseError
        When a row would be written from stale state, naming each student and why (unless ``force``:
        then those rows are left out, as not graded yet, and listed).
    """
    manifest = {(e.student, e.assignment): e for e in submissions.read_manifest(course.manifest)}
    found = fingerprints.stale(course, read_grades(course.grades), manifest)
    out = [e for e in entries if (e.student, e.assignment) in found]
    if not out:
        return entries
    listing = "; ".join(f"{e.student}/{e.assignment} ({found[(e.student, e.assignment)]})" for e in out)
    if not force:
        raise CourseError(f"{what} refused: {len(out)} row(s) would be written from out-of-date state: {listing}."
                          " Run pm-course grade (pm-course status lists what is out of date), or pass --force to"
                          f" write the rest without them. Nothing was written.")
    print(f"Left out (out of date; --force): {listing}")
    for e in out:
        e.status, e.score = submissions.NOT_YET, None
    return entries


def _write(out: Path, columns: list[str], rows: list[dict], encoding: str, template: Path | None = None,
           delimiter: str = ",") -> Path:
    if template is not None and out.resolve() == template.resolve():
        raise CourseError(f"-o {out} is the template itself: write the import to another file")
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore", delimiter=delimiter)
    writer.writeheader()
    writer.writerows(rows)
    return state.write_text(out, buffer.getvalue(), encoding)


def _number(text: str) -> float | None:
    """A number as a gradebook writes it ("8", "8.0", "8,5" where commas are decimal points); None if not one."""
    try:
        return float(text.strip().replace(",", "."))
    except ValueError:
        return None


def canvas_assignment_columns(columns: list[str]) -> list[str]:
    """The gradebook's assignment columns: ``<name> (<Canvas id>)``, not its identity or total columns."""
    return [c for c in columns if c not in lms.CANVAS_IDS and re.search(r"\(\d+\)\s*$", c)]


def canvas_columns(table: lms.Table, names: list[str], config: Settings, new_columns: bool = False) -> dict[str, str]:
    """The gradebook column each assignment fills: the course file's ``canvas``, else ``<name> (<id>)`` exactly.

    Raises
    ------
    CourseError
        When the course file names a column the gradebook does not have, or an
        assignment has no column (unless ``new_columns``: then its bare name,
        which Canvas's import makes a new assignment of), or two assignments
        would fill one column.
    """
    theirs = canvas_assignment_columns(table.columns)
    header, missing = {}, []
    for a in names:
        want = config.assignment(a).canvas
        if want:
            found = [c for c in table.columns if c.strip() == want]
            if not found:
                raise CourseError(f"{config.source}: [assignments.{a}] canvas = {want!r} is not a column of"
                                  f" {table.path}; its assignment columns are: {'; '.join(theirs) or 'none'}")
            header[a] = found[0]
            continue
        own = [c for c in theirs if re.fullmatch(rf"{re.escape(a)}\s*\(\d+\)", c.strip())]
        if own:
            header[a] = own[0]
        elif new_columns:
            header[a] = a
        else:
            missing.append(a)
    if missing:
        raise CourseError(
            f"{table.path}: no gradebook column for {', '.join(missing)}, so its scores would make a new assignment"
            f" in Canvas. Its assignment columns are: {'; '.join(theirs) or 'none'}. Say which column each fills in"
            f" the course file ({config.source or 'course.toml: pm-course init writes one'}), e.g."
            f" [assignments.{missing[0]}] canvas = \"{theirs[0] if theirs else missing[0] + ' (1234)'}\";"
            " or pass --new-columns to make new assignments.")
    used = [header[a] for a in names]
    twice = sorted({c for c in used if used.count(c) > 1})
    if twice:
        raise CourseError(f"{table.path}: one column for two assignments: "
                          + "; ".join(f"{c} <- {', '.join(a for a in names if header[a] == c)}" for c in twice))
    return header


def _scales(table: lms.Table, header: dict[str, str], rescale: bool) -> dict[str, float]:
    """Each assignment's factor to the gradebook's Points Possible (1 where they agree); each rescaling printed."""
    points = [i for i, r in enumerate(table.rows) if lms.POINTS_POSSIBLE in (r.get("Student") or "")]
    scales = {a: 1.0 for a in header}
    if not points:
        return scales
    i = points[0]
    for a, column in header.items():
        raw = (table.rows[i].get(column) or "").strip() if column in table.columns else ""
        if not raw:
            continue
        theirs, ours = _number(raw), max_points(a)
        if theirs is None or theirs < 0:
            raise CourseError(f"{table.where(i, column)}: Points Possible {raw!r} is not a number of points")
        if theirs == ours:
            continue
        if not rescale:
            raise CourseError(f"{table.where(i, column)}: the gradebook's {column!r} is out of {theirs:g} points, but"
                              f" {a} is out of {ours:g}: change the assignment's points in Canvas, or export without"
                              " --no-rescale to rescale the scores to the gradebook's points")
        if theirs == 0 or ours == 0:
            raise CourseError(f"{table.where(i, column)}: cannot rescale {a} from {ours:g} to {theirs:g} points")
        scales[a] = theirs / ours
        print(f"Rescaled {a}: the gradebook's {column!r} is out of {theirs:g} points, the assignment out of"
              f" {ours:g}: scores x {theirs:g}/{ours:g} (a full {ours:g} becomes {theirs:g})")
    return scales


def to_canvas(course: Course, template: Path, out: Path | None, late: Late, new_columns: bool = False,
              rescale: bool = True, overwrite_lms_edits: bool = False, entries=None) -> Path:
    """Canvas's gradebook import from its exported gradebook ``template``; the file written."""
    table = lms.read_table(template)
    if lms.kind(table.columns, template) != "canvas":
        raise CourseError(f"{template}: a Moodle worksheet, not a Canvas gradebook: use --to moodle")
    scores = _by_lms_id("canvas", grades(course.grades) if entries is None else entries)
    if not scores:
        raise CourseError("nothing collected from Canvas is in grades.csv: pm-course collect --from canvas ZIP"
                          " --roster GRADEBOOK, then pm-course grade, before exporting to Canvas")
    late.check(scores.values())
    names = sorted({a for _, a in scores})
    header = canvas_columns(table, names, late.config, new_columns)
    scales = _scales(table, header, rescale)
    ids = [c for c in table.columns if c in lms.CANVAS_IDS]
    guard = exported.Guard(course, "canvas", overwrite_lms_edits)
    out_rows, roster, tests = [], set(), []
    for i, row in enumerate(table.rows):
        if lms.POINTS_POSSIBLE in row["Student"]:
            out_rows.append({"Student": row["Student"], **{c: row.get(c, "") for c in ids if c != "Student"},
                             **{header[a]: (row.get(header[a]) or "").strip()
                                or _points(max_points(a) * scales[a], table.delimiter) for a in names}})
            continue
        if lms.is_test_student(row["Student"]):
            tests.append(f"{row['Student']} ({row['ID']})")
            continue
        if not row["ID"].strip():
            if row["Student"].strip():
                raise CourseError(f"{table.where(i, 'ID')}: {row['Student']!r} has no Canvas id; export the"
                                  " gradebook again")
            continue
        roster.add(row["ID"].strip())
        new = {c: row[c] for c in ids}
        for a in names:
            entry = scores.get((row["ID"].strip(), a))
            final, note = late.apply(entry) if entry is not None and entry.status == GRADED else (None, "")
            ours = _points(None if final is None else final * scales[a], table.delimiter)
            # a submission Canvas marked late, with no penalty of pm-course's: Canvas's Late Policy may deduct
            canvas_late = entry is not None and entry.late and not (final is not None and entry.score is not None
                                                                     and final < entry.score)
            new[header[a]] = guard.cell(exported.canvas_key(row["ID"].strip(), header[a]),
                                        f"{row['Student']} ({row['ID']}) {header[a]}", row.get(header[a], ""), ours,
                                        late_policy=canvas_late)
            if note:
                print(f"  {row['Student']} ({row['ID']}) {a}: {note}")
        out_rows.append(new)
    columns = ids + [header[a] for a in names]
    out = _write(out or course.export / "canvas-grades.csv", columns, out_rows, table.encoding, template, table.delimiter)
    guard.save()
    _unmatched(scores, roster, "gradebook")
    if tests:
        print(f"  left out: Canvas's test student {', '.join(tests)}")
    print(f"Canvas gradebook import: {out} ({len(out_rows)} rows, {', '.join(header[a] for a in names)});"
          " import it in Canvas: Grades > Import")
    return out


def _unmatched(scores: dict, roster_ids: set, what: str) -> None:
    lost = sorted({f"{e.student} ({lid})" for (lid, _), e in scores.items()
                   if lid not in roster_ids and not lms.is_test_student(e.name)})
    if lost:
        print(f"  not in the {what} (left out, check the roster): {', '.join(lost)}")


def _folded(text: str) -> str:
    return lms.slug(text)


def worksheet_names(template: Path, config: Settings) -> list[str]:
    """The assignments a Moodle worksheet's file name names (``Grades-<course>-<assignment>-<id>.csv``).

    An assignment is named by the course file's ``moodle`` name, or its own
    name (``03_subspace``), appearing in the file name.
    """
    name = _folded(template.stem)
    found = []
    for a in assignment_names():
        moodle = config.assignment(a).moodle
        if (moodle and _folded(moodle) in name) or _folded(a) in name:
            found.append(a)
    return found


def _moodle_assignment(template: Path, given: str | None, scores: dict, config: Settings) -> str:
    named = worksheet_names(template, config)
    if given:
        if given not in expected_notebooks():
            raise CourseError(f"--assignment {given!r} is not an assignment: expected one of {sorted(expected_notebooks())}")
        if named and given not in named:
            raise CourseError(f"{template.name} is the worksheet of {', '.join(named)} (its file name says so), not"
                              f" of --assignment {given}: download {given}'s grading worksheet from Moodle, or pass"
                              f" --assignment {named[0]}")
        return given
    if len(named) == 1:
        return named[0]
    graded = sorted({a for _, a in scores})
    if not named and len(graded) == 1:
        return graded[0]
    raise CourseError(f"{template.name}: which assignment is this worksheet for? Pass --assignment (one of"
                      f" {named or graded}), or set moodle = \"<its Moodle name>\" under [assignments.<name>] in the"
                      " course file")


def to_moodle(course: Course, template: Path, out: Path | None, late: Late, assignment: str | None = None,
              rescale: bool = True, overwrite_lms_edits: bool = False, entries=None) -> Path:
    """The Moodle grading worksheet ``template`` with Grade and Feedback comments filled in; the file written."""
    table = lms.read_table(template)
    columns, rows = table.columns, table.rows
    if lms.kind(columns, template) != "moodle":
        raise CourseError(f"{template}: a Canvas gradebook, not a Moodle worksheet: use --to canvas")
    scores = _by_lms_id("moodle", grades(course.grades) if entries is None else entries)
    assignment = _moodle_assignment(template, assignment, scores, late.config)
    late.check([e for (_, a), e in scores.items() if a == assignment])
    ours = max_points(assignment)
    scale = _worksheet_scale(table, assignment, late.config)
    guard = exported.Guard(course, "moodle", overwrite_lms_edits)
    told = set()
    mapped: dict[str, int] = {}
    for i, row in enumerate(rows):
        participant = lms.moodle_participant(row[lms.MOODLE_ID])
        if not participant:
            raise CourseError(f"{table.where(i, lms.MOODLE_ID)}: {row[lms.MOODLE_ID]!r} is not \"Participant"
                              " <number>\"; download the grading worksheet again")
        entry = scores.get((participant, assignment))
        if entry is None:
            continue
        final, note = late.apply(entry) if entry.status == GRADED else (None, "")
        if scale is not None and final is not None:  # the Grade column takes only the scale's items
            item = scale.item(final, ours)
            mapped[item] = mapped.get(item, 0) + 1
            row["Grade"] = guard.cell(f"{participant}|{assignment}", f"{row['Full name']} ({row[lms.MOODLE_ID]})",
                                      row.get("Grade", ""), item, scale.items)
            final = None
        scale_factor = 1.0 if scale is not None else _scale(table, i, ours, rescale, told)
        if final is not None:
            value = f"{final * scale_factor:.2f}"
            row["Grade"] = guard.cell(f"{participant}|{assignment}", f"{row['Full name']} ({row[lms.MOODLE_ID]})",
                                      row.get("Grade", ""), value.replace(".", ",") if table.delimiter == ";"
                                      else value)
        if note:
            print(f"  {row['Full name']} ({row[lms.MOODLE_ID]}): {note}")
        if "Feedback comments" in columns:
            text = comment(entry, late.apply(entry)[0] if entry.status == GRADED else None, note)
            if scale is not None and entry.status == GRADED and row["Grade"] in scale.items:
                text += f" On the course's scale: {row['Grade']}."
            row["Feedback comments"] = text
    out = _write(out or course.export / f"moodle-{assignment}.csv", columns, rows, table.encoding, template, table.delimiter)
    if scale is not None:
        print(f"Scale: the worksheet grades {assignment} with the scale {', '.join(scale.items)}: each score became"
              f" the item of its fraction of {ours:g} points ({scale.describe()}, from {late.config.source}): "
              + ", ".join(f"{n} {item}" for item, n in mapped.items()))
    guard.save()
    _unmatched({k: v for k, v in scores.items() if k[1] == assignment},
               {lms.moodle_participant(r[lms.MOODLE_ID]) for r in rows}, "worksheet")
    print(f"Moodle grading worksheet for {assignment}: {out} ({len(rows)} rows); upload it in the assignment:"
          " Grading action > Upload grading worksheet")
    return out


def _worksheet_scale(table: lms.Table, assignment: str, config: Settings):
    """The scale a worksheet grades with, as the course file maps points to it (None: it grades with points).

    A worksheet of an assignment graded with a scale has a ``Scale`` column (its
    items, comma-separated) in place of ``Maximum Grade``, and Moodle's import
    takes only those items in ``Grade`` (a number there becomes no grade,
    silently).

    Raises
    ------
    CourseError
        When the course file sets no scale for the assignment (naming the
        worksheet's items and how to set it), or one with other items.
    """
    from .config import path as config_path

    if "Scale" not in table.columns or "Maximum Grade" in table.columns:
        if config.scale_of(assignment) is not None and "Maximum Grade" in table.columns:
            print(f"Note: {config.source} sets a scale for {assignment}, but {table.path.name} grades it in points"
                  " (its Maximum Grade column): points written")
        return None
    seen = {}
    for i, row in enumerate(table.rows):
        raw = (row.get("Scale") or "").strip()
        if raw and raw != "-":
            seen.setdefault(tuple(item.strip() for item in raw.split(",") if item.strip()), i)
    if len(seen) > 1:
        (a, i), (b, j) = list(seen.items())[:2]
        raise CourseError(f"{table.where(j, 'Scale')}: the scale {', '.join(b)}, but {table.where(i, 'Scale')} has"
                          f" {', '.join(a)}: download the grading worksheet again")
    theirs = next(iter(seen), ())
    listed = ", ".join(f'"{item}"' for item in theirs) or "(none listed)"
    scale = config.scale_of(assignment)
    if scale is None:
        where = config.source or config_path()
        raise CourseError(
            f"{table.path.name}: Moodle grades {assignment} with a scale, not points (its Scale column: {listed}):"
            f" its import takes only those items in Grade, and a number there becomes no grade. Say in the course"
            f" file ({where}) how points map to the items, under [assignments.{assignment}] (or at the top, for every"
            f" assignment): scale = [{listed}] and scale_thresholds = [0, ...] (the fraction of the points from which"
            " each item is given, e.g. [0, 0.5, 0.85]); or grade the assignment in points in Moodle. Nothing was"
            " written.")
    if theirs and tuple(scale.items) != theirs:
        raise CourseError(
            f"{table.path.name}: Moodle's scale for {assignment} is {listed} (its Scale column), the course file's"
            f" ({config.source}) is {', '.join(map(repr, scale.items))}: make scale the worksheet's items, lowest"
            " first, as Moodle spells them. Nothing was written.")
    return scale


def _scale(table: lms.Table, i: int, ours: float, rescale: bool, told: set) -> float:
    """Points to the worksheet's scale (row ``i``'s Maximum Grade) when that differs from the assignment's points."""
    raw = (table.rows[i].get("Maximum Grade") or "").strip()
    if not raw:
        return 1.0
    theirs = _number(raw)
    if theirs is None or theirs <= 0:
        raise CourseError(f"{table.where(i, 'Maximum Grade')}: {raw!r} is not a number of points")
    if theirs == ours or ours <= 0:
        return 1.0
    if not rescale:
        raise CourseError(f"{table.where(i, 'Maximum Grade')}: the worksheet grades out of {theirs:g}, the assignment"
                          f" is out of {ours:g}: change the maximum grade in Moodle, or export without --no-rescale")
    if theirs not in told:
        told.add(theirs)
        print(f"Rescaled: the worksheet grades out of {theirs:g}, the assignment is out of {ours:g}: scores x"
              f" {theirs:g}/{ours:g}")
    return theirs / ours


def to_csv(course: Course, out: Path | None, late: Late, entries=None) -> Path:
    """grades.csv with the late policy's columns (days late, penalty, final score)."""
    rows = []
    entries = grades(course.grades) if entries is None else entries
    late.check(entries)
    for e in sorted(entries, key=lambda e: (e.student, e.assignment)):
        final, note = late.apply(e) if e.status == GRADED else (None, "")
        rows.append({"student_id": e.student, "assignment": e.assignment, "status": e.status, "reason": e.reason,
                     "score": _points(e.score), "max_score": _points(e.max_score), "late": "late" if e.late else "",
                     "late_note": note, "final_score": _points(final), "name": e.name, "lms_id": e.lms_id})
    out = _write(out or course.export / "grades.csv", list(rows[0]) if rows else ["student_id"], rows, "utf-8")
    print(f"Grades with the late policy: {out}")
    return out


def export(course: Course, to: str, template: Path | None = None, out: Path | None = None, late: Late | None = None,
           assignment: str | None = None, new_columns: bool = False, rescale: bool = True,
           overwrite_lms_edits: bool = False, force: bool = False) -> Path:
    """Write the grades as ``to`` ("canvas", "moodle" or "csv") takes them; the file written.

    Parameters
    ----------
    course : Course
        The course whose grades it writes.
    to : {"canvas", "moodle", "csv"}
        The LMS (or a plain CSV).
    template : Path, optional
        The LMS's own file: Canvas's gradebook export, Moodle's grading worksheet.
    out : Path, optional
        Where to write (default: in ``course/export/``).
    late : Late, optional
        The late policy (default: the course file's due dates, no penalty).
    assignment : str, optional
        The assignment a Moodle worksheet is for.
    new_columns : bool
        Canvas: an assignment with no gradebook column gets a new one (else refused).
    rescale : bool
        Rescale scores to the LMS's points where they differ (else refused).
    overwrite_lms_edits : bool
        Replace a gradebook value changed in the LMS since pm-course's last export (default: kept, listed);
        a value that is not a number (``EX``) is kept all the same.
    force : bool
        Write the rows that are up to date when some are not (else refused, naming them).
    """
    late = late or Late.of(course.settings)
    if to not in TARGETS:
        raise CourseError(f"--to must be one of {TARGETS}, not {to!r}")
    if to != "csv" and template is None:
        what = "gradebook export (Grades > Export)" if to == "canvas" else "grading worksheet (Download grading worksheet)"
        raise CourseError(f"--to {to} needs the LMS's own {what} as the template")
    entries = grades(course.grades)
    late.check_extensions({e.student for e in entries})
    entries = fresh(course, [e for e in entries if to == "csv" or e.lms == to], force, "export")
    late.describe([e for e in entries if e.status == GRADED])
    if to == "csv":
        return to_csv(course, out, late, entries)
    if to == "canvas":
        return to_canvas(course, template, out, late, new_columns, rescale, overwrite_lms_edits, entries)
    return to_moodle(course, template, out, late, assignment, rescale, overwrite_lms_edits, entries)


# --- feedback -------------------------------------------------------------------
def canvas_prefix(source: str) -> str | None:
    """The ``<name>_[LATE_]<user id>_<submission id>_`` prefix of a Canvas download's file name (None if not one).

    Canvas's "Re-upload submissions" attaches a file to the submission its
    name's user id and submission id point to.

    >>> canvas_prefix("nunezjose_LATE_101_9001_subspace-1.ipynb")
    'nunezjose_LATE_101_9001_'
    """
    found = re.match(lms.CANVAS_NAME, Path(source).name)
    return found.group(0)[: found.start("file_id")] if found else None


SUMMARY = ('<div role="note" style="margin:1em auto;max-width:1140px;padding:0.6em 1em;border-left:4px solid #1f6feb;'
           'background:#eef4ff;color:#102040;font-size:15px">{}</div>')


def with_summary(page: str, text: str) -> str:
    """The page with the LMS comment's text at its top (a re-uploaded file arrives without a text comment)."""
    head, body, rest = page.partition("<body>")
    return head + body + SUMMARY.format(html_escape(text)) + rest if body else page


def notice_page(entry, text: str) -> str:
    """A short self-contained page for a submission with nothing graded (a PDF in place of the notebook)."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{CSP}<title>{html_escape(entry.assignment)}'
            f"</title></head><body>{SUMMARY.format(html_escape(text))}</body></html>\n")


def _write_zip(path: Path, files: list[tuple[str, str]]) -> None:
    """Write a zip whole, then put it in place: an interrupted run leaves the old zip, never half a new one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files:
            z.writestr(name, text)
    state.write_bytes(path, buffer.getvalue())


def pack_feedback(course: Course, out: Path | None = None, late: Late | None = None, force: bool = False
                  ) -> list[Path]:
    """Pack each student's feedback page as their LMS takes it back; the zips written.

    - Canvas: ``feedback-canvas-<assignment>.zip``, for the assignment's
      "Re-upload submissions": each page named with the download's
      ``<name>_<user id>_<submission id>_`` prefix (as collect recorded it), so
      that Canvas attaches it to that student's submission as a comment.
    - Moodle: ``feedback-moodle-<assignment>.zip``, one folder per student as in
      the download (``<Full name>_<participant id>_assignsubmission_file_/``), to
      upload with "Upload multiple feedback files in a zip".
    - A folder: ``course/feedback/`` is already one folder per student.

    Each page stands alone (its maths is MathML, it loads nothing) and opens
    with the summary the LMS comment would carry. A zip is made whole from
    grades.csv each time: a student whose row is no longer graded has no page
    in it (and no page left in ``course/feedback/``), and Canvas's test
    student gets none. A student who handed in another file in place of the
    notebook gets a page saying so.
    """
    late = late or Late.of(course.settings)
    out = out or course.export
    collected = {(e.student, e.assignment): e for e in submissions.read_manifest(course.manifest)}
    entries = grades(course.grades)
    late.check_extensions({e.student for e in entries})
    entries = fresh(course, entries, force, "feedback")  # no page of work since collected again, undone or changed
    for e in entries:  # what the manifest says of the student's work now (not submitted, could not be graded)
        now = collected.get((e.student, e.assignment))
        if now is not None and now.status != GRADED and e.status == GRADED:
            e.status, e.reason = now.status, now.reason
    late.check(entries)
    removed = remove_stale(course, entries)
    sources = {key: e.source for key, e in collected.items()}
    made, missing, skipped, zips = [], [], [], {}
    for e in sorted(entries, key=lambda e: (e.assignment, e.student)):
        if not e.lms or is_test_student(e):
            continue
        stem = Path(expected_notebooks()[e.assignment]).stem
        src = sources.get((e.student, e.assignment), "")
        if e.status == GRADED:
            page = course.page(e.student, e.assignment)
            if not page.is_file():
                missing.append(f"{e.student}/{e.assignment}")
                continue
            final, note = late.apply(e)
            text = with_summary(page.read_text(encoding="utf-8"), comment(e, final, note))
        elif src and e.status in (MISSING, submissions.FAILED):  # handed in, nothing graded: say why
            # (not "not graded yet" nor a machine error: those are the instructor's to fix, never a page)
            text = notice_page(e, comment(e, None, ""))
        else:
            continue
        if e.lms == "canvas":
            prefix = canvas_prefix(src)
            if prefix is None:
                skipped.append(f"{e.student}/{e.assignment}")
                continue
            named = re.match(lms.CANVAS_NAME, Path(src).name)
            if e.lms_id and named["student_id"] != e.lms_id:  # a group's upload: each member's own user id
                prefix = prefix[:named.start("student_id")] + e.lms_id + prefix[named.end("student_id"):]
            name = f"{prefix}feedback-{stem}.html"
        else:
            folder = src.split("/")[0] if "/" in src else f"{e.name}_{e.lms_id}_assignsubmission_file_"
            name = f"{folder}/{stem}.html"
        zips.setdefault((e.lms, e.assignment), []).append((name, text))
    for (kind, assignment), pages in sorted(zips.items()):
        path = out / f"feedback-{kind}-{assignment}.zip"
        _write_zip(path, pages)
        made.append(path)
    for kind in lms.LMSS:  # a zip left from an earlier run for an assignment with no page now
        for assignment in expected_notebooks():
            old = out / f"feedback-{kind}-{assignment}.zip"
            if (kind, assignment) not in zips and old.is_file():
                old.unlink()
                print(f"  removed {old}: no feedback page for {assignment} now")
    legacy = out / "feedback-canvas"  # the folder per student of earlier versions: its pages may be stale
    if legacy.is_dir() and {p.name for p in legacy.iterdir()} <= {*expected_notebooks(), "mathjax"}:
        shutil.rmtree(legacy)
        print(f"  removed {legacy} (a folder per student, from an earlier version): the zips replace it")
    for path in made:
        what = "Assignment > Re-upload submissions" if "-canvas-" in path.name else \
            "Assignment > Grading action > Upload multiple feedback files in a zip"
        print(f"Feedback: {path} ({what})")
    if removed:
        print(f"  removed {len(removed)} feedback page(s) of work no longer graded: {', '.join(removed)}")
    if missing:
        print(f"  no feedback page (grade again to make it): {', '.join(missing)}")
    if skipped:
        print(f"  not packed (no Canvas download file name was recorded; collect from Canvas's zip):"
              f" {', '.join(skipped)}")
    if not made:
        print(f"No LMS feedback to pack: students collected from a folder have theirs in {course.feedback}")
    return made
