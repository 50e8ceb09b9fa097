"""One Canvas assignment through Canvas's REST API (``canvasapi``), as ``pm-course push`` reads and writes it."""
from __future__ import annotations

from pathlib import Path

from pm_course.lms.api import Cell, Interrupted, RateLimited, points, retry
from pm_course.state.course import CourseError


class Canvas:
    """One Canvas assignment, through ``canvasapi`` (the REST API)."""

    name = "Canvas"

    def __init__(self, server, token: str, assignment_id: int):
        from canvasapi import Canvas as Client

        self.client = Client(server.url, token)
        self.course_id, self.assignment_id = server.course, assignment_id
        self.assignment = self._call(lambda: self.client.get_course(server.course).get_assignment(assignment_id),
                                     f"reading assignment {assignment_id}")

    def _call(self, call, what: str):
        from canvasapi.exceptions import CanvasException, Forbidden, InvalidAccessToken, RateLimitExceeded
        from canvasapi.exceptions import ResourceDoesNotExist, Unauthorized
        from requests.exceptions import ConnectionError, Timeout

        def once():
            try:
                return call()
            except RateLimitExceeded as err:
                raise RateLimited(str(err)) from None
            except Forbidden as err:
                if "Rate Limit Exceeded" in str(err):  # older Canvas: 403 for a rate limit
                    raise RateLimited("403 Rate Limit Exceeded") from None
                raise CourseError(f"Canvas refused {what}: forbidden (does the token's user teach the course?)"
                                  ) from None
            except (InvalidAccessToken, Unauthorized):
                raise CourseError(f"Canvas refused the token ({what}): make a new one (Account > Settings > New"
                                  " access token) and set $CANVAS_API_TOKEN") from None
            except ResourceDoesNotExist:
                raise CourseError(f"Canvas has no such thing ({what}): check [canvas] course and the assignment's"
                                  " column id in the course file") from None
            except (ConnectionError, Timeout) as err:
                raise Interrupted(f"{what}: {type(err).__name__}") from None
            except CanvasException as err:
                raise CourseError(f"Canvas answered an error ({what}): {err}") from None
        return retry(once, what)

    def points(self) -> float | None:
        value = getattr(self.assignment, "points_possible", None)
        return None if value is None else float(value)

    def title(self) -> str:
        """The LMS assignment's name, as its gradebook shows it."""
        return str(getattr(self.assignment, "name", "") or "")

    def map_students(self, entries) -> None:
        """Nothing to map: a Canvas download names each student by user id, which the API uses too."""

    def posting(self) -> str:
        if getattr(self.assignment, "post_manually", False):
            return ("Canvas posts this assignment's grades manually: the grades and comments pushed stay hidden from"
                    " students until you post them (Grades > the column's menu > Post grades). push never posts.")
        return ""

    def cells(self) -> dict[str, Cell]:
        def read():
            return {str(s.user_id): self._cell(s) for s in self.assignment.get_submissions(per_page=100)}
        return self._call(read, "reading the submissions")

    @staticmethod
    def _cell(sub) -> Cell:
        """What was written to the cell: Canvas's ``entered_score``. Under Canvas's Late Policy its ``score`` is
        that less ``points_deducted`` (the deduction is Canvas's, made anew from the real submission time)."""
        entered = getattr(sub, "entered_score", None)
        score = entered if entered is not None else getattr(sub, "score", None)
        return Cell("" if score is None else points(float(score)), bool(getattr(sub, "excused", False)),
                    float(getattr(sub, "points_deducted", None) or 0.0))

    def late_policy(self) -> float | None:
        """The percent Canvas's Late Policy deducts per late day or hour (None: no deduction for late work)."""
        from canvasapi.exceptions import ResourceDoesNotExist

        def read():
            try:
                return self.client.get_course(self.course_id).get_late_policy()
            except ResourceDoesNotExist:  # a course that never set one
                return None
        found = self._call(read, "reading the course's late policy")
        if found is None or not getattr(found, "late_submission_deduction_enabled", False):
            return None
        percent = float(getattr(found, "late_submission_deduction", 0) or 0)
        return percent or None

    def read(self, uid: str) -> Cell:
        return self._cell(self._call(lambda: self.assignment.get_submission(int(uid)), f"reading {uid}'s grade"))

    def write_grade(self, uid: str, grade: str, text: str) -> None:
        """The grade and the comment's text in one PUT (the grade alone when ``text`` is "")."""
        from canvasapi.submission import Submission

        sub = Submission(self.assignment._requester, {"course_id": self.course_id, "assignment_id":
                                                      self.assignment_id, "user_id": int(uid)})
        edit = {"submission": {"posted_grade": grade}, **({"comment": {"text_comment": text}} if text else {})}
        self._call(lambda: sub.edit(**edit), f"writing {uid}'s grade")

    def write_page(self, uid: str, page: Path) -> None:
        """The feedback page as a comment's file (Canvas's three-step upload, then the comment)."""
        from canvasapi.submission import Submission

        sub = Submission(self.assignment._requester, {"course_id": self.course_id, "assignment_id":
                                                      self.assignment_id, "user_id": int(uid)})
        done, _ = self._call(lambda: sub.upload_comment(str(page)), f"uploading {uid}'s feedback page")
        if not done:
            raise CourseError(f"Canvas did not take {uid}'s feedback page (its upload answered no file)")
