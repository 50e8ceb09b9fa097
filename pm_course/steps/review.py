"""Written answers, read and scored by a person (``pm-course review``), and kept across regrades.

    pm-course review 02_averaging                   # course/review/02_averaging.csv and .html
    pm-course review 02_averaging --apply sheet.csv # its points and comments into the gradebook
    pm-course status                                # per assignment: graded, failed, awaiting review

A written answer is an nbgrader manually graded cell (``grade`` and
``solution`` in its metadata, with ``points``); the model answer in the
source notebook ends with a rubric saying what earns each point. The review
sheet has one row per student and written cell (``student_id, cell,
max_points, points, comment, answer``); points are empty until reviewed.
Applying it writes nbgrader's own fields (a grade's ``manual_score``, a
comment's ``manual_comment``), the ones nbgrader's formgrader writes, so a
score given either way counts the same: grades.csv, the exports and the
feedback pages read the gradebook.

Each grading records a hash of every written answer it read
(``course/review/answers/<assignment>/<student>.json``). When a regrade finds
the answer unchanged, its review stands; when the answer changed, its points
are cleared and it awaits review again (and this is printed).
"""
from __future__ import annotations

import csv
import html
import io
import math
import re
from pathlib import Path

from pm_course.state import files as state
from pm_course.state.course import Course, CourseError, assignment_names
from pm_course.state.written import (answer_parts, answer_record, awaiting, digest, graded_answers, notebook_stem,
                      open_gradebook, part_text, points_text, save_answer_record, sync, written_cells, written_totals)

SHEET = ("student_id", "cell", "max_points", "points", "comment", "answer", "answer_sha256")
# answer_sha256: the answer the row was made from (:func:`digest`), so that a sheet whose answer column was
# hidden, deleted or edited still applies only to that answer


FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet would run as a formula at the start of a cell


def cell_text(text: str) -> str:
    """A student's text made safe for a spreadsheet: a leading ``'`` where it would start a formula.

    A spreadsheet opening the sheet would otherwise run ``=HYPERLINK(...)``
    written by a student; the ``'`` shows the text as it is (and is not part
    of the answer when the sheet is applied).
    """
    return "'" + text if text.startswith(FORMULA) else text


def from_cell(text: str) -> str:
    """The text :func:`cell_text` was given."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA) else text


# --- the review sheet and page -----------------------------------------------------------
def _graded_students(course: Course, assignment: str) -> list[str]:
    from pm_course.state.grades_csv import read_grades

    return sorted(s for (s, a), r in read_grades(course.grades).items() if a == assignment and r["status"] == "graded")


def sheet_rows(course: Course, assignment: str) -> list[dict]:
    """One row per graded student and written cell, with what the gradebook holds."""
    cells = written_cells(assignment)
    rows = []
    with open_gradebook(course) as gradebook:
        for student in _graded_students(course, assignment):
            answers = graded_answers(course, assignment, student, cells) or {}
            for w in cells:
                grade = gradebook.find_grade(w["cell"], notebook_stem(assignment), assignment, student)
                comment = gradebook.find_comment(w["cell"], notebook_stem(assignment), assignment, student)
                if grade.manual_score is not None:
                    points = points_text(grade.manual_score)
                elif not awaiting(grade):  # nbgrader's 0 for an answer left as it was released
                    points = points_text(grade.auto_score or 0)
                else:
                    points = ""
                rows.append({"student_id": student, "cell": w["cell"], "max_points": points_text(w["points"]),
                             "points": points, "comment": cell_text(comment.manual_comment or ""),
                             "answer": cell_text(answers.get(w["cell"], "")),
                             "answer_sha256": digest(answers.get(w["cell"], ""))})
    return rows


def _check_assignment(course: Course, assignment: str) -> None:
    if assignment not in assignment_names():
        raise CourseError(f"no assignment {assignment!r}: expected one of {', '.join(assignment_names())}")
    if not written_cells(assignment):
        raise CourseError(f"{assignment} has no written answers to review (no manually graded cell)")
    if not _graded_students(course, assignment):
        raise CourseError(f"nothing of {assignment} graded yet: run pm-course grade first")


def write_sheet(course: Course, assignment: str) -> tuple[Path, Path]:
    """Write ``course/review/<assignment>.csv`` and ``.html``; the two files.

    A sheet already there whose points or comments are not in the gradebook
    (being filled in, not applied) is kept beside the new one, never overwritten.
    """
    from datetime import datetime

    _check_assignment(course, assignment)
    sync(course)
    rows = sheet_rows(course, assignment)
    course.review.mkdir(parents=True, exist_ok=True)
    out = course.review / f"{assignment}.csv"
    if out.is_file():
        known = {(r["student_id"], r["cell"]): (r["points"], r["comment"]) for r in rows}
        try:
            _, old = _read_sheet(out)
        except CourseError:
            old = [{}]
        if any(known.get((r.get("student_id"), r.get("cell"))) != (r.get("points"), r.get("comment")) for r in old):
            kept = out.with_name(f"{assignment}-{datetime.now():%Y%m%d-%H%M%S}.csv")
            out.rename(kept)
            print(f"{out.name} had points or comments that the gradebook does not (not applied yet, or cleared"
                  f" since because the answer changed): kept as {kept}")
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, SHEET)
    writer.writeheader()
    writer.writerows(rows)
    state.write_text(out, buffer.getvalue(), "utf-8-sig")  # the BOM: spreadsheets then read UTF-8
    page = course.review / f"{assignment}.html"
    state.write_text(page, review_page(course, assignment, rows))
    waiting = sum(r["points"] == "" for r in rows)
    print(f"Review sheet: {out} ({len(rows)} answers, {waiting} awaiting review): fill in points (and comments),"
          f" then pm-course review {assignment} --apply {out}")
    print(f"The answers beside the model answer: {page}")
    return out, page


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what a pasted picture may be on the page
DATA_IMAGE = re.compile(r"data:(image/(?:png|jpeg|gif|webp));base64,[A-Za-z0-9+/=\s]*", re.I)


def _images(cell) -> dict:
    """A markdown cell's attachments (pasted pictures) that may be shown: image types only, base64 only."""
    import base64
    import binascii

    out = {}
    for name, bundle in (cell.get("attachments") or {}).items():
        for mime in IMAGE_TYPES:
            data = bundle.get(mime) if isinstance(bundle, dict) else None
            data = "".join(data) if isinstance(data, list) else data
            if isinstance(data, str):
                try:
                    base64.b64decode(data, validate=True)
                except (binascii.Error, ValueError):
                    continue
                out[name] = {mime: data}
                break
    return out


