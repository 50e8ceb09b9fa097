"""Grades and feedback into Canvas or Moodle through their APIs (``pm-course push``): a preview, then ``--apply``.

    pm-course push --to canvas --assignment 01_copying            # preview: what would change, student by student
    pm-course push --to canvas --assignment 01_copying --apply    # write exactly that preview

What a push never does:

- **overwrite the LMS's own values.** ``course/export/pushed.json`` keeps what
  pm-course last put in each LMS cell (the last grade pushed here, and any
  exported as a file since: ``exported.json``). A grade in the LMS that is
  none of those (fixed in SpeedGrader or Moodle's grader, even back to an
  earlier pushed grade) and an excused submission are kept and listed,
  unless ``--overwrite-lms-edits`` (an excusal is always kept).
- **write what the preview did not show.** ``--apply`` reads the LMS again and
  recomputes the plan; if a student's cell or grade changed since the preview
  (someone else graded, a regrade), it refuses, naming each, and writes nothing.
- **lose track.** Each student's writes are recorded in a journal as they are
  read back; an interrupted ``--apply`` (a network error, Ctrl-C) is finished by
  the next one (or a new preview's), which writes only what is missing and
  never posts a Canvas comment twice. A write the LMS answered but did not
  keep (read back: another value) is reported, never counted done.
- **take a token from the command line or the course file.** ``$CANVAS_API_TOKEN``
  / ``$MOODLE_TOKEN`` or ``--token-file``; it is never written anywhere.

Rate limits (HTTP 429, or Canvas's older 403 "Rate Limit Exceeded") are waited
out and the same request sent again; the command exits non-zero, naming each
student, when anything was not pushed.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pm_course.state import lms_cells
from pm_course.state import files as state
from pm_course.state.config import OTHER_SECTION, Settings
from pm_course.state.course import Course, CourseError, assignment_names, expected_notebooks
from pm_course.lms.api import Interrupted, StillRateLimited, points, same
from pm_course.lms.canvas import Canvas
from pm_course.lms.moodle import Moodle
from pm_course.lms.outcome import Late, comment, fresh, notice_page, with_summary
from pm_course.state.grades_csv import entries as grade_entries
from pm_course.state.submissions import GRADED

TOKENS = {"canvas": "CANVAS_API_TOKEN", "moodle": "MOODLE_TOKEN"}
NAMES = {"canvas": "Canvas", "moodle": "Moodle"}


# --- the plan ---------------------------------------------------------------------
@dataclass
class Row:
    """What push does for one student: ``action`` write, same (the LMS has it), kept (the LMS's own) or skip."""

    student: str
    lms_id: str
    name: str
    action: str
    old: str = ""
    new: str = ""
    why: str = ""
    comment: str = ""
    page: str = ""  # the page's SHA-256 ("" for none)
    deducted: str = ""  # what the LMS's own late policy takes off the grade written (Canvas)
    partial: int = 0    # written answers awaiting review: the grade is the autograded part and the reviews so far

    def key(self) -> tuple:
        return (self.action, self.old, self.new, self.page)


@dataclass
class Plan:
    lms: str
    assignment: str
    rows: list[Row] = field(default_factory=list)
    posting: str = ""
    target: str = ""    # the LMS assignment written to: its name, id and points
    mismatch: str = ""  # why that is not the course file's column for this assignment ("" when it is)


def _record(course: Course) -> dict:
    try:
        return json.loads(course.pushed.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def _exports(course: Course, kind: str, assignment: str, lms_id: str) -> list[str]:
    """The values ``export`` put in this cell's gradebook file (exported.json), in the order first exported."""
    column = course.settings.assignment(assignment).canvas or ""
    key = lms_cells.canvas_key(lms_id, column) if kind == "canvas" else f"{lms_id}|{assignment}"
    return lms_cells.load(course).get(kind, {}).get(key, [])


def _ours(course: Course, record: dict, kind: str, assignment: str, lms_id: str) -> list[str]:
    """The values the cell may hold from pm-course: the last one pushed, and any exported as a file since.

    Before any push, every value exported as a file (which of them was imported is not known). A value
    pushed before the last push is not pm-course's any more: an instructor who put it back by hand (a late
    penalty waived in SpeedGrader) made it theirs.
    """
    files = _exports(course, kind, assignment, lms_id)
    pushed = record.get(kind, {}).get(assignment, {}).get(lms_id, [])
    if not pushed:
        return list(files)
    return [pushed[-1]["grade"], *files[pushed[-1].get("exports", 0):]]


def _page(course: Course, entry, text: str) -> str | None:
    """The feedback page as the student gets it: the comment's text at its top; None when there is none."""
    page = course.page(entry.student, entry.assignment)
    if entry.status == GRADED:
        return with_summary(page.read_text(encoding="utf-8"), text) if page.is_file() else None
    return notice_page(entry, text)


def plan(course: Course, kind: str, assignment: str, lms, late: Late, overwrite: bool, force: bool,
         partial: dict | None = None) -> tuple[Plan, dict]:
    """What push would write now (reading the LMS's cells), and the pages by student.

    ``partial``: what an interrupted ``--apply`` wrote of each student (its journal), said in the preview.
    A graded student the push cannot reach (not in the LMS, no page) is a ``skip`` row that keeps its ``new``
    grade: ``--apply`` names it as not pushed.
    """
    rows = [e for e in grade_entries(course.grades) if e.assignment == assignment and e.lms == kind and e.lms_id]
    if not rows:
        raise CourseError(f"nothing of {assignment} was collected from {NAMES[kind]}: pm-course collect --from {kind}"
                          f" ZIP --assignment {assignment}, then pm-course grade, before pushing")
    rows = fresh(course, rows, force, "push")
    lms.map_students(rows)
    lms_late = lms.late_policy()
    if lms_late and late.percent:
        raise CourseError(f"two late policies would apply to {assignment}: {NAMES[kind]}'s Late Policy deducts"
                          f" {lms_late:g}% per late interval from what is written, and {late.origin} takes"
                          f" {late.percent:g}% per day before. Turn one off: late_penalty = 0 in the course file (and"
                          f" let {NAMES[kind]} deduct), or {NAMES[kind]}'s Late Policy (Gradebook > Settings).")
    late.check([e for e in rows if e.status == GRADED])
    theirs = lms.points()
    ours_max = rows[0].max_score or 0
    scale = 1.0
    if theirs is not None and ours_max and abs(theirs - ours_max) > 1e-9:
        if theirs <= 0:
            raise CourseError(f"{NAMES[kind]}'s assignment is out of {theirs:g} points: cannot put {assignment}'s"
                              f" {ours_max:g} on it")
        scale = theirs / ours_max
        print(f"Rescaled: {NAMES[kind]}'s assignment is out of {theirs:g} points, {assignment} out of"
              f" {ours_max:g}: scores x {theirs:g}/{ours_max:g}")
    if theirs is None:
        print(f"{NAMES[kind]}'s assignment sets no points: grades go as {assignment}'s points (out of {ours_max:g});"
              " give the assignment its points in the LMS first if it should count on another scale")
    cells, record, config = lms.cells(), _record(course), late.config
    out, pages = Plan(kind, assignment, posting=lms.posting()), {}
    out.target, out.mismatch = _target(kind, assignment, lms, theirs, config)
    for e in sorted(rows, key=lambda e: e.student):
        row = Row(e.student, e.lms_id, e.name, "skip")
        out.rows.append(row)
        cell = cells.get(e.lms_id)
        if cell is not None:
            row.old = "EX" if cell.excused else cell.grade
            if cell.deducted:
                row.deducted = points(cell.deducted)
        if e.status == GRADED:
            final, note = late.apply(e)
            row.new = points(final * scale)
        if cell is None:
            row.why = f"not a student of this assignment in {NAMES[kind]}"
            server, where = config.servers.get(kind), config.source.name if config.source else "the course file"
            if e.student in config.dropped:  # said once in the course file: no longer a grade left to push
                row.why, row.new = f"dropped the course (dropped in {where})", ""
            elif server is not None and server.unlisted == OTHER_SECTION:
                row.why, row.new = (f"another section's (not in this {NAMES[kind]} course; unlisted ="
                                    f" \"{OTHER_SECTION}\" in {where})", "")
            continue
        if e.status != GRADED:
            row.why = {"not submitted": "nothing submitted"}.get(e.status, e.status + (f": {e.reason}" if e.reason
                                                                                    else ""))
            continue
        row.comment = comment(e, final, note)
        row.partial = int(e.awaiting_review or 0)
        page = _page(course, e, row.comment)
        if page is None:
            row.why = "no feedback page (grade again to make it)"
            continue
        row.page = hashlib.sha256(page.encode()).hexdigest()
        pages[e.student] = page
        mine = _ours(course, record, kind, assignment, e.lms_id)
        last = record.get(kind, {}).get(assignment, {}).get(e.lms_id, [])
        if cell.excused:
            row.action, row.why = "kept", "excused in the LMS"
        elif cell.grade and same(cell.grade, row.new) and last and last[-1].get("page") == row.page:
            row.action, row.why = "same", "the LMS has it"
        elif not cell.grade or any(same(cell.grade, v) for v in mine) or same(cell.grade, row.new):
            row.action = "write"
        elif overwrite:
            row.action, row.why = "write", "replaces a grade changed in the LMS (--overwrite-lms-edits)"
        else:
            row.action = "kept"
            row.why = ("changed in the LMS since pm-course's last push" + (f" (pushed {last[-1]['grade']})" if last
                       else " (not pushed by pm-course)") + "; --overwrite-lms-edits replaces it")
        step = _carried((partial or {}).get(e.student), row)
        if row.action == "write" and step:
            row.why = ("finishes an interrupted push: the grade and comment are in, the feedback page is not"
                       if step.get("grade") else "finishes an interrupted push: the comment is in, the grade is not")
    return out, pages


def _target(kind: str, assignment: str, lms, theirs: float | None, config: Settings) -> tuple[str, str]:
    """(the LMS assignment push writes to, named with its id and points; why it is not the course file's column
    for ``assignment``, "" when it is). Canvas's column is "<name> (<id>)"; Moodle's name is ``moodle`` when set."""
    title, settings = lms.title(), config.assignment(assignment)
    target = (f'{NAMES[kind]} assignment "{title}" (id {lms.assignment_id if kind == "canvas" else lms.id},'
              f' {"no points set" if theirs is None else f"out of {theirs:g} points"})')
    if kind == "canvas":
        expected = settings.canvas_name
        key = f'canvas = "{settings.canvas}"'
    else:
        expected, key = (settings.moodle or "").strip(), f'moodle = "{settings.moodle}"'
    if expected and title.strip() != expected:
        return target, (f'{target} is not the column the course file gives {assignment} ({key}): a wrong id would'
                        f' put these grades in another assignment')
    return target, ""


def _carried(step: dict | None, row: Row) -> dict:
    """What an interrupted ``--apply`` already wrote of ``row`` and need not write again: the comment (Canvas
    keeps every comment posted: posting it twice shows it twice) when it was for this same grade, and the grade
    when the LMS still holds it."""
    if not step or not step.get("comment") or step.get("for") != row.new:
        return {}
    if step["comment"] is not True and step["comment"] != _text_digest(row.comment):
        return {}  # another comment for the same grade (a review since, a late note): the current one is posted
    return {"comment": step["comment"], "for": row.new, **({"grade": row.new} if same(row.old, row.new) else {})}


def _text_digest(text: str) -> str:
    """What the journal keeps of a comment posted: its SHA-256, so that a retry knows whether it is this one."""
    return hashlib.sha256(text.encode()).hexdigest()


def show(p: Plan) -> str:
    """The preview, one line a student."""
    lines = [f"{NAMES[p.lms]}: {p.assignment} -> {p.target}" if p.target else f"{NAMES[p.lms]}: {p.assignment}"]
    if p.mismatch:
        lines.append(f"WARNING: {p.mismatch}. --apply refuses until the id or the name is right.")
    width = max([len(r.student) for r in p.rows] + [7])
    for r in p.rows:
        if r.action == "write":
            what = f"{r.old or '(none)'} -> {r.new}, comment and feedback page" + (f"  ({r.why})" if r.why else "")
        elif r.action == "same":
            what = f"{r.old}: unchanged ({r.why})"
        elif r.action == "kept":
            what = f"{r.old}: kept, {r.why}" + (f"; pm-course's {r.new}" if r.new else "")
        else:
            what = f"skipped: {r.why}" + (f" (graded {r.new}: NOT PUSHED)" if r.new else "")
        if r.deducted:
            what += f"  [{NAMES[p.lms]}'s Late Policy takes off {r.deducted}]"
        if r.partial and r.new:
            what += f"  [partial: {r.partial} written answer(s) await review]"
        lines.append(f"  {r.student:<{width}}  {what}")
    counts = {a: sum(r.action == a for r in p.rows) for a in ("write", "same", "kept", "skip")}
    unpushed = sum(r.action == "skip" and bool(r.new) for r in p.rows)
    lines.append(f"{counts['write']} to write, {counts['same']} unchanged, {counts['kept']} kept as the LMS has"
                 f" them, {counts['skip']} skipped" + (f" ({unpushed} of them graded: --apply names them as not"
                                                         " pushed)" if unpushed else ""))
    graded = [r for r in p.rows if r.new]
    partial = [r for r in graded if r.partial]
    if partial:
        lines.append(f"{len(partial)} of {len(graded)} grades are partial (written answers awaiting review:"
                     " pm-course review); their comments say so, and a push after the review sends the whole grade")
    if p.posting:
        lines.append(p.posting)
    return "\n".join(lines)


# --- the command ------------------------------------------------------------------
def token(kind: str, token_file: Path | None) -> str:
    """The API token: ``--token-file`` (readable by its owner only, else a warning), else the environment."""
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise CourseError(f"--token-file {token_file}: {err.strerror}") from None
        if token_file.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH):
            print(f"warning: {token_file} can be read by others: chmod 600 {token_file}")
        if not text:
            raise CourseError(f"--token-file {token_file} is empty")
        return text
    text = os.environ.get(TOKENS[kind], "").strip()
    if not text:
        how = ("Canvas: Account > Settings > Approved integrations > New access token" if kind == "canvas" else
               "Moodle: a web-service token from your administrator (Site administration > Server > Web services >"
               " Manage tokens), for a service with mod_assign_get_assignments, mod_assign_list_participants,"
               " mod_assign_get_grades and mod_assign_save_grades, and file uploads")
        raise CourseError(f"no {NAMES[kind]} token: set ${TOKENS[kind]} or pass --token-file FILE ({how}); a token"
                          " is never taken from the command line or the course file")
    return text


def _client(kind: str, assignment: str, config: Settings, secret: str):
    server = config.servers.get(kind)
    where = config.source or "course.toml"
    if server is None:
        raise CourseError(f"{where} has no [{kind}] table: add url and course (pm-course init shows them)")
    settings = config.assignment(assignment)
    if kind == "canvas":
        if settings.canvas_id is None:
            raise CourseError(f"{where}: [assignments.{assignment}] canvas = \"<column> (<id>)\" is needed: its"
                              " number is the Canvas assignment's id")
        return Canvas(server, secret, settings.canvas_id)
    if settings.moodle_id is None:
        raise CourseError(f"{where}: [assignments.{assignment}] moodle_id is needed: the Moodle assignment's id")
    return Moodle(server, secret, settings.moodle_id)


def _save_json(path: Path, data) -> None:
    state.write_text(path, json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def _limited(kind: str, err: Exception, done: str) -> CourseError:
    """The error for an LMS that rate-limited every retry: not unreachable, busy; when to try again."""
    return CourseError(f"{NAMES[kind]} is rate-limiting this token ({err}). {done} Wait a few minutes ({NAMES[kind]}"
                       " refills a token's quota as its requests finish; other scripts or integrations using the same"
                       " token share it), then run the same command again.")


def _reach(kind: str, config: Settings, err: Interrupted) -> CourseError:
    """The error for an LMS that could not be reached before anything was written."""
    server = config.servers.get(kind)
    cause = str(err)
    how = ("a secure connection (TLS) could not be made" if "SSL" in cause else
           "its name could not be looked up" if "NameResolution" in cause or "resolve" in cause else
           "no answer in time" if "Timeout" in cause else "the connection failed")
    return CourseError(f"could not reach {NAMES[kind]} at {getattr(server, 'url', '?')} ([{kind}] url in"
                       f" {config.source or 'course.toml'}): {how} ({cause}). Nothing was written.")


def _options(late: Late, assignment: str, overwrite: bool) -> dict:
    """The options a preview was made with, which its ``--apply`` must repeat."""
    due = late.dues.get(assignment)
    return {"late penalty": late.percent, "due": due.isoformat() if due else None,
            "times": len(late.times), "overwrite-lms-edits": overwrite}


def push(course: Course, kind: str, assignment: str, apply: bool = False, overwrite_lms_edits: bool = False,
         token_file: Path | None = None, late: Late | None = None, force: bool = False) -> None:
    """Preview (or, with ``apply``, write) the grades, comments and feedback pages of ``assignment`` in ``kind``.

    Raises
    ------
    CourseError
        When the preview is missing or out of date (``apply``), and at the end when any
        student's grade was not pushed or not kept, naming each.
    """
    if assignment not in assignment_names():
        raise CourseError(f"--assignment {assignment!r} is not an assignment: expected one of"
                          f" {', '.join(assignment_names())}")
    late = late or Late.of(course.settings)
    secret = token(kind, token_file)
    preview_file = course.pushes / f"{kind}-{assignment}.json"
    journal_file = course.pushes / f"{kind}-{assignment}.journal.json"
    options = _options(late, assignment, overwrite_lms_edits)
    try:
        journal = json.loads(journal_file.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        journal = {}
    try:
        lms = _client(kind, assignment, late.config, secret)
        now, pages = plan(course, kind, assignment, lms, late, overwrite_lms_edits, force, journal.get("done"))
    except StillRateLimited as err:
        raise _limited(kind, err, "Nothing was written.") from None
    except Interrupted as err:
        raise _reach(kind, late.config, err) from None
    if apply and now.mismatch:
        raise CourseError(f"{now.mismatch}. Nothing was written: correct the id (or the column's name) in"
                          f" {late.config.source or 'course.toml'}, then preview again.")
    if not apply:
        print(show(now))
        _save_json(preview_file, {"made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                  "options": options, "rows": [asdict(r) for r in now.rows]})
        print(f"Preview saved ({preview_file}). Nothing was written to {NAMES[kind]}: pm-course push --to {kind}"
              f" --assignment {assignment} --apply writes exactly this.")
        return
    try:
        _apply(course, lms, now, pages, preview_file, journal_file, journal, late.config, options)
    except StillRateLimited as err:
        raise _limited(kind, err, "What was written and read back is recorded; the same push --apply finishes the"
                                  " rest, writing nothing twice.") from None
    except KeyboardInterrupt:
        raise CourseError(f"push stopped (interrupted). What was written to {NAMES[kind]} and read back is recorded"
                          " (the student being written when it stopped included, as far as it got): run the same"
                          " push --apply again to finish the rest; nothing is written twice.") from None
    except Interrupted as err:
        raise CourseError(f"push stopped: the connection to {NAMES[kind]} failed ({err}). What was written and read"
                          " back is recorded; run the same push --apply again to finish the rest.") from None


def _apply(course: Course, lms, now: Plan, pages: dict, preview_file: Path, journal_file: Path, journal: dict,
           config: Settings,
           options: dict) -> None:
    """Write ``now`` as its saved preview showed it; ``journal``: what earlier --apply runs wrote (push read it)."""
    kind, assignment = now.lms, now.assignment
    again = f"pm-course push --to {kind} --assignment {assignment}"
    try:
        preview = json.loads(preview_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if _record(course).get(kind, {}).get(assignment):
            raise CourseError(f"no preview of {assignment} for {NAMES[kind]} to apply: the last --apply finished it"
                              f" (and removed it). {again} (without --apply) shows whether anything is left to"
                              " write.") from None
        raise CourseError(f"no preview of {assignment} for {NAMES[kind]}: run {again} first (without --apply), read"
                          " it, then --apply") from None
    made = preview.get("options")
    if made is not None and made != options:
        differ = "; ".join(f"{k}: {made.get(k)!r} in the preview, {options.get(k)!r} now" for k in options
                           if made.get(k) != options.get(k))
        raise CourseError(f"this --apply's options are not the preview's ({differ}). Nothing was written: give"
                          f" --apply the preview's options, or run {again} with these and read the new preview.")
    carried = {}
    if journal and journal.get("preview") != preview["made"]:  # a new preview after an interrupted --apply
        carried, journal = journal.get("done", {}), {}
    journal.setdefault("preview", preview["made"])
    done = journal.setdefault("done", {})
    seen = {r["student"]: Row(**r) for r in preview["rows"]}
    changed = []
    for r in now.rows:
        before = seen.get(r.student)
        if r.student in done:
            continue  # written (in part) by an earlier --apply of this preview: finished below
        if before is None or before.key() != r.key():
            was = "not in the preview" if before is None else (
                f"the preview: {before.action} {before.old or '(none)'} -> {before.new or '-'}")
            changed.append(f"{r.student} ({was}; now: {r.action} {r.old or '(none)'} -> {r.new or '-'})")
    gone = sorted(set(seen) - {r.student for r in now.rows})
    changed += [f"{s} (in the preview, not now)" for s in gone]
    if changed:
        raise CourseError(f"{NAMES[kind]} or the grades changed since the preview ({preview['made']}), for"
                          f" {len(changed)} student(s): {'; '.join(changed)}. Nothing was written: run {again}"
                          " again and read the new preview.")
    record = _record(course)
    cells = record.setdefault(kind, {}).setdefault(assignment, {})
    failed, wrote = [], 0
    with tempfile.TemporaryDirectory(prefix="pm-push-") as tmp:
        for r in now.rows:
            if r.action != "write":
                continue
            step = done.setdefault(r.student, {})
            if not step:
                step.update(_carried(carried.get(r.student), r))
            page = Path(tmp) / f"feedback-{Path(expected_notebooks()[assignment]).stem}.html"
            page.write_text(pages[r.student], encoding="utf-8")
            try:
                lost = ""
                if kind == "canvas":  # grade and comment in one PUT, read back; then the page
                    if not step.get("grade"):
                        # Canvas keeps every comment posted: once posted, a retry sends the grade alone
                        posted = step.get("comment") in (True, _text_digest(r.comment))
                        lms.write_grade(r.lms_id, r.new, "" if posted else r.comment)
                        step.update({"comment": _text_digest(r.comment), "for": r.new})
                        _save_json(journal_file, journal)
                        lost = _read_back(lms, r)
                        if not lost:
                            step["grade"] = r.new
                            _save_json(journal_file, journal)
                    if not lost:
                        lms.write_page(r.lms_id, page)
                else:  # grade, comment and page in one call (each save replaces the last), read back
                    lms.write(r.lms_id, r.new, r.comment, page)
                    lost = _read_back(lms, r)
                if lost:
                    failed.append(lost)
                    if not step:
                        done.pop(r.student)
                    _save_json(journal_file, journal)
                    continue
                step["grade"] = r.new
            except (Interrupted, KeyboardInterrupt):
                _save_json(journal_file, journal)
                _save_record(course, record)
                raise
            except CourseError as err:
                failed.append(f"{r.student}: {err}")
                if not step:
                    done.pop(r.student)
                _save_json(journal_file, journal)
                continue
            step["page"] = r.page
            cells.setdefault(r.lms_id, []).append({"grade": r.new, "page": r.page, "at": datetime.now(
                timezone.utc).isoformat(timespec="seconds"), "exports": len(_exports(course, kind, assignment,
                                                                                    r.lms_id))})
            _save_json(journal_file, journal)
            _save_record(course, record)
            wrote += 1
            print(f"  {r.student}: {r.old or '(none)'} -> {r.new}, with the comment and feedback page")
    kept = [r for r in now.rows if r.action == "kept"]
    if kept:
        print(f"Kept as {NAMES[kind]} has them ({len(kept)}): " + "; ".join(f"{r.student} {r.old} ({r.why})"
                                                                          for r in kept))
    if now.posting:
        print(now.posting)
    print(f"Pushed {wrote} grade(s) to {NAMES[kind]} for {assignment}, each read back.")
    unpushed = [f"{r.student} (graded {r.new}): {r.why}" for r in now.rows if r.action == "skip" and r.new]
    if failed:
        _save_json(journal_file, journal)
        raise CourseError(f"not pushed ({len(failed) + len(unpushed)}): " + "; ".join(failed + unpushed) +
                          ". Run the same push --apply again to retry them (the others are done).")
    for path in (journal_file, preview_file):
        path.unlink(missing_ok=True)
    if unpushed:
        raise CourseError(f"graded but not pushed ({len(unpushed)}): " + "; ".join(unpushed) + f". Add each to the"
                          f" {NAMES[kind]} assignment (or make their feedback page: pm-course grade), then run"
                          f" {again} again. A student who left the course: dropped = [\"<student id>\"] in the"
                          f" course file; a course file for one section's {NAMES[kind]} course: unlisted ="
                          f" \"{OTHER_SECTION}\" in its [{kind}] table.")


def _read_back(lms, r: Row) -> str:
    """"" when the LMS kept ``r``'s grade; else what it kept instead, naming the student."""
    kept = lms.read(r.lms_id)
    return "" if same(kept.grade, r.new) else (f"{r.student}: {lms.name} answered but kept"
                                                f" {kept.grade or 'no grade'}, not {r.new}")


def _save_record(course: Course, record: dict) -> None:
    _save_json(course.pushed, record)

