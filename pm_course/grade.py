"""Grading what was collected (``pm-course grade``): JOBS notebooks at a time, each in its own sandbox.

    pm-course grade                        # everything collected
    pm-course grade DIR                    # collect DIR/<student>/<assignment>/<notebook>.ipynb first
    pm-course grade --student ada --assignment 01_copying   # regrade just those

Grading reads the manifest ``pm-course collect`` wrote (``course/submissions.csv``)
and writes ``course/grades.csv``: one row per student and assignment, with a
status (graded, not submitted, could not be graded), the reason, the score and
what the LMS said (late, when, its ids). A progress bar shows the count, the
rate and the time left, and each failure is printed as it happens. Regrading
some students or assignments replaces their rows and keeps the others; an
assignment whose source changed since its release is released again first,
and every score that changed is printed.
"""
from __future__ import annotations

import csv
import os
import shutil
import sys
from pathlib import Path

from . import assignments as assignments_mod
from . import collect as collect_mod
from . import feedback, hidden
from . import submissions as submissions_mod
from .course import COURSE, CourseError, api, expected_notebooks, max_points, source_notebook, worker_start

GRADES = COURSE / "grades.csv"
COLUMNS = ("student_id", "assignment", "status", "reason", "score", "max_score",
           "late", "submitted", "name", "lms", "lms_id")


def drop_duplicate_cells(nb) -> list[str]:
    """Keep the first copy of each graded cell (nbgrader rejects a notebook with one twice); the ids dropped.

    A copy-paste accident would otherwise cost the student the whole notebook.
    """
    seen, kept, dropped = set(), [], []
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid is not None and gid in seen:
            dropped.append(gid)
            continue
        seen.add(gid)
        kept.append(cell)
    nb.cells = kept
    return dropped


def _why(log: str) -> str:
    """A short reason from nbgrader's log of a failed autograde."""
    if "DeadKernelError" in log or "Kernel died" in log:
        return "the kernel died (a memory or process cap, or a crash)"
    if "Timeout" in log:
        return "timed out"
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]") and "see the" not in line]
    return errors[-1].removeprefix("[ERROR]").strip()[:200] if errors else "nbgrader could not grade it"


def _autograde(entry) -> tuple[str, str, str]:
    """Grade one student's notebook: (status, reason, log). Runs in a worker process when JOBS > 1."""
    probes = COURSE / "probes" / entry.student / entry.assignment
    shutil.rmtree(probes, ignore_errors=True)  # what the kernel probes this time, nothing older
    result = api().autograde(entry.assignment, entry.student, force=True, create=True)
    log = f"$ nbgrader autograde {entry.assignment} {entry.student}\n" + result.get("log", "") + result.get("error", "")
    if not result["success"]:
        return submissions_mod.FAILED, _why(log), log
    wrong = hidden.failures(entry.assignment, probes)
    if wrong:
        log += _zero_cells(entry, wrong)
    # the feedback is made here too, after the scores are final, so that it runs JOBS at a time
    made = api().generate_feedback(entry.assignment, entry.student, force=True)
    log += made.get("log", "") + made.get("error", "")
    return entry.status, entry.reason, log


def jobs(given: int | None = None) -> int:
    """How many notebooks to grade at once: ``given``, else ``$PM_GRADE_JOBS``, else the number of cores."""
    raw = str(given) if given is not None else os.environ.get("PM_GRADE_JOBS", "")
    try:
        n = int(raw) if raw else os.cpu_count() or 1
    except ValueError:
        raise CourseError(f"JOBS={raw!r} must be a whole number of notebooks to grade at once") from None
    if n < 1:
        raise CourseError(f"JOBS={n}: at least one notebook must be graded at a time")
    return n


def _progress(total: int):
    """The progress bar (tqdm, on stderr): the count done, the rate, the time left."""
    from tqdm import tqdm

    return tqdm(total=total, unit="notebook", desc="Grading", file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5, smoothing=0.1)


