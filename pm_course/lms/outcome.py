"""What a student's row becomes in an LMS, for ``export`` (a gradebook file) and ``push`` (the LMS's API) alike.

The late policy (:class:`Late`: the course file's due dates, extensions and
``late_penalty``, or the command line's, counted from the LMS's real
submission times), the comment an LMS shows beside a grade (:func:`comment`),
the page it gets (:func:`with_summary`, :func:`notice_page`), and the check
that no row is written from out-of-date state (:func:`fresh`). Both steps
stand on this module; neither imports the other.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from html import escape as html_escape
from pathlib import Path

from pm_course import lms
from pm_course.state import fingerprints, submissions
from pm_course.state.config import Settings
from pm_course.state.course import Course, CourseError, assignment_names, expected_notebooks
from pm_course.state.grades_csv import read_grades
from pm_course.state.pages import CSP
from pm_course.state.submissions import GRADED, MISSING

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


def score_text(x: float | None, delimiter: str = ",") -> str:
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


def fresh(course: Course, entries, force: bool, what: str) -> list:
    """``entries`` checked against the course folder's fingerprints (:func:`pm_course.state.fingerprints.stale`).

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
