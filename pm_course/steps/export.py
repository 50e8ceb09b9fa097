"""Grades out, as an LMS imports them (``pm-course export``); the feedback pages go back with ``pm-course feedback``.

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
extension and the LMS's real submission time (:class:`pm_course.lms.outcome.Late`), and every
penalty is printed and written beside the score, never applied silently. A
penalty that cannot be computed (a Canvas download has no submission times)
is refused, naming the students.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from pm_course import lms
from pm_course.lms.outcome import Late, comment, fresh, score_text
from pm_course.state import files as state
from pm_course.state import lms_cells
from pm_course.state.lms_cells import number
from pm_course.state.config import Settings
from pm_course.state.course import Course, CourseError, assignment_names, expected_notebooks, max_points
from pm_course.state.grades_csv import entries as grades
from pm_course.state.submissions import GRADED
TARGETS = ("canvas", "moodle", "csv")


def _by_lms_id(kind: str, entries) -> dict[tuple[str, str], object]:
    return {(e.lms_id, e.assignment): e for e in entries
            if e.lms == kind and e.lms_id}


def _write(out: Path, columns: list[str], rows: list[dict], encoding: str, template: Path | None = None,
           delimiter: str = ",") -> Path:
    if template is not None and out.resolve() == template.resolve():
        raise CourseError(f"-o {out} is the template itself: write the import to another file")
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore", delimiter=delimiter)
    writer.writeheader()
    writer.writerows(rows)
    return state.write_text(out, buffer.getvalue(), encoding)


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
        theirs, ours = number(raw), max_points(a)
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
    guard = lms_cells.Guard(course, "canvas", overwrite_lms_edits)
    out_rows, roster, tests = [], set(), []
    for i, row in enumerate(table.rows):
        if lms.POINTS_POSSIBLE in row["Student"]:
            out_rows.append({"Student": row["Student"], **{c: row.get(c, "") for c in ids if c != "Student"},
                             **{header[a]: (row.get(header[a]) or "").strip()
                                or score_text(max_points(a) * scales[a], table.delimiter) for a in names}})
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
            ours = score_text(None if final is None else final * scales[a], table.delimiter)
            # a submission Canvas marked late, with no penalty of pm-course's: Canvas's Late Policy may deduct
            canvas_late = entry is not None and entry.late and not (final is not None and entry.score is not None
                                                                     and final < entry.score)
            new[header[a]] = guard.cell(lms_cells.canvas_key(row["ID"].strip(), header[a]),
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
    guard = lms_cells.Guard(course, "moodle", overwrite_lms_edits)
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
    from pm_course.state.config import path as config_path

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
    theirs = number(raw)
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
                     "score": score_text(e.score), "max_score": score_text(e.max_score), "late": "late" if e.late else "",
                     "late_note": note, "final_score": score_text(final), "name": e.name, "lms_id": e.lms_id})
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