def _allowed(tag: str, name: str, value: str) -> bool:
    """Which attributes stay on the review page: the feedback pages' own, and a data: URL only as an image."""
    from pm_course.grading.feedback_page import SAFE_ATTRIBUTES

    if name not in SAFE_ATTRIBUTES.get(tag, []) and name not in SAFE_ATTRIBUTES["*"]:
        return False
    if value.strip().lower().startswith("data:"):
        return tag == "img" and name == "src" and DATA_IMAGE.fullmatch(value.strip()) is not None
    return True


def markdown_html(source: str, images: dict | None = None, escape: bool = True) -> str:
    """Markdown as the review page shows it: maths typeset as MathML (as in the feedback pages), pasted
    pictures (``attachment:name``) inline, and nothing that runs.

    ``escape``: a student's raw HTML is shown as text, not markup. Whatever the
    text, the result is sanitised: no script, no event handler, a ``data:`` URL
    only as an image of :data:`IMAGE_TYPES`; an attachment that is missing or
    not such an image shows as its alt text.

    >>> markdown_html("$x^2$ <b>b</b>")[:40]
    '<p><math xmlns="http://www.w3.org/1998/M'
    """
    import bleach
    from nbconvert.filters.markdown_mistune import MarkdownWithMath

    from pm_course.grading.feedback_page import SAFE_TAGS, MathMLRenderer

    class Renderer(MathMLRenderer):
        def _embed_image_or_attachment(self, src: str) -> str:
            if src.startswith("attachment:"):
                bundle = self.attachments.get(src[len("attachment:"):], {})
                return next((f"data:{m};base64,{d}" for m, d in bundle.items()), "")
            return src

    try:
        made = MarkdownWithMath(renderer=Renderer(escape=escape, attachments=images or {})).render(source)
    except Exception:  # noqa: BLE001 -- a text the renderer cannot read is shown as it is
        made = f"<pre>{html.escape(source)}</pre>"
    return bleach.clean(made, tags=SAFE_TAGS, attributes=_allowed, protocols=["http", "https", "mailto", "data"],
                        strip=True, strip_comments=True)


PAGE_CSS = """
body{font:16px/1.5 system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:60rem;margin:0 auto;padding:1rem}
pre{white-space:pre-wrap;font:inherit;margin:0}
section.cell{border-top:2px solid #444;margin-top:2rem}
.model{background:#eef6ee;border-left:4px solid #2e7d32;padding:.5rem 1rem}
.prompt{background:#f3f3f3;padding:.5rem 1rem}
article{border:1px solid #bbb;border-radius:4px;padding:.5rem 1rem;margin:.75rem 0}
article h4{margin:.2rem 0}
.status{font-weight:600}
.waiting{color:#8a1c00}
.empty{color:#555;font-style:italic}
.answer img{max-width:100%;height:auto}
.part{border-top:1px dashed #999;margin-top:.5rem}
details{margin:.5rem 0;color:#333}
a{color:#0645ad}
"""