def _autograde_all(todo, n_jobs: int) -> None:
    """Grade ``todo``, ``n_jobs`` at a time; each notebook in its own kernel and sandbox.

    Workers share nbgrader's SQLite gradebook: SQLite serialises their writes
    (each autograde is a few short transactions), and the log is written here,
    in submission order, so the result is the same for any JOBS. A failure is
    printed as soon as its notebook is done.
    """
    import concurrent.futures
    import multiprocessing

    for assignment in sorted({e.assignment for e in todo}):
        hidden.reference(assignment)  # once, here: forked workers inherit it
    n = min(n_jobs, len(todo))
    results: dict[int, tuple[str, str, str]] = {}
    bar = _progress(len(todo))

    def done(i, result):
        results[i] = result
        if result[0] == submissions_mod.FAILED:
            bar.write(f"  {todo[i].student}/{todo[i].assignment}: could not be graded: {result[1]}", file=sys.stdout)
        bar.update()

    with bar:
        if n <= 1:
            for i, entry in enumerate(todo):
                done(i, _autograde(entry))
        else:
            import nbgrader.apps  # noqa: F401 -- imported once, here, rather than in every worker

            # the longest notebooks first, so that no worker is left with one at the end (the
            # instructor's notebook, with its outputs, is larger where there is more to run)
            cost = {a: source_notebook(a).stat().st_size for a in expected_notebooks()}
            order = sorted(range(len(todo)), key=lambda i: -cost[todo[i].assignment])
            context = multiprocessing.get_context("fork")  # the workers inherit the loaded modules
            with concurrent.futures.ProcessPoolExecutor(n, mp_context=context, initializer=worker_start) as pool:
                futures = {pool.submit(_autograde, todo[i]): i for i in order}
                for future in concurrent.futures.as_completed(futures):
                    done(futures[future], future.result())
    with (COURSE / "nbgrader.log").open("a") as f:
        for i, entry in enumerate(todo):
            entry.status, entry.reason, log = results[i]
            f.write(log + "\n")


def _zero_cells(entry, wrong: dict[str, list[str]]) -> str:
    """Take the points of the cells whose probed values the grader found wrong; what to log."""
    from nbgrader.api import Gradebook

    notebook = Path(expected_notebooks()[entry.assignment]).stem
    coursedir, log = api().coursedir, ""
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for cell, reasons in wrong.items():
            grade = gradebook.find_grade(cell, notebook, entry.assignment, entry.student)
            if grade.auto_score:
                grade.auto_score = 0.0
                log += (f"hidden tests, judged by the grader: {entry.student}/{entry.assignment} {cell}: "
                        + "; ".join(reasons) + "\n")
        gradebook.db.commit()
    return log


def _hide_sources() -> None:
    """Every folder submissions were collected from is hidden from student code, like the course folder."""
    seen = collect_mod.SOURCES_SEEN.read_text().split() if collect_mod.SOURCES_SEEN.is_file() else []
    given = os.environ.get("PM_SUBMISSIONS", "")
    os.environ["PM_SUBMISSIONS"] = os.pathsep.join(p for p in [given, *seen] if p)


def select(entries, students=None, assignments=None):
    """The entries of ``students`` and ``assignments`` (None: all); an error names any that is unknown."""
    for label, wanted, have in (("--student", students, {e.student for e in entries}),
                                ("--assignment", assignments, {e.assignment for e in entries})):
        unknown = sorted(set(wanted or ()) - have)
        if unknown:
            raise CourseError(f"{label} {', '.join(unknown)}: not among those collected ({', '.join(sorted(have))})")
    return [e for e in entries if (not students or e.student in students)
            and (not assignments or e.assignment in assignments)]


