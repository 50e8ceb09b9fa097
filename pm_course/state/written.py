"""The written answers and their reviews, as the course folder keeps them: what grading, reviewing and status share.

A written answer is an nbgrader manually graded cell (``grade`` and
``solution`` in its metadata, with ``points``). Its review is nbgrader's own
``manual_score`` and ``manual_comment`` in the gradebook, whoever entered it
(``pm-course review --apply`` or nbgrader's formgrader). Each grading records
a hash of every written answer it read (``course/review/answers/<assignment>/
<student>.json``): :func:`after_grading` keeps a review while its answer is
unchanged and clears it when the answer changed; :func:`sync` brings
grades.csv and the feedback pages up to date with the gradebook.

Part of the state layer: it imports no step (collect, grade, review, export).
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

from pm_course.state import fingerprints
from pm_course.state import files as state
from pm_course.state.course import Course, api, expected_notebooks, source_hash, source_notebook
from pm_course.state.grades_csv import read_grades, write_grades
from pm_course.state.submissions import GRADED
STUB = "YOUR ANSWER HERE"  # what nbgrader leaves in a written answer's place in the student version
SOLUTION = re.compile(r"^[^\n]*### BEGIN SOLUTION[^\n]*\n?(.*?)^[^\n]*### END SOLUTION[^\n]*$", re.S | re.M)


# --- the written cells and their answers -------------------------------------------------
def written_cells(assignment: str) -> list[dict]:
    """The assignment's written answers, in notebook order: grade_id, points, prompt, model answer, prefix.

    ``prefix`` is the cell's text before its solution (``**Your answer.**``),
    which every student's copy starts with and which is not part of the answer.
    """
    import nbformat

    nb = nbformat.read(source_notebook(assignment), as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("grade") and meta.get("solution")):
            continue
        found = SOLUTION.search(cell.source)
        prompt = nb.cells[i - 1].source if i and not nb.cells[i - 1].metadata.get("nbgrader") else ""
        model = found.group(1) if found else cell.source
        model = "\n".join(line for line in model.splitlines()
                          if not re.match(r"\s*(:::|:class:)", line)).strip()  # the site's dropdown fences
        out.append({"cell": meta["grade_id"], "points": float(meta.get("points", 0)), "prompt": prompt.strip(),
                    "model": model, "prefix": cell.source[:found.start()] if found else ""})
    return out


def answer_text(source: str, prefix: str) -> str:
    """What the student wrote in a written cell: without the cell's own heading, "" when untouched."""
    text = source[len(prefix):] if prefix and source.startswith(prefix) else source
    text = text.strip()
    return "" if text == STUB else text