def _as_written(text: str) -> str:
    return f"<details><summary>As written</summary><pre>{html.escape(text)}</pre></details>"


def _answer_html(parts: list | None, w: dict, text: str) -> str:
    """One student's answer on the page: each of its cells rendered (maths, pasted pictures), then as written."""
    if parts is None:  # no graded notebook to read it from: the sheet's text
        return f"<div class=\"answer\">{markdown_html(text)}</div>{_as_written(text)}" if text else \
            "<p class=\"empty\">(no answer)</p>"
    if not parts:
        return "<p class=\"empty\">(no answer: the answer cell is gone)</p>"
    shown = []
    for i, cell in enumerate(parts):
        piece = part_text(cell, i, w["prefix"])
        if piece:
            shown.append(f"<div class=\"{'part' if shown else 'first'}\">{markdown_html(piece, _images(cell))}</div>")
    if not shown:
        return "<p class=\"empty\">(no answer)</p>"
    split = f"<p class=\"empty\">(written in {len(shown)} cells)</p>" if len(shown) > 1 else ""
    return f"<div class=\"answer\">{split}{''.join(shown)}</div>{_as_written(text)}"


def review_page(course: Course, assignment: str, rows: list[dict]) -> str:
    """A self-contained page (no script, no file beside it): each written cell's prompt, model answer and answers.

    Maths is typeset as MathML and pasted pictures shown inline, as in the
    feedback pages; an answer written over several cells is shown whole; each
    text also as written.
    """
    from pm_course.state.pages import CSP

    e = html.escape
    cells = written_cells(assignment)
    parts_of: dict[str, dict | None] = {}
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n{CSP}\n"
             f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
             f"<title>Written answers of {e(assignment)}</title>\n<style>{PAGE_CSS}</style>\n</head>\n<body>\n<main>\n"
             f"<h1>Written answers of {e(assignment)}</h1>\n"
             f"<p>Score them in <code>course/review/{e(assignment)}.csv</code> (the <code>points</code> and"
             f" <code>comment</code> columns), then run <code>pm-course review {e(assignment)} --apply"
             f" course/review/{e(assignment)}.csv</code>. Maths is typeset and pasted pictures shown; each text is"
             f" also shown as written.</p>\n"
             "<nav aria-label=\"Written cells\"><ul>\n"]
    for w in cells:
        n = sum(r["cell"] == w["cell"] for r in rows)
        waiting = sum(r["cell"] == w["cell"] and r["points"] == "" for r in rows)
        parts.append(f"<li><a href=\"#{e(w['cell'])}\">{e(w['cell'])}</a>: {n} answers,"
                     f" {waiting} awaiting review</li>\n")
    parts.append("</ul></nav>\n")
    for w in cells:
        parts.append(f"<section class=\"cell\" id=\"{e(w['cell'])}\" aria-labelledby=\"h-{e(w['cell'])}\">\n"
                     f"<h2 id=\"h-{e(w['cell'])}\">{e(w['cell'])} ({points_text(w['points'])} points)</h2>\n"
                     f"<h3>The question</h3>\n<div class=\"prompt\">{markdown_html(w['prompt'], escape=False)}</div>\n"
                     f"<h3>The model answer and its rubric</h3>\n"
                     f"<div class=\"model\">{markdown_html(w['model'], escape=False)}{_as_written(w['model'])}</div>\n"
                     f"<h3>The students' answers</h3>\n")
        for r in (r for r in rows if r["cell"] == w["cell"]):
            if r["points"] == "":
                status = "<span class=\"status waiting\">awaiting review</span>"
            else:
                status = f"<span class=\"status\">{e(r['points'])} of {e(r['max_points'])} points</span>"
            if r["comment"]:
                status += f" &mdash; {e(from_cell(r['comment']))}"
            if r["student_id"] not in parts_of:
                parts_of[r["student_id"]] = answer_parts(course, assignment, r["student_id"], cells)
            found = parts_of[r["student_id"]]
            answer = _answer_html(None if found is None else found.get(w["cell"]), w, from_cell(r["answer"]))
            parts.append(f"<article aria-label=\"{e(r['student_id'])}, {e(w['cell'])}\">\n"
                         f"<h4>{e(r['student_id'])}</h4>\n<p>{status}</p>\n{answer}\n</article>\n")
        parts.append("</section>\n")
    parts.append("</main>\n</body>\n</html>\n")
    return "".join(parts)