def grade(submissions: Path | None = None, students=None, assignments=None, n_jobs: int | None = None) -> None:
    """Grade what was collected (after collecting ``submissions``, a folder, when given); write grades.csv.

    Parameters
    ----------
    submissions : Path, optional
        ``DIR/<student>/<assignment>/<notebook>.ipynb``: collected first (``collect --from folder``).
    students, assignments : list of str, optional
        Regrade only these (default: everything collected); the other rows of
        grades.csv stay as they were.
    n_jobs : int, optional
        Notebooks graded at once (default ``$PM_GRADE_JOBS``, else the number of cores).
    """
    from . import sandbox

    print(sandbox.check())
    n = jobs(n_jobs)
    print(f"Grading {n} notebook(s) at a time (JOBS).")
    if submissions is not None:
        collect_mod.collect("folder", submissions)
    entries = submissions_mod.read_manifest(collect_mod.MANIFEST)
    if not entries:
        raise CourseError(f"nothing collected yet ({collect_mod.MANIFEST} is missing): run pm-course collect first,"
                          " or pass the submissions folder to grade")
    _hide_sources()
    changed = assignments_mod.stale()
    if changed:
        released = [a for a in changed if (COURSE / "release" / a).is_dir()]
        if released:
            print(f"Source changed since its release: {', '.join(released)}; releasing it again (nbgrader"
                  " generate_assignment) and regrading its submissions.")
        assignments_mod.assignments(changed)
    chosen = select(entries, students, assignments)
    regrade = {(e.student, e.assignment) for e in chosen}
    if released_again := [a for a in changed if (COURSE / "release" / a).is_dir()]:
        chosen += [e for e in entries if e.assignment in released_again and (e.student, e.assignment) not in regrade]
        regrade = {(e.student, e.assignment) for e in chosen}
    todo = [e for e in chosen if e.status == submissions_mod.GRADED]
    _autograde_all(todo, n)  # each in its own kernel: a broken notebook cannot take the others down
    _read_scores(chosen)
    before = read_grades(GRADES)
    rows = {**{k: v for k, v in before.items() if k in {(e.student, e.assignment) for e in entries}},
            **{(e.student, e.assignment): _row(e) for e in chosen}}
    for e in entries:  # collected, never graded: their manifest's status, without a score
        rows.setdefault((e.student, e.assignment), _row(e) if e.status != submissions_mod.GRADED
                        else {**_row(e), "status": "not graded yet", "score": ""})
    write_grades(rows, GRADES)
    _say_what_changed(before, rows, regrade)
    everyone = [_entry(r) for r in rows.values()]
    feedback.remove_stale(everyone)  # no page may tell a student the score of work no longer graded
    print(submissions_mod.summary(everyone, {name: max_points(name) for name in expected_notebooks()}))
    for entry in everyone:
        if entry.status == submissions_mod.FAILED:
            print(f"  {entry.student}/{entry.assignment}: could not be graded: {entry.reason}")
    graded = sum(e.status == submissions_mod.GRADED for e in chosen)
    print(f"Graded {graded} notebooks of {len({e.student for e in chosen})} students"
          + ("" if len(chosen) == len(entries) else f" (of {len({e.student for e in entries})}: the rest kept)") + ".")
    print(f"Grades:   {GRADES} (one row per student and assignment, with a status)")
    print(f"Feedback: {COURSE / 'feedback'}")


def _read_scores(entries) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = api().coursedir
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for entry in entries:
            entry.max_score = max_points(entry.assignment)
            if entry.status != submissions_mod.GRADED:
                continue
            try:
                submission = gradebook.find_submission(entry.assignment, entry.student)
            except MissingEntry:
                entry.status, entry.reason = submissions_mod.FAILED, "nbgrader recorded no grade"
                continue
            entry.score = submission.score


def _row(e) -> dict:
    score = "" if e.status != submissions_mod.GRADED or e.score is None else f"{e.score:g}"
    return {"student_id": e.student, "assignment": e.assignment, "status": e.status, "reason": e.reason,
            "score": score, "max_score": f"{max_points(e.assignment):g}", "late": "late" if e.late else "",
            "submitted": e.submitted, "name": e.name, "lms": e.lms, "lms_id": e.lms_id}


def _entry(row: dict):
    entry = submissions_mod.Entry(row["student_id"], row["assignment"], status=row["status"], reason=row["reason"],
                                  name=row.get("name", ""), lms=row.get("lms", ""), lms_id=row.get("lms_id", ""),
                                  late=row.get("late") == "late", submitted=row.get("submitted", ""))
    entry.score = float(row["score"]) if row["score"] else None
    entry.max_score = float(row["max_score"]) if row.get("max_score") else None
    return entry


def read_grades(path: Path = GRADES) -> dict[tuple[str, str], dict]:
    """grades.csv's rows by (student, assignment) ({} when there is none)."""
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(r["student_id"], r["assignment"]): {c: r.get(c) or "" for c in COLUMNS} for r in csv.DictReader(f)}


def grades() -> list:
    """grades.csv as entries (scores as numbers); an error when nothing was graded yet."""
    if not GRADES.is_file():
        raise CourseError(f"no grades yet ({GRADES} is missing): run pm-course grade first")
    return [_entry(r) for r in read_grades(GRADES).values()]


def write_grades(rows: dict, out: Path) -> None:
    """Write grades.csv: :data:`COLUMNS`, sorted by student and assignment."""
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows[k] for k in sorted(rows))


def _say_what_changed(before: dict, after: dict, regraded: set) -> None:
    """Print each regraded score that differs from the one grades.csv had before."""
    changes = []
    for key in sorted(regraded):
        old, new = before.get(key), after.get(key)
        if old is None or new is None:
            continue
        was = old["score"] or old["status"]
        now = new["score"] or new["status"]
        if (was, old["max_score"]) != (now, new["max_score"]):
            changes.append(f"  {key[0]}/{key[1]}: {was}/{old['max_score']} -> {now}/{new['max_score']}")
    if changes:
        print(f"Changed since the last grading ({len(changes)}):")
        print("\n".join(changes))
    elif any(k in before for k in regraded):
        print("Regraded: no score changed.")
