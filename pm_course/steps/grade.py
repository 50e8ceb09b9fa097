"""Grading what was collected (``pm-course grade``): JOBS notebooks at a time, each in its own sandbox.

    pm-course grade                        # what is new or changed since the last run
    pm-course grade --all                  # everything collected
    pm-course grade DIR                    # collect DIR/<student>/<assignment>/<notebook>.ipynb first
    pm-course grade --student ada --assignment 01_copying   # regrade just those

Grading reads the manifest ``pm-course collect`` wrote (``course/submissions.csv``)
and writes ``course/grades.csv``: one row per student and assignment, with a
status (graded, not submitted, could not be graded), the reason, the score and
what the LMS said (late, when, its ids). A progress bar shows the count, the
rate and the time left, and each failure is printed as it happens. Regrading
some students or assignments replaces their rows and keeps the others; an
assignment whose source changed since its release is released again first,
and every score that changed is printed. A notebook whose SHA-256 and whose
assignment's source are what they were when it was last graded
(``course/graded.json``) keeps its row; Canvas's test student is never graded.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pm_course.grading import release as assignments_mod
from pm_course.state import fingerprints
from pm_course.grading import hidden
from pm_course import lms
from pm_course.state import pages
from pm_course.state import written
from pm_course.state import submissions as submissions_mod
from pm_course.state.grades_csv import read_grades, write_grades  # grades.csv, kept in its own module
from pm_course.state.files import write_text
from pm_course.state.course import (Course, CourseError, api, expected_notebooks, max_points, source_hash, source_notebook,
                     worker_start)


GENERIC = ("There was an error processing", "Traceback", "see the", "Please see")  # nbgrader's words for any failure
EXCEPTION = re.compile(r"^\s*(?:[\w]+\.)*(\w+(?:Error|Exception|Warning)): (.+)$", re.M)


def _why(log: str) -> str:
    """A short reason from nbgrader's log of a failed autograde: the cause, not "There was an error processing".

    nbgrader logs the cause (an exception's last line, a warning about a cell
    that is not the assignment's, a specific error) before its generic
    "There was an error processing assignment"; a cell's source is never quoted
    beyond its first line.
    """
    if "DeadKernelError" in log or "Kernel died" in log:
        return "the kernel died (a memory or process cap, or a crash)"
    if "Timeout" in log:
        return "timed out"
    parts = []
    unknown = list(dict.fromkeys(re.findall(r"\[WARNING\] Cell '([^']+)' does not exist in the database", log)))
    if unknown:
        parts.append(f"its cell(s) {', '.join(map(repr, unknown[:5]))} are not the assignment's (the notebook's"
                     " nbgrader metadata was changed, or it is another assignment's)")
    causes = [m for m in EXCEPTION.finditer(log) if m.group(1) != "NbGraderException"]
    if causes:  # the first traceback's last line: the innermost cause
        parts.append(f"{causes[0].group(1)}: {causes[0].group(2).strip()[:150]}")
    specific = [line.removeprefix("[ERROR]").strip() for line in log.splitlines()
                if line.startswith("[ERROR]") and not any(g in line for g in GENERIC)]
    parts += specific[:1]
    return "; ".join(parts)[:400] if parts else "nbgrader could not grade it (see course/nbgrader.log)"


# the machine's faults, not the student's: a full disk, a database error, a sandbox or kernel that did not start
MACHINE_FAULT = re.compile(r"No space left on device|Errno 28\b|Disk quota exceeded|database or disk is full|"
                           r"disk I/O error|database is locked|sqlite3\.OperationalError|Read-only file system|"
                           r"Kernel didn't respond|Failed to start the kernel|bwrap: ")


def machine_fault(log: str) -> str | None:
    """The line of ``log`` that shows a machine fault (None when the failure is the notebook's own)."""
    found = MACHINE_FAULT.search(log)
    if found is None:
        return None
    line = log[log.rfind("\n", 0, found.start()) + 1: log.find("\n", found.end()) % (len(log) + 1) or None].strip()
    if len(line) <= 200:
        return line or found.group(0)
    # a long line (a failed copy lists every file): the fault first, then as much of the line as fits
    what = "No space left on device" if found.group(0).startswith("Errno 28") else found.group(0).strip(": ")
    return f"{what}: {line[:160]}..."


# why a notebook, as handed in, cannot be graded: its JSON or its nbgrader metadata is damaged, its kernel died of its
# own code once it had started (memory, a crash), a cell could not be stopped. Any other exception that stops
# nbgrader (one of the grader's own steps that raised, say) is the machine's.
STUDENT_FAILURE = re.compile(r"DeadKernelError|Kernel died|Timeout|NotJSONError|JSONDecodeError|ValidationError|"
                             r"MissingEntry|UnicodeDecodeError|NotebookValidationError")


def students_failure(log: str) -> bool:
    """Whether nbgrader's log of a failed autograde shows a failure of the notebook (not of the machine).

    Only the exceptions and errors count, not the warnings of a run that went
    on (a changed checksum, a timed-out cell), but for the one warning that
    means the notebook's cells are not the assignment's.
    """
    errors = [m.group(0) for m in EXCEPTION.finditer(log) if m.group(1) != "NbGraderException"]
    errors += [line for line in log.splitlines() if line.startswith("[ERROR]")]
    return bool(STUDENT_FAILURE.search("\n".join(errors))) or "does not exist in the database" in log


def _autograde(course: Course, entry) -> tuple[str, str, str]:
    """Grade one student's notebook: (status, reason, log). Runs in a worker process when JOBS > 1.

    A fault of the machine (a sandbox or kernel that did not start, :func:`machine_fault`, or any
    error raised here) is the machine's: status :data:`pm_course.state.submissions.MACHINE`, retried by
    the next ``grade``, never on a student's row or page. Whatever nbgrader recorded for the student
    before the fault is put back in the gradebook, and their feedback page is the one they had.
    """
    saved = _saved_grades(course, entry)
    try:
        result = _autograde_one(course, entry)
    except Exception as err:  # noqa: BLE001 -- the grader's own error, whatever it is, is not the student's
        result = submissions_mod.MACHINE, f"machine error: {type(err).__name__}: {err}"[:300], f"{err!r}"
    if result[0] == submissions_mod.MACHINE:
        log = result[2] + _restore_grades(course, entry, saved)
        result = (*result[:2], log)
    return result


def _autograde_one(course: Course, entry) -> tuple[str, str, str]:
    from pm_course import sandbox

    probes = course.probes / entry.student / entry.assignment
    shutil.rmtree(probes, ignore_errors=True)  # what the kernel probes this time, nothing older
    del sandbox.FAULTS[:]  # the kernels that do not start for this notebook
    result = api(course).autograde(entry.assignment, entry.student, force=True, create=True)
    log = f"$ nbgrader autograde {entry.assignment} {entry.student}\n" + result.get("log", "") + result.get("error", "")
    failure, reason = _repaired(entry)
    if sandbox.FAULTS:
        return submissions_mod.MACHINE, f"machine error: {sandbox.FAULTS[0]}"[:400], log
    fault = machine_fault(log)
    if fault:
        return submissions_mod.MACHINE, f"machine error: {fault}", log
    if not result["success"]:
        why = failure or _why(log)
        if failure or students_failure(log):
            return submissions_mod.FAILED, why, log
        return submissions_mod.MACHINE, f"machine error: the grader's own error: {why}"[:400], log
    entry.reason = reason
    wrong = hidden.failures(entry.assignment, probes)
    if wrong:
        log += _zero_cells(course, entry, wrong)
    # the feedback is made here too, after the scores are final, so that it runs JOBS at a time; the
    # student's page so far is set aside, and put back if the new one cannot be made
    page = course.feedback / entry.student / entry.assignment
    previous = page.with_name(f".{entry.assignment}.previous")
    shutil.rmtree(previous, ignore_errors=True)
    if page.is_dir():
        page.rename(previous)
    try:
        made = api(course).generate_feedback(entry.assignment, entry.student, force=True)
        made_log = made.get("log", "") + made.get("error", "")
        fault = machine_fault(made_log) or (None if made.get("success", True) else "the feedback page could not be made")
    except Exception as err:  # noqa: BLE001 -- the grader's own
        made_log, fault = repr(err), f"the feedback page could not be made: {type(err).__name__}: {err}"
    log += made_log
    if fault:
        shutil.rmtree(page, ignore_errors=True)
        if previous.is_dir():
            previous.rename(page)
        return submissions_mod.MACHINE, f"machine error: {fault}", log
    shutil.rmtree(previous, ignore_errors=True)
    return entry.status, entry.reason, log


def _saved_grades(course: Course, entry) -> dict | None:
    """What the gradebook holds for this student's assignment before grading (None: nothing yet), to put back
    after a machine fault."""
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = api(course).coursedir
    try:
        with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
            submission = gradebook.find_submission(entry.assignment, entry.student)
            return {(nb.name, g.name): (g.auto_score, g.needs_manual_grade)
                    for nb in submission.notebooks for g in nb.grades}
    except MissingEntry:
        return None
    except Exception:  # noqa: BLE001 -- the gradebook cannot be read: nothing to put back
        return None


def _restore_grades(course: Course, entry, saved: dict | None) -> str:
    """Put the gradebook back as :func:`_saved_grades` found it (what to log)."""
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = api(course).coursedir
    try:
        with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
            if saved is None:
                try:
                    gradebook.remove_submission(entry.assignment, entry.student)
                except MissingEntry:
                    pass
                return ""
            for nb in gradebook.find_submission(entry.assignment, entry.student).notebooks:
                for g in nb.grades:
                    if (nb.name, g.name) in saved:
                        g.auto_score, g.needs_manual_grade = saved[(nb.name, g.name)]
            gradebook.db.commit()
    except Exception as err:  # noqa: BLE001 -- e.g. the disk is still full: the next grade grades it anyway
        return f"the gradebook could not be put back for {entry.student}/{entry.assignment}: {err!r}\n"
    return ""


def _repaired(entry) -> tuple[str | None, str]:
    """What :mod:`pm_course.grading.repair` did to this notebook: (why it could not be matched or None, the reason
    with a note per repair)."""
    from pm_course.grading import repair

    key = (entry.assignment, entry.student)
    notes = repair.NOTES.pop(key, [])
    return repair.FAILURES.pop(key, None), "; ".join(r for r in (entry.reason, *notes) if r)


def _explain_lost_points(course: Course, entries) -> None:
    """Every score below full gets a reason: the graded cells that lost points (added to the entry's reason)."""
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = api(course).coursedir
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for entry in entries:
            if entry.status != submissions_mod.GRADED or entry.score is None or entry.score >= entry.max_score:
                continue
            try:
                submission = gradebook.find_submission(entry.assignment, entry.student)
            except MissingEntry:
                continue
            lost = [f"{g.name} not reviewed yet" if g.needs_manual_grade
                    else f"{g.name} {g.score or 0:g}/{g.max_score:g}" for nb in submission.notebooks for g in nb.grades
                    if g.max_score and (g.needs_manual_grade or (g.score or 0) < g.max_score)]
            text = "lost points: " + (", ".join(lost) if lost else f"{entry.score:g} of {entry.max_score:g}")
            entry.reason = "; ".join(r for r in (entry.reason, text) if r)


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


def _autograde_all(course: Course, todo, n_jobs: int) -> bool:
    """Grade ``todo``, ``n_jobs`` at a time; each notebook in its own kernel and sandbox.

    Workers share nbgrader's SQLite gradebook: SQLite serialises their writes
    (each autograde is a few short transactions), and the log is written here,
    in submission order, so the result is the same for any JOBS. A failure is
    printed as soon as its notebook is done. Ctrl-C stops grading: the notebooks
    graded are kept, the others are "not graded yet"; returns whether it was interrupted.
    """
    for assignment in sorted({e.assignment for e in todo}):
        hidden.reference(assignment)  # once, here: forked workers inherit it
    n = min(n_jobs, len(todo))
    results: dict[int, tuple[str, str, str]] = {}
    bar = _progress(len(todo))

    stop: list[bool] = []

    def done(i, result):
        if stop:  # finished after Ctrl-C: it may have been disturbed, so it is graded again next time
            bar.update()
            return
        results[i] = result
        if result[0] == submissions_mod.FAILED:
            bar.write(f"  {todo[i].student}/{todo[i].assignment}: could not be graded: {result[1]}", file=sys.stdout)
        elif result[0] == submissions_mod.MACHINE:
            bar.write(f"  {todo[i].student}/{todo[i].assignment}: not graded ({result[1]})", file=sys.stdout)
        bar.update()

    def on_ctrl_c(signum, frame):
        if stop:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        stop.append(True)
        bar.write("Ctrl-C: stopping after the notebook(s) being graded; those graded are kept (Ctrl-C again to"
                  " stop at once).", file=sys.stderr)

    import signal

    interrupted = False
    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        _run_all(course, todo, n, done, stop)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, previous)
    bar.close()
    if interrupted or stop:  # Ctrl-C: what was graded is kept, the rest is graded by the next run
        interrupted = True
        print(f"Interrupted: {len(results)} of {len(todo)} notebook(s) graded; the rest are not graded yet"
              " (pm-course grade grades them).", file=sys.stderr)
    with course.nbgrader_log.open("a") as f:
        for i, entry in enumerate(todo):
            entry.status, entry.reason, log = results.get(i, (submissions_mod.NOT_YET, "grading was interrupted", ""))
            f.write(log + "\n")
    return interrupted


def _run_all(course: Course, todo, n: int, done, stop: list) -> None:
    """Grade ``todo`` in ``n`` worker processes (here when ``n`` is 1), calling ``done(i, result)`` as each ends;
    no notebook is started once ``stop`` is not empty (Ctrl-C)."""
    import concurrent.futures
    import multiprocessing

    if n <= 1:
        for i, entry in enumerate(todo):
            if stop:
                return
            done(i, _autograde(course, entry))
        return
    import nbgrader.apps  # noqa: F401 -- imported once, here, rather than in every worker

    from pm_course.grading import feedback_page as feedback  # noqa: F401 -- the feedback pages' exporter, likewise

    # the longest notebooks first, so that no worker is left with one at the end (the
    # instructor's notebook, with its outputs, is larger where there is more to run)
    cost = {a: source_notebook(a).stat().st_size for a in expected_notebooks()}
    order = sorted(range(len(todo)), key=lambda i: -cost[todo[i].assignment])
    context = multiprocessing.get_context("fork")  # the workers inherit the loaded modules
    pool = concurrent.futures.ProcessPoolExecutor(n, mp_context=context, initializer=worker_start)
    try:
        futures = {pool.submit(_autograde, course, todo[i]): i for i in order}
        for future in concurrent.futures.as_completed(futures):
            try:
                result = future.result()
            except concurrent.futures.process.BrokenProcessPool as err:
                result = (submissions_mod.MACHINE, f"machine error: a grading worker died ({err})", "")
            done(futures[future], result)
            if stop:
                for other in futures:
                    other.cancel()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _zero_cells(course: Course, entry, wrong: dict[str, list[str]]) -> str:
    """Take the points of the cells whose probed values the grader found wrong; what to log."""
    from nbgrader.api import Gradebook

    notebook = Path(expected_notebooks()[entry.assignment]).stem
    coursedir, log = api(course).coursedir, ""
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for cell, reasons in wrong.items():
            grade = gradebook.find_grade(cell, notebook, entry.assignment, entry.student)
            if grade.auto_score:
                grade.auto_score = 0.0
                log += (f"hidden tests, judged by the grader: {entry.student}/{entry.assignment} {cell}: "
                        + "; ".join(reasons) + "\n")
        gradebook.db.commit()
    return log


def select(entries, students=None, assignments=None):
    """The entries of ``students`` and ``assignments`` (None: all); an error names any that is unknown."""
    for label, wanted, have in (("--student", students, {e.student for e in entries}),
                                ("--assignment", assignments, {e.assignment for e in entries})):
        unknown = sorted(set(wanted or ()) - have)
        if unknown:
            raise CourseError(f"{label} {', '.join(unknown)}: not among those collected ({', '.join(sorted(have))})")
    return [e for e in entries if (not students or e.student in students)
            and (not assignments or e.assignment in assignments)]


def _digest(course: Course, entry) -> str:
    """A SHA-256 of the notebook collected for ``entry`` ("" when there is none)."""
    return fingerprints.digest(course.collected(entry.student, entry.assignment))


def unchanged(course: Course, entries, before: dict, rows: dict | None = None) -> list:
    """The entries graded before whose notebook and assignment source are the same as then (not to grade again).

    With ``rows`` (grades.csv's), only those whose row came from grading that notebook: a row that says
    "not submitted" or another file's "could not be graded" (a slip of collect, undone since) is graded again.
    """
    sources = {a: source_hash(a) for a in {e.assignment for e in entries}}
    return [e for e in entries if e.status == submissions_mod.GRADED and before.get(f"{e.student}/{e.assignment}")
            == {"submission": _digest(course, e), "source": sources[e.assignment]}
            and (rows is None or rows.get((e.student, e.assignment), {}).get("status")
                 in (submissions_mod.GRADED, submissions_mod.FAILED))]


@dataclass
class Plan:
    """What one ``pm-course grade`` will do, decided before any notebook is graded.

    Attributes
    ----------
    entries : list of Entry
        Everything collected (Canvas's test student left out): grades.csv gets a row for each.
    chosen : list of Entry
        The entries whose rows this run writes afresh (asked for, new or changed).
    kept : list of Entry
        Graded before from the same notebook and the same source: their rows are kept.
    todo : list of Entry
        The notebooks graded in this run (the chosen ones that were handed in).
    asked : set of (str, str)
        (student, assignment) of the chosen entries: the rows whose score changes are said.
    before : dict
        grades.csv's rows when the run started, by (student, assignment).
    hashes : dict
        course/graded.json when the run started: each graded notebook's and its source's SHA-256.
    """

    entries: list
    chosen: list
    kept: list
    todo: list
    asked: set
    before: dict
    hashes: dict


@dataclass
class Result:
    """What a ``pm-course grade`` did: returned by :func:`grade`, and carried by :class:`Incomplete`.

    Attributes
    ----------
    plan : Plan
    rows : dict
        The rows written to grades.csv, by (student, assignment).
    changes : list of tuple
        ((student, assignment), score or status before, max before, after, max after) for each asked-for row whose
        score changed.
    interrupted : bool
        The run was stopped (Ctrl-C) before every notebook of ``plan.todo`` was graded.
    """

    plan: Plan
    rows: dict
    changes: list
    interrupted: bool = False

    @property
    def graded(self) -> list:
        """The entries graded in this run."""
        return [e for e in self.plan.todo if e.status == submissions_mod.GRADED]

    @property
    def faulted(self) -> list:
        """The notebooks not graded because of the machine (their rows are as they were)."""
        return [e for e in self.plan.todo if e.status == submissions_mod.MACHINE]

    @property
    def unfinished(self) -> list:
        """The notebooks left for the next run: a machine fault, or not reached before an interruption."""
        return [e for e in self.plan.todo if e.status in (submissions_mod.MACHINE, submissions_mod.NOT_YET)]


class Incomplete(CourseError):
    """Grading ended with notebooks left to grade (a machine fault or an interruption); ``.result`` says which."""

    def __init__(self, message: str, result: Result):
        super().__init__(message)
        self.result = result


def grade(course: Course, submissions: Path | None = None, students=None, assignments=None,
          n_jobs: int | None = None, everything: bool = False, rescale_reviews: bool = False) -> Result:
    """Grade what was collected; write grades.csv: :func:`plan`, :func:`run`, :func:`record`, :func:`report`.

    Only what is new or changed since the last run is graded: a notebook is
    graded again when it (its SHA-256) or its assignment's source changed, or
    when ``students``, ``assignments`` or ``everything`` ask for it.

    Parameters
    ----------
    course : Course
        The course whose collected work it grades.
    submissions : Path, optional
        Refused: the command line collects a folder first (``collect --from folder``).
    students, assignments : list of str, optional
        Regrade only these (default: everything collected); the other rows of
        grades.csv stay as they were.
    n_jobs : int, optional
        Notebooks graded at once (default ``$PM_GRADE_JOBS``, else the number of cores).
    everything : bool
        Grade every notebook collected again (``--all``), changed or not.
    rescale_reviews : bool
        Where the source changed a written cell's points since its review, scale the review to the new
        points (``--rescale-reviews``); default: the review goes back to awaiting review.

    Returns
    -------
    Result
        What was graded, kept and written.

    Raises
    ------
    Incomplete
        After writing and reporting, when a machine fault or an interruption left notebooks ungraded.
    """
    from pm_course.sandbox import cell_limits as limits
    from pm_course import sandbox

    if submissions is not None:
        raise CourseError("grade DIR: the command line collects DIR first (collect --from folder DIR)")
    print(sandbox.check())
    n = jobs(n_jobs)
    print(f"Grading {n} notebook(s) at a time (JOBS).")
    print(limits.describe())
    chosen = plan(course, students, assignments, everything)
    interrupted = run(course, chosen, n, rescale_reviews)
    result = record(course, chosen, interrupted)
    report(course, result)
    return result


def plan(course: Course, students=None, assignments=None, everything: bool = False) -> Plan:
    """Decide what to grade: the asked-for entries that are new or changed (all of them with ``everything``).

    An assignment whose source changed since its release is released again here (nbgrader generate_assignment)
    and every submission of it is graded again.
    """
    entries = submissions_mod.read_manifest(course.manifest)
    tests = sorted({e.student for e in entries if lms.is_test_student(e.name or e.student.rsplit("_", 1)[0])})
    if tests:  # Canvas's test student: never graded, never in grades.csv, never exported
        print(f"Not graded: Canvas's test student ({', '.join(tests)}).")
        entries = [e for e in entries if e.student not in tests]
    if not entries:
        raise CourseError(f"nothing collected yet ({course.manifest} is missing): run pm-course collect first,"
                          " or pass the submissions folder to grade")
    # the student versions of what was handed in, made or made again (the others wait for pm-course assignments)
    handed_in = {e.assignment for e in entries if e.status != submissions_mod.MISSING}
    changed = [a for a in assignments_mod.stale(course) if a in handed_in]
    if changed:
        released = [a for a in changed if (course.release / a).is_dir()]
        if released:
            print(f"Source changed since its release: {', '.join(released)}; releasing it again (nbgrader"
                  " generate_assignment) and regrading its submissions.")
        assignments_mod.assignments(course, changed)
    chosen = select(entries, students, assignments)
    asked = {(e.student, e.assignment) for e in chosen}
    if released_again := [a for a in changed if (course.release / a).is_dir()]:
        chosen += [e for e in entries if e.assignment in released_again and (e.student, e.assignment) not in asked]
        asked = {(e.student, e.assignment) for e in chosen}
    before = read_grades(course.grades)
    hashes = fingerprints.graded_hashes(course)
    # only what is new or changed, unless asked for by name (--student, --assignment) or --all
    kept = [] if everything or students or assignments else \
        [e for e in unchanged(course, chosen, hashes, before) if (e.student, e.assignment) in before]
    if kept:  # kept as they were graded: their rows come from grades.csv
        skip = {id(e) for e in kept}
        chosen = [e for e in chosen if id(e) not in skip]
        asked -= {(e.student, e.assignment) for e in kept}
    todo = [e for e in chosen if e.status == submissions_mod.GRADED]
    return Plan(entries, chosen, kept, todo, asked, before, hashes)


def run(course: Course, plan: Plan, n_jobs: int, rescale_reviews: bool = False) -> bool:
    """Grade ``plan.todo``, ``n_jobs`` at a time, each in its own sandbox; read the scores back. True if interrupted.

    Each entry's status, reason and score say how its notebook fared; nothing is written to grades.csv here.
    """
    from pm_course import sandbox

    try:
        interrupted = _autograde_all(course, plan.todo, n_jobs)  # each in its own kernel: a broken notebook
    finally:  # cannot take the others down
        sandbox.close_template()  # this process's warm kernel template: no notebook is left to fork a kernel for
    # written answers: a review stands while its answer and its points are unchanged; a changed answer awaits
    # review again, and so does one whose points the source changed (rescaled instead with rescale_reviews)
    written.after_grading(course, plan.todo, rescale=rescale_reviews)
    _read_scores(course, plan.chosen)
    return interrupted


def record(course: Course, plan: Plan, interrupted: bool = False) -> Result:
    """Write grades.csv and course/graded.json from what :func:`run` left in ``plan``'s entries.

    A machine fault keeps the row as it was (and what it was graded from); what was not graded has no
    fingerprint, so the next run grades it. grades.csv is written before graded.json: a failure between the two
    leaves notebooks to regrade, never a row claimed graded that is not.
    """
    before, hashes, todo, chosen = plan.before, dict(plan.hashes), plan.todo, plan.chosen
    sources = {a: source_hash(a) for a in {e.assignment for e in todo}}
    unfinished = [e for e in todo if e.status in (submissions_mod.MACHINE, submissions_mod.NOT_YET)]
    for e in todo:  # what was not graded has no fingerprint: the next grade grades it
        key = f"{e.student}/{e.assignment}"
        if e.status == submissions_mod.MACHINE and (e.student, e.assignment) in before:
            continue  # a machine fault keeps the row as it was, and what that row was graded from
        if e in unfinished:
            hashes.pop(key, None)
        else:
            hashes[key] = {"submission": _digest(course, e), "source": sources[e.assignment]}
    for e in chosen:  # no notebook graded now (not submitted, another assignment's file): the row no longer
        if e.status in (submissions_mod.MISSING, submissions_mod.FAILED) and e not in todo:  # says what any
            hashes.pop(f"{e.student}/{e.assignment}", None)  # notebook scored; one put back is graded again
    _explain_lost_points(course, chosen)
    rows = {**{k: v for k, v in before.items() if k in {(e.student, e.assignment) for e in plan.entries}},
            **{(e.student, e.assignment): _refresh(before[(e.student, e.assignment)], e) for e in plan.kept},
            **{(e.student, e.assignment): _row(e) for e in chosen}}
    for e in plan.entries:  # collected, never graded: their manifest's status, without a score
        rows.setdefault((e.student, e.assignment), _row(e) if e.status != submissions_mod.GRADED
                        else {**_row(e), "status": "not graded yet", "score": ""})
    _written_totals(course, rows)
    for e in todo:  # a machine fault records nothing: the row as it was (none: "not graded (machine error)")
        key = (e.student, e.assignment)
        if e.status == submissions_mod.MACHINE and key in before:
            rows[key] = before[key]
    write_grades(rows, course.grades)
    write_text(course.graded_hashes, json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    rows = read_grades(course.grades)  # as grades.csv has them: every column, in its order
    pages.remove_stale(course, [_entry(r) for r in rows.values()])  # no page may tell a student the score of
    return Result(plan, rows, changes(before, rows, plan.asked), interrupted)  # work no longer graded


def report(course: Course, result: Result) -> None:
    """Print what a run did (changed scores, the summary, failures, where grades are); raise :class:`Incomplete`
    when notebooks were left ungraded."""
    from pm_course import sandbox

    plan = result.plan
    if result.changes:
        print(f"Changed since the last grading ({len(result.changes)}):")
        print("\n".join(f"  {s}/{a}: {was}/{old_max} -> {now}/{new_max}"
                        for (s, a), was, old_max, now, new_max in result.changes))
    elif any((e.student, e.assignment) in plan.before for e in plan.todo):
        print("Regraded: no score changed.")
    everyone = [_entry(r) for r in result.rows.values()]
    collected = sorted({e.assignment for e in everyone})  # mid-term, the assignments so far: not all of them
    print(submissions_mod.summary(everyone, {name: max_points(name) for name in collected}))
    for entry in everyone:
        if entry.status == submissions_mod.FAILED:
            print(f"  {entry.student}/{entry.assignment}: could not be graded: {entry.reason}")
    if plan.todo or not plan.kept:
        print(f"Graded {len(result.graded)} notebooks of {len({e.student for e in plan.chosen})} students"
              + ("" if len(plan.chosen) == len(plan.entries)
                 else f" (of {len({e.student for e in plan.entries})}: the rest kept)") + ".")
    else:
        print("Graded 0 notebooks: nothing new or changed since the last run.")
    if plan.kept:
        print(f"Unchanged since they were graded, kept: {len(plan.kept)} notebooks (pm-course grade --all grades"
              " them again).")
    print(f"Grades:   {course.grades} (one row per student and assignment, with a status)")
    print(f"Feedback: {course.feedback}")
    if not sandbox.works():  # said at the start and again here, where the summary is read
        print(sandbox.unconfined_banner())
        print(sandbox.unconfined_banner(), file=sys.stderr)
    if faulted := result.faulted:
        raise Incomplete(f"{len(faulted)} notebook(s) not graded because of the machine, not the student (their"
                         " rows, scores and feedback pages are as they were; nothing is recorded for them):\n"
                         + "\n".join(f"  {e.student}/{e.assignment}: {e.reason}" for e in faulted)
                         + "\nFix it (free some disk space, let the sandbox start, ...) and run pm-course grade"
                         " again: they are graded then.", result)
    if result.interrupted:
        raise Incomplete(f"Interrupted: {len(plan.todo) - len(result.unfinished)} notebook(s) graded and kept,"
                         f" {len(result.unfinished)} not graded yet: run pm-course grade to grade them.", result)


def _written_totals(course: Course, rows: dict) -> None:
    """grades.csv's written-answer columns (and scores) from the gradebook, formgrader reviews included."""
    written.annotate(course, rows)
    waiting = sum(int(r.get("awaiting_review") or 0) for r in rows.values())
    if waiting:
        print(f"Written answers awaiting review: {waiting} (pm-course status; pm-course review ASSIGNMENT)")


def _read_scores(course: Course, entries) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = api(course).coursedir
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


def _refresh(row: dict, e) -> dict:
    """A row of grades.csv kept from the last grading, with what the manifest says now of the student and the LMS."""
    return {**row, "name": e.name, "lms": e.lms, "lms_id": e.lms_id, "late": "late" if e.late else "",
            "submitted": e.submitted}


def _entry(row: dict):
    entry = submissions_mod.Entry(row["student_id"], row["assignment"], status=row["status"], reason=row["reason"],
                                  name=row.get("name", ""), lms=row.get("lms", ""), lms_id=row.get("lms_id", ""),
                                  late=row.get("late") == "late", submitted=row.get("submitted", ""))
    entry.score = float(row["score"]) if row["score"] else None
    entry.max_score = float(row["max_score"]) if row.get("max_score") else None
    return entry


def changes(before: dict, after: dict, asked: set) -> list:
    """The asked-for rows whose score (or status, where there is no score) or points differ from before.

    Each is ((student, assignment), was, max before, now, max now). A row without a score before and after, in
    the same status ("not submitted" twice), changed nothing, even when the assignment's points moved.
    """
    found = []
    for key in sorted(asked):
        old, new = before.get(key), after.get(key)
        if old is None or new is None:
            continue
        if not old["score"] and not new["score"] and old["status"] == new["status"]:
            continue
        was = old["score"] or old["status"]
        now = new["score"] or new["status"]
        if (was, old["max_score"]) != (now, new["max_score"]):
            found.append((key, was, old["max_score"], now, new["max_score"]))
    return found