# --- applying a filled-in sheet ----------------------------------------------------------
def _read_sheet(path: Path) -> tuple[list[str], list[dict]]:
    if not path.is_file():
        raise CourseError(f"{path}: no such review sheet")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise CourseError(f"{path}: not UTF-8 text (byte {err.start}); save the sheet as CSV UTF-8") from None
    reader = csv.DictReader(io.StringIO(text))  # not splitlines(): an answer's own lines stay in its cell
    columns = [c.strip() for c in reader.fieldnames or []]
    reader.fieldnames = columns
    missing = [c for c in ("student_id", "cell", "points") if c not in columns]
    if missing and len(columns) == 1 and ";" in columns[0]:
        raise CourseError(f"{path}: separated by semicolons, not commas (a spreadsheet in a comma-decimal"
                          " locale): save it comma-separated, as \"CSV UTF-8 (comma delimited)\", and apply it again")
    if missing:
        raise CourseError(f"{path}, row 1: no column {', '.join(repr(c) for c in missing)} (the header has"
                          f" {', '.join(repr(c) for c in columns) or 'nothing'}; expected {', '.join(SHEET)})")
    return columns, list(reader)


def apply(course: Course, assignment: str, path: Path) -> int:
    """Record a filled-in review sheet's points and comments as nbgrader manual grades; how many were recorded.

    Every row is checked first (known student and cell, points a number from 0
    to the cell's points, one row per student and cell, the answer the one
    graded): any problem stops it with the file, row and column named, and
    nothing is recorded.
    """
    _check_assignment(course, assignment)
    columns, rows = _read_sheet(path)
    cells = {w["cell"]: w for w in written_cells(assignment)}
    students = set(_graded_students(course, assignment))
    problems, todo, seen = [], [], {}
    answers: dict[str, dict | None] = {}
    for number, row in enumerate(rows, start=2):  # row 1 is the header, as a spreadsheet counts
        where = f"{path}, row {number}"
        student, cell = (row.get("student_id") or "").strip(), (row.get("cell") or "").strip()
        raw, comment = (row.get("points") or "").strip(), from_cell((row.get("comment") or "").strip())
        bad = []
        if student not in students:
            bad.append(f"column student_id: {student!r} has no graded {assignment}"
                       + (f" (graded: {', '.join(sorted(students)[:8])}{', ...' if len(students) > 8 else ''})"))
        if cell not in cells:
            bad.append(f"column cell: {cell!r} is not a written answer of {assignment} (expected one of"
                       f" {', '.join(cells)})")
        points = None
        if raw:
            try:
                points = float(raw.replace(",", ".") if raw.count(",") == 1 and "." not in raw else raw)
            except ValueError:
                points = None
            if points is None or not math.isfinite(points):
                bad.append(f"column points: {raw!r} is not a number")
                points = None
            elif cell in cells and not 0 <= points <= cells[cell]["points"]:
                bad.append(f"column points: {raw} is outside 0 to {points_text(cells[cell]['points'])},"
                           f" the points of {cell}")
        if not bad and (student, cell) in seen:
            bad.append(f"columns student_id, cell: {student} {cell} is also on row {seen[student, cell]}")
        if not bad and (raw or comment):
            if student not in answers:
                answers[student] = graded_answers(course, assignment, student, list(cells.values()))
            now = (answers[student] or {}).get(cell, "")
            given = (row.get("answer_sha256") or "").strip()
            if not given and "answer" in columns:
                given = digest(from_cell(row.get("answer") or ""))
            if not given:
                bad.append(f"columns answer, answer_sha256: {student}'s row says neither which answer it scores nor"
                           " its hash (deleted columns?): write the sheet again with pm-course review"
                           f" {assignment}, and keep those columns (hide them if they are in the way)")
            elif given != digest(now):
                bad.append(f"column answer: not the answer graded last (the student's work was graded again since"
                           f" this sheet was written): write the sheet again with pm-course review {assignment}")
        seen.setdefault((student, cell), number)
        problems += [f"{where}, {b}" for b in bad]
        if not bad and (raw or comment):
            todo.append((student, cell, points, comment))
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise CourseError("Nothing was applied: the review sheet has problems:\n  " + "\n  ".join(shown))
    with open_gradebook(course) as gradebook:
        for student, cell, points, comment in todo:
            grade = gradebook.find_grade(cell, notebook_stem(assignment), assignment, student)
            if points is not None:
                grade.manual_score = points
                grade.needs_manual_grade = False
            note = gradebook.find_comment(cell, notebook_stem(assignment), assignment, student)
            note.manual_comment = comment or None
        gradebook.db.commit()
    for student in sorted({t[0] for t in todo}):  # the review refers to the answer graded last: record its hash
        record = answer_record(course, assignment, student)
        now = answers.get(student) or graded_answers(course, assignment, student, list(cells.values())) or {}
        for s, cell, points, _ in todo:
            if s == student:
                record[cell] = {**record.get(cell, {}), "sha256": digest(now.get(cell, "")),
                                "points": cells[cell]["points"],  # reviewed out of these: a source change tells
                                **({"reviewed": points} if points is not None else {})}
        save_answer_record(course, assignment, student, record)
    scored = sum(t[2] is not None for t in todo)
    print(f"Recorded {scored} scores and {sum(bool(t[3]) for t in todo)} comments of {assignment} from {path}"
          " in the gradebook.")
    changed = sync(course)
    print(f"grades.csv: {len(changed)} row(s) updated; the feedback pages of those students were made again.")
    return len(todo)