def digest(text: str) -> str:
    """A hash of an answer, blind to how its lines were wrapped or its file saved (whitespace)."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def _source_texts(assignment: str) -> frozenset:
    """The text of every cell of the assignment's source but its answers (prompts, instructions): never part of
    an answer."""
    path = source_notebook(assignment)
    return _texts_of(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _texts_of(path: Path, mtime_ns: int) -> frozenset:
    import nbformat

    return frozenset(_plain(c.source) for c in nbformat.read(path, as_version=4).cells
                     if _plain(c.source) and not c.metadata.get("nbgrader", {}).get("solution"))


def _plain(text: str) -> str:
    return " ".join(text.split())


def answer_parts(course: Course, assignment: str, student: str, cells: list[dict] | None = None
                 ) -> dict[str, list] | None:
    """{cell: the notebook cells its answer is made of} in the notebook graded last (None when there is none).

    An answer is its written cell and the markdown cells the student added below
    it, up to the next cell of the assignment (an answer split over several
    cells is one answer); a cell that is the assignment's own (a prompt, the next
    question's instructions) is never part of it. ``[]`` when the answer cell is
    gone (deleted): no answer, never another cell's text.
    """
    import nbformat

    cells = written_cells(assignment) if cells is None else cells
    path = course.autograded / student / assignment / expected_notebooks()[assignment]
    if not path.is_file():
        return None
    nb = nbformat.read(path, as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    own = _source_texts(assignment)
    parts = {}
    for w in cells:
        if w["cell"] not in ids:
            parts[w["cell"]] = []
            continue
        at = ids.index(w["cell"])
        found = [nb.cells[at]]
        for cell, gid in zip(nb.cells[at + 1:], ids[at + 1:]):
            if gid or _plain(cell.source) in own:  # the assignment's next cell: the answer ends above it
                break
            if cell.cell_type == "markdown" and cell.source.strip():
                found.append(cell)
        parts[w["cell"]] = found
    return parts


def part_text(cell, index: int, prefix: str) -> str:
    """What one cell of an answer says: the written cell without its heading (``index`` 0), else its text."""
    return answer_text(cell.source, prefix if index == 0 else "")


def graded_answers(course: Course, assignment: str, student: str, cells: list[dict] | None = None
                   ) -> dict[str, str] | None:
    """{cell: answer} in the notebook that was graded last (None when there is none).

    An answer split over several cells (:func:`answer_parts`) is their texts, a
    blank line between; a deleted answer cell is "".
    """
    cells = written_cells(assignment) if cells is None else cells
    parts = answer_parts(course, assignment, student, cells)
    if parts is None:
        return None
    out = {}
    for w in cells:
        texts = [part_text(c, i, w["prefix"]) for i, c in enumerate(parts[w["cell"]])]
        out[w["cell"]] = "\n\n".join(t for t in texts if t)
    return out


def record_path(course: Course, assignment: str, student: str) -> Path:
    return course.review / "answers" / assignment / f"{student}.json"


def answer_record(course: Course, assignment: str, student: str) -> dict:
    path = record_path(course, assignment, student)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def save_answer_record(course: Course, assignment: str, student: str, record: dict) -> None:
    path = record_path(course, assignment, student)
    state.write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


# --- the gradebook ---------------------------------------------------------------------
def open_gradebook(course: Course):
    from nbgrader.api import Gradebook

    coursedir = api(course).coursedir
    return Gradebook(coursedir.db_url, coursedir.course_id)


def notebook_stem(assignment: str) -> str:
    return Path(expected_notebooks()[assignment]).stem


def awaiting(grade) -> bool:
    """Whether a written answer's grade still needs a person: answered, and no manual score yet.

    nbgrader gives an untouched answer 0 itself (``auto_score`` 0, nothing to
    review); after a regrade it flags every reviewed answer again
    (``needs_manual_grade``), which :func:`after_grading` undoes for answers
    that did not change.
    """
    return grade.manual_score is None and (grade.needs_manual_grade or grade.auto_score is None)


def written_totals(gradebook, assignment: str) -> dict[str, tuple[float, float, int]]:
    """{student: (points given to written answers, their maximum, answers awaiting review)} from the gradebook."""
    from nbgrader.api import Assignment, Grade, SubmittedAssignment, SubmittedNotebook

    cells = {w["cell"]: w["points"] for w in written_cells(assignment)}
    out: dict[str, list] = {}
    if not cells:
        return {}
    query = (gradebook.db.query(Grade).join(SubmittedNotebook).join(SubmittedAssignment).join(Assignment)
             .filter(Assignment.name == assignment))
    for grade in query:
        if grade.name not in cells:
            continue
        totals = out.setdefault(grade.student.id, [0.0, 0.0, 0])
        totals[0] += grade.manual_score if grade.manual_score is not None else (grade.auto_score or 0.0)
        totals[1] += cells[grade.name]
        totals[2] += awaiting(grade)
    return {s: tuple(t) for s, t in out.items()}


def points_text(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


# --- after each grading: keep a review while its answer stands ---------------------------
def after_grading(course: Course, entries, rescale: bool = False) -> list[str]:
    """Keep the reviews of unchanged answers and clear those whose answer changed; what was cleared.

    Runs after nbgrader's autograde of ``entries`` (those graded, in this
    process): nbgrader keeps a manual score across a regrade but marks it as
    needing a grade again. Compared with the hash recorded at the last grading,
    an unchanged answer keeps its score (no longer flagged); a changed one
    loses it and awaits review. The feedback pages of those are made again.

    A written cell whose points the instructor changed in the source since
    its review (the points recorded with it) is the instructor's change, not
    the student's: its review goes back to awaiting review, or, with
    ``rescale`` (``pm-course grade --rescale-reviews``), is scaled to the new
    points (1.5 of 2 becomes 2.25 of 3); the entry's reason names the change.
    """
    cleared, redo, rescaled = [], [], []
    by_assignment: dict[str, list] = {}
    for e in entries:
        if e.status == GRADED:
            by_assignment.setdefault(e.assignment, []).append(e)
    for assignment, group in sorted(by_assignment.items()):
        cells = written_cells(assignment)
        if not cells:
            continue
        with open_gradebook(course) as gradebook:
            for e in group:
                answers = graded_answers(course, assignment, e.student, cells)
                if answers is None:
                    continue
                parts = answer_parts(course, assignment, e.student, cells)
                record = answer_record(course, assignment, e.student)
                for w in cells:
                    grade = gradebook.find_grade(w["cell"], notebook_stem(assignment), assignment, e.student)
                    if grade.manual_score is None:
                        if not parts[w["cell"]]:  # the answer cell is gone: no answer, 0, nothing to review
                            grade.auto_score, grade.needs_manual_grade = 0.0, False
                        elif answers[w["cell"]] and grade.auto_score == 0:
                            # nbgrader's 0 for a written cell left as released, but the answer is in the cells
                            # added below it: a person reads it
                            grade.auto_score, grade.needs_manual_grade = None, True
                    now, before = digest(answers[w["cell"]]), record.get(w["cell"], {}).get("sha256")
                    points = record.get(w["cell"], {}).get("points")  # the cell's points when last graded
                    if grade.manual_score is not None and (before is None or before == now) \
                            and points is not None and points != w["points"]:
                        was, moved = grade.manual_score, (f"the source's points for {w['cell']!r} changed from"
                                                          f" {points_text(points)} to {points_text(w['points'])}")
                        if rescale and points:
                            grade.manual_score = round(was * w["points"] / points, 2)
                            grade.needs_manual_grade = False
                            why = (f"{moved}: its review rescaled from {points_text(was)} of {points_text(points)} to"
                                   f" {points_text(grade.manual_score)} of {points_text(w['points'])}")
                        else:
                            comment = gradebook.find_comment(w["cell"], notebook_stem(assignment), assignment, e.student)
                            record[w["cell"]] = {**record.get(w["cell"], {}), "cleared": {
                                "points": was, "comment": comment.manual_comment or ""}}
                            grade.manual_score, comment.manual_comment = None, None
                            grade.needs_manual_grade = grade.auto_score is None
                            why = (f"{moved}: its review ({points_text(was)} of {points_text(points)}) awaits review"
                                   " again")
                            cleared.append(f"{e.student}/{assignment} {w['cell']} ({why})")
                        e.reason = e.reason.replace(moved, why) if moved in (e.reason or "") else \
                            "; ".join(r for r in (e.reason, why) if r)  # repair's note, said in full
                        rescaled.append(f"{e.student}/{assignment} {w['cell']}")
                        redo.append(e)
                        record[w["cell"]] = {**record.get(w["cell"], {}), "sha256": now, "points": w["points"]}
                        continue
                    if grade.manual_score is not None:
                        if before is not None and before != now:
                            comment = gradebook.find_comment(w["cell"], notebook_stem(assignment), assignment, e.student)
                            cleared.append(f"{e.student}/{assignment} {w['cell']} (was {points_text(grade.manual_score)}"
                                           f" of {points_text(w['points'])})")
                            record[w["cell"]] = {"sha256": now, "cleared": {
                                "points": grade.manual_score, "comment": comment.manual_comment or ""}}
                            grade.manual_score = None
                            comment.manual_comment = None
                            grade.needs_manual_grade = grade.auto_score is None  # a blank answer is 0, no review
                            redo.append(e)
                            continue
                        grade.needs_manual_grade = False  # the same answer: its review stands
                    record[w["cell"]] = {**record.get(w["cell"], {}), "sha256": now, "points": w["points"]}
                save_answer_record(course, assignment, e.student, record)
            gradebook.db.commit()
    if rescaled and rescale:
        print(f"Written answers whose points changed in the source: their reviews rescaled ({len(rescaled)};"
              " --rescale-reviews)")
    if cleared:
        print(f"Written answers changed since they were reviewed: their points are cleared and they await review"
              f" again ({len(cleared)}; pm-course review ASSIGNMENT):\n  " + "\n  ".join(cleared))
        for e in {(e.student, e.assignment): e for e in redo}.values():
            api(course).generate_feedback(e.assignment, e.student, force=True)
    return cleared


def annotate(course: Course, rows: dict) -> None:
    """Fill grades.csv's rows (by (student, assignment)) with the gradebook's score and written-answer totals.

    Only graded rows are read; the score is the gradebook's (autograded plus
    reviewed points, whoever entered them: this command or the formgrader).
    """
    graded = sorted({a for (_, a), r in rows.items() if r.get("status") == "graded"})
    if not graded or not course.gradebook.is_file():
        return
    with open_gradebook(course) as gradebook:
        for assignment in graded:
            totals = written_totals(gradebook, assignment)
            scores = {d["student"]: d["score"] for d in gradebook.submission_dicts(assignment)}
            for (student, a), row in rows.items():
                if a != assignment or row.get("status") != "graded":
                    continue
                if student in scores and row.get("score", "") != "":
                    row["score"] = f"{scores[student]:g}"
                got, most, waiting = totals.get(student, (0.0, 0.0, 0))
                row.update(written_score=points_text(got) if most else "", written_max=points_text(most) if most else "",
                           awaiting_review=str(waiting) if most else "")
                if most and not waiting:  # reviewed: the reason no longer says "not reviewed yet"
                    full = row.get("score") not in ("", None) and row.get("max_score") not in ("", None) \
                        and float(row["score"]) >= float(row["max_score"])
                    row["reason"] = reviewed_reason(row.get("reason") or "", full, got, most)


def reviewed_reason(reason: str, full: bool, got: float, most: float) -> str:
    """A grades.csv reason once every written answer is reviewed: no "not reviewed yet"; no lost points at full.

    >>> reviewed_reason("lost points: why 0/2 not reviewed yet, test-proj 0/3", False, 2, 2)
    'lost points: test-proj 0/3'
    >>> reviewed_reason("graded a.ipynb as x; lost points: why not reviewed yet", True, 2, 2)
    'graded a.ipynb as x'
    """
    kept = []
    for part in reason.split("; ") if reason else []:
        if part.startswith("lost points: "):
            items = [i for i in part.removeprefix("lost points: ").split(", ") if not i.endswith("not reviewed yet")]
            if full:
                continue
            if not items and got < most:
                items = [f"written answers {points_text(got)}/{points_text(most)}"]
            if not items:
                continue
            part = "lost points: " + ", ".join(items)
        kept.append(part)
    return "; ".join(kept)


def _synced_with(course: Course, rows: dict) -> dict:
    """What :func:`annotate` reads besides grades.csv, by hash: the gradebook's bytes and the sources of
    the assignments graded. Taken before the gradebook is read: a review saved meanwhile changes the bytes."""
    db, known = course.gradebook, expected_notebooks()  # an assignment since removed: no source to read
    return {"gradebook": fingerprints.digest(db),
            "sources": {a: source_hash(a) if a in known else None for a in sorted({a for _, a in rows})}}


def sync(course: Course) -> list[tuple[str, str]]:
    """Bring grades.csv up to date with the gradebook (reviews applied here or in the formgrader).

    Rows whose score or written totals changed are rewritten, and their
    students' feedback pages made again; the (student, assignment) pairs changed.
    Where grades.csv, the gradebook and the sources are, byte for byte, what the
    last sync left (``course/synced.json``), nothing can have changed: the
    gradebook is not opened (nor nbgrader loaded, about two seconds).
    """
    rows = read_grades(course.grades)
    if not rows:
        return []
    inputs = _synced_with(course, rows)
    try:
        if json.loads(course.synced.read_text(encoding="utf-8")) == {**inputs,
                                                                     "grades": fingerprints.digest(course.grades)}:
            return []
    except (OSError, ValueError):  # none yet, or unreadable: read the gradebook
        pass
    before = {k: dict(v) for k, v in rows.items()}
    annotate(course, rows)
    changed = [k for k in sorted(rows) if rows[k] != before[k]]
    rescored = [k for k in changed if before[k]["score"] != rows[k]["score"]]
    # the pages first, grades.csv last, printing after both: a command stopped in between (a closed pipe, a
    # kill) leaves grades.csv as before, so the next one finds the same rows changed and finishes the work
    for student, assignment in rescored:
        api(course).generate_feedback(assignment, student, force=True)
    if changed:
        write_grades(rows, course.grades)
        print(f"{course.grades.name}: brought up to date with the gradebook (written answers reviewed since):")
        for key in rescored:
            print(f"  {key[0]}/{key[1]}: {before[key]['score']} -> {rows[key]['score']}/{rows[key]['max_score']}")
    state.write_text(course.synced, json.dumps({**inputs, "grades": fingerprints.digest(course.grades)}, sort_keys=True)
                     + "\n")
    return changed
