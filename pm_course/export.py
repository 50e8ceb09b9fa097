"""Grades and feedback out, as an LMS takes them back (``pm-course export``, ``pm-course feedback``).

- ``export --to canvas GRADEBOOK.csv``: Canvas's gradebook import, made from
  its own export: the template's identity columns (``Student, ID, SIS User ID,
  SIS Login ID, Section``), then one column per assignment (the template's own
  ``<Assignment> (<id>)`` header where it has one, so the values overwrite;
  the bare name otherwise, which makes a new assignment) with the score in
  points, its ``Points Possible`` row, and one row per student of the template.
- ``export --to moodle WORKSHEET.csv``: the offline grading worksheet, every
  column and row as it came, with Grade and Feedback comments filled in.
- ``export --to csv``: grades.csv with the late policy's columns.

A score is left empty where there is none (not submitted, could not be graded):
the LMS keeps what it had. Late work is marked; a late penalty
(``--late-penalty PERCENT_PER_DAY``, none by default) is applied to the score
exported, and every penalty is printed and written beside the score, never
applied silently.
"""
from __future__ import annotations

import csv
import math
import re
import shutil
import zipfile
from dataclasses import dataclass
from datetime import datetime
from html import escape as html_escape
from pathlib import Path

from . import lms, submissions
from .collect import MANIFEST
from .course import COURSE, CourseError, expected_notebooks, max_points
from .feedback import is_test_student, remove_stale
from .grade import grades
from .submissions import GRADED, MISSING

EXPORT = COURSE / "export"
TARGETS = ("canvas", "moodle", "csv")


@dataclass
class Late:
    """The late policy: ``percent`` of the score per day late (None: no penalty), counted from ``due``."""

    percent: float | None = None
    due: datetime | None = None

    def days(self, entry) -> tuple[int, str]:
        """(days late, how they were counted) for one graded entry."""
        if self.due and entry.submitted:
            try:
                when = datetime.fromisoformat(entry.submitted)
            except ValueError:
                when = None
            if when is not None:
                days = math.ceil((when - self.due).total_seconds() / 86400)
                if days > 0:
                    return days, f"submitted {entry.submitted}, due {self.due:%Y-%m-%d %H:%M}"
        if entry.late:
            return 1, "marked late by the LMS (counted as 1 day: pass --due to count the days)"
        return 0, ""

    def apply(self, entry) -> tuple[float | None, str]:
        """(score after the penalty, a note saying what was done; "" when on time)."""
        days, how = self.days(entry)
        if entry.score is None or days == 0:
            return entry.score, ""
        if not self.percent:
            return entry.score, f"late ({how}); no penalty"
        cut = min(100.0, self.percent * days)
        final = round(entry.score * (1 - cut / 100), 2)
        return final, f"late {days} day(s), -{cut:g}%: {entry.score:g} -> {final:g} ({how})"


def _points(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}".rstrip("0").rstrip(".")


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
    if entry.status != GRADED:
        why = entry.reason or "the grader could not run it"
        if why.startswith("not a notebook"):
            why = f"the file submitted as {notebook} is not a notebook Jupyter can open"
        return f"{entry.assignment}: your notebook could not be graded automatically ({why}); your instructor will look at it."
    text = f"{entry.assignment}: {entry.score:g} of {entry.max_score:g} points, graded automatically"
    if note:
        days = re.search(r"late (\d+) day", note)
        late = "submitted late" + (f" ({days.group(1)} day{'s' if days.group(1) != '1' else ''})" if days else "")
        if final is not None and entry.score is not None and final < entry.score:
            text += f"; {late}: the late penalty leaves {final:g} of {entry.max_score:g} points"
        else:
            text += f"; {late}, no penalty"
    return text + ". The feedback page shows each check and why any point was lost."


def _by_lms_id(kind: str) -> dict[tuple[str, str], object]:
    return {(e.lms_id, e.assignment): e for e in grades() if e.lms == kind and e.lms_id}


def _write(out: Path, columns: list[str], rows: list[dict], encoding: str, template: Path | None = None) -> Path:
    if template is not None and out.resolve() == template.resolve():
        raise CourseError(f"-o {out} is the template itself: write the import to another file")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding=encoding) as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return out