# --- pm-course status --------------------------------------------------------------------
def status(course: Course, update: bool = True) -> str:
    """Per assignment collected: submissions, graded, could not be graded, answers awaiting review.

    With ``update`` (the course folder's lock held), grades.csv and the pages are first brought up to date
    with reviews entered since (:func:`sync`); without it, nothing is written and those rows show as out of date.
    """
    from pm_course.state import submissions as submissions_mod
    from pm_course.state.grades_csv import read_grades
    from pm_course.state.pages import is_test_student

    entries = submissions_mod.read_manifest(course.manifest)
    if not entries:
        raise CourseError(f"nothing collected yet ({course.manifest} is missing): run pm-course"
                          " collect first")
    entries = [e for e in entries if not is_test_student(e)]  # Canvas's test student: collected, never counted
    if update:
        sync(course)
    rows = read_grades(course.grades)
    collected = sorted({e.assignment for e in entries})
    head = ("assignment", "submissions", "graded", "could not be graded", "not graded yet", "awaiting review")
    table = [head]
    waiting_total = 0
    gradebook = open_gradebook(course) if course.gradebook.is_file() else None
    try:
        for a in collected:
            mine = [e for e in entries if e.assignment == a and e.status != submissions_mod.MISSING]
            # grades.csv says what became of each; a notebook collect could not use is not in it yet
            states = [rows.get((e.student, a), {}).get("status") or e.status for e in mine]
            states = [s if (e.student, a) in rows or s == submissions_mod.FAILED else "not graded yet"
                      for e, s in zip(mine, states)]
            submitted, graded = len(mine), states.count(submissions_mod.GRADED)
            failed = states.count(submissions_mod.FAILED)
            graded_students = {e.student for e, s in zip(mine, states) if s == submissions_mod.GRADED}
            waiting = 0
            if gradebook is not None and written_cells(a):
                waiting = sum(t[2] for s, t in written_totals(gradebook, a).items() if s in graded_students)
            waiting_total += waiting
            table.append((a, str(submitted), str(graded), str(failed), str(submitted - graded - failed), str(waiting)))
    finally:
        if gradebook is not None:
            gradebook.close()
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in table]
    if waiting_total:
        lines.append(f"{waiting_total} written answer(s) await review: pm-course review ASSIGNMENT writes the sheet.")
    lines += _out_of_date(course, rows, entries)
    return "\n".join(lines)


def _out_of_date(course: Course, rows: dict, entries: list) -> list[str]:
    """The lines of status that list, per assignment, what is not graded and what is out of date."""
    from pm_course.state import fingerprints
    from pm_course.state import submissions as submissions_mod

    found = fingerprints.stale(course, rows, {(e.student, e.assignment): e for e in entries})
    lines = []
    unfinished = sorted((k, r["reason"] or r["status"]) for k, r in rows.items()
                        if r.get("status") in (submissions_mod.NOT_YET, submissions_mod.MACHINE))
    for assignment in sorted({a for _, a in found} | {k[1] for k, _ in unfinished}):
        lines.append(f"{assignment}:")
        lines += [f"  not graded: {s} ({why})" for (s, a), why in unfinished if a == assignment]
        lines += [f"  out of date: {s}: {why}" for (s, a), why in sorted(found.items()) if a == assignment]
    if found:
        lines.append(f"{len(found)} row(s) out of date: export and feedback refuse them until pm-course grade"
                     " (or --force leaves them out).")
    return lines