def to_canvas(template: Path, out: Path | None, late: Late) -> Path:
    """Canvas's gradebook import from its exported gradebook ``template``; the file written."""
    columns, rows, encoding = lms.read_csv(template)
    if lms.kind(columns) != "canvas":
        raise CourseError(f"{template}: a Moodle worksheet, not a Canvas gradebook: use --to moodle")
    scores = _by_lms_id("canvas")
    names = sorted({a for _, a in scores} or expected_notebooks())
    header = {}
    for a in names:  # the template's own column for the assignment, when it has one
        own = [c for c in columns if re.fullmatch(rf"{re.escape(a)}\s*\(\d+\)", c.strip())]
        header[a] = own[0] if own else a
    ids = [c for c in columns if c in lms.CANVAS_IDS]
    out_rows = []
    if any(lms.POINTS_POSSIBLE in r.get("Student", "") for r in rows):
        out_rows.append({"Student": "    " + lms.POINTS_POSSIBLE, **{header[a]: _points(max_points(a)) for a in names}})
    for row in rows:
        if not lms.is_student_row("canvas", row):
            continue
        new = {c: row[c] for c in ids}
        for a in names:
            entry = scores.get((row["ID"].strip(), a))
            final, note = late.apply(entry) if entry is not None and entry.status == GRADED else (None, "")
            new[header[a]] = _points(final)
            if note:
                print(f"  {row['Student']} ({row['ID']}) {a}: {note}")
        out_rows.append(new)
    out = _write(out or EXPORT / "canvas-grades.csv", ids + [header[a] for a in names], out_rows, encoding, template)
    _unmatched(scores, {r["ID"].strip() for r in rows if lms.is_student_row("canvas", r)}, "gradebook")
    print(f"Canvas gradebook import: {out} ({len(out_rows)} rows, {', '.join(header[a] for a in names)});"
          " import it in Canvas: Grades > Import")
    return out


def _unmatched(scores: dict, roster_ids: set, what: str) -> None:
    lost = sorted({f"{e.student} ({lid})" for (lid, _), e in scores.items() if lid not in roster_ids})
    if lost:
        print(f"  not in the {what} (left out, check the roster): {', '.join(lost)}")


def _moodle_assignment(template: Path, given: str | None, scores: dict) -> str:
    if given:
        if given not in expected_notebooks():
            raise CourseError(f"--assignment {given!r} is not an assignment: expected one of {sorted(expected_notebooks())}")
        return given
    graded = sorted({a for _, a in scores})
    named = [a for a in graded if a in template.name]
    if len(named) == 1:
        return named[0]
    if len(graded) == 1:
        return graded[0]
    raise CourseError(f"{template.name}: which assignment is this worksheet for? Pass --assignment (one of {graded})")


def to_moodle(template: Path, out: Path | None, late: Late, assignment: str | None = None) -> Path:
    """The Moodle grading worksheet ``template`` with Grade and Feedback comments filled in; the file written."""
    columns, rows, encoding = lms.read_csv(template)
    if lms.kind(columns) != "moodle":
        raise CourseError(f"{template}: a Canvas gradebook, not a Moodle worksheet: use --to canvas")
    scores = _by_lms_id("moodle")
    assignment = _moodle_assignment(template, assignment, scores)
    ours = max_points(assignment)
    for row in rows:
        entry = scores.get((lms.moodle_participant(row[lms.MOODLE_ID]), assignment))
        if entry is None:
            continue
        final, note = late.apply(entry) if entry.status == GRADED else (None, "")
        scale = _scale(row.get("Maximum Grade", ""), ours)
        if final is not None:
            row["Grade"] = f"{final * scale:.2f}"
        if note:
            print(f"  {row['Full name']} ({row[lms.MOODLE_ID]}): {note}")
        if "Feedback comments" in columns:
            row["Feedback comments"] = comment(entry, final, note)
    out = _write(out or EXPORT / f"moodle-{assignment}.csv", columns, rows, encoding, template)
    _unmatched({k: v for k, v in scores.items() if k[1] == assignment},
               {lms.moodle_participant(r[lms.MOODLE_ID]) for r in rows}, "worksheet")
    print(f"Moodle grading worksheet for {assignment}: {out} ({len(rows)} rows); upload it in the assignment:"
          " Grading action > Upload grading worksheet")
    return out


def _scale(maximum: str, ours: float) -> float:
    """Points to the worksheet's scale (its Maximum Grade) when that differs from the assignment's points."""
    try:
        theirs = float(maximum.replace(",", "."))
    except ValueError:
        return 1.0
    return theirs / ours if theirs > 0 and ours > 0 else 1.0


def to_csv(out: Path | None, late: Late) -> Path:
    """grades.csv with the late policy's columns (days late, penalty, final score)."""
    rows = []
    for e in sorted(grades(), key=lambda e: (e.student, e.assignment)):
        final, note = late.apply(e) if e.status == GRADED else (None, "")
        rows.append({"student_id": e.student, "assignment": e.assignment, "status": e.status, "reason": e.reason,
                     "score": _points(e.score), "max_score": _points(e.max_score), "late": "late" if e.late else "",
                     "late_note": note, "final_score": _points(final), "name": e.name, "lms_id": e.lms_id})
    out = _write(out or EXPORT / "grades.csv", list(rows[0]) if rows else ["student_id"], rows, "utf-8")
    print(f"Grades with the late policy: {out}")
    return out


def export(to: str, template: Path | None = None, out: Path | None = None, late: Late | None = None,
           assignment: str | None = None) -> Path:
    """Write the grades as ``to`` ("canvas", "moodle" or "csv") takes them; the file written."""
    late = late or Late()
    if to not in TARGETS:
        raise CourseError(f"--to must be one of {TARGETS}, not {to!r}")
    if late.percent is not None:
        print(f"Late policy: -{late.percent:g}% of the score per day late"
              + (f", due {late.due:%Y-%m-%d %H:%M}" if late.due else ""))
    if to == "csv":
        return to_csv(out, late)
    if template is None:
        what = "gradebook export (Grades > Export)" if to == "canvas" else "grading worksheet (Download grading worksheet)"
        raise CourseError(f"--to {to} needs the LMS's own {what} as the template")
    return to_canvas(template, out, late) if to == "canvas" else to_moodle(template, out, late, assignment)


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
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html_escape(entry.assignment)}'
            f"</title></head><body>{SUMMARY.format(html_escape(text))}</body></html>\n")


def _write_zip(path: Path, files: list[tuple[str, str]]) -> None:
    """Write a zip whole, then put it in place: an interrupted run leaves the old zip, never half a new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files:
            z.writestr(name, text)
    part.replace(path)


def pack_feedback(out: Path | None = None, late: Late | None = None) -> list[Path]:
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
    late = late or Late()
    out = out or EXPORT
    collected = {(e.student, e.assignment): e for e in submissions.read_manifest(MANIFEST)}
    entries = grades()
    for e in entries:  # collected again since grading: the manifest says what the student's work is now
        now = collected.get((e.student, e.assignment))
        if now is not None and now.status != GRADED:
            e.status, e.reason = now.status, now.reason
        elif now is not None and e.status == GRADED and now.submitted != e.submitted:
            e.status = "not graded yet"  # new work: its page comes with its grading
    removed = remove_stale(entries)
    sources = {key: e.source for key, e in collected.items()}
    made, missing, skipped, zips = [], [], [], {}
    for e in sorted(entries, key=lambda e: (e.assignment, e.student)):
        if not e.lms or is_test_student(e):
            continue
        stem = Path(expected_notebooks()[e.assignment]).stem
        src = sources.get((e.student, e.assignment), "")
        if e.status == GRADED:
            page = COURSE / "feedback" / e.student / e.assignment / f"{stem}.html"
            if not page.is_file():
                missing.append(f"{e.student}/{e.assignment}")
                continue
            final, note = late.apply(e)
            text = with_summary(page.read_text(encoding="utf-8"), comment(e, final, note))
        elif src:  # something was handed in, and nothing graded: say why
            text = notice_page(e, comment(e, None, ""))
        else:
            continue
        if e.lms == "canvas":
            prefix = canvas_prefix(src)
            if prefix is None:
                skipped.append(f"{e.student}/{e.assignment}")
                continue
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
        print(f"No LMS feedback to pack: students collected from a folder have theirs in {COURSE / 'feedback'}")
    return made
