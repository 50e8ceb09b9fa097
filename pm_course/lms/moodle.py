"""One Moodle assignment through Moodle's REST web services (``requests``), as ``pm-course push`` reads and writes it."""
from __future__ import annotations

from pathlib import Path

from pm_course.lms.api import Cell, Interrupted, RateLimited, folded, points, retry
from pm_course.state.course import CourseError
from pm_course.state.lms_cells import number


class Moodle:
    """One Moodle assignment, through Moodle's REST web services (``requests``)."""

    name = "Moodle"

    def __init__(self, server, token: str, assignment_id: int):
        import requests

        self.http, self.url, self.token, self.id = requests.Session(), server.url, token, assignment_id
        self.course = server.course
        found = self._call("mod_assign_get_assignments", {"courseids[0]": self.course})
        if not any(c.get("id") == self.course for c in found.get("courses", [])):
            said = "; ".join(str(w.get("message")) for w in found.get("warnings", []) if isinstance(w, dict))
            raise CourseError(f"Moodle shows this token no course {self.course}" + (f" ({said})" if said else "") +
                              ": check [moodle] course in the course file (the number in the course's address,"
                              " /course/view.php?id=12), and that the token's user teaches that course")
        mine = [a for c in found.get("courses", []) for a in c.get("assignments", []) if a.get("id") == self.id]
        if not mine:
            ids = ", ".join(f"{a.get('id')} ({a.get('name')})" for c in found.get("courses", [])
                            for a in c.get("assignments", []))
            raise CourseError(f"Moodle course {self.course} has no assignment {self.id}: its assignments are"
                              f" {ids or 'none this token can see'}; set moodle_id in the course file")
        self.meta = mine[0]
        self.participants = self._call("mod_assign_list_participants", {"assignid": self.id, "groupid": 0,
                                                                        "filter": ""})
        # the download's participant number -> Moodle's user id: Moodle gives it (recordid) only under blind marking
        self.users = {str(p["recordid"]): str(p["id"]) for p in self.participants if p.get("recordid") is not None}

    def map_students(self, entries) -> None:
        """Map each entry's participant number (``lms_id``) to its Moodle user, where Moodle did not.

        Without blind marking ``mod_assign_list_participants`` leaves ``recordid`` out: a student is then
        found by full name among the assignment's participants (the name of the worksheet or of the
        download's folder). A student no participant is named like is not a student of this assignment
        (a skipped row); two participants of one name are refused, naming them, before anything is written.
        """
        by_name: dict[str, list[dict]] = {}
        for p in self.participants:
            by_name.setdefault(folded(p.get("fullname", "")), []).append(p)
        ambiguous = []
        for e in entries:
            if e.lms_id in self.users or not e.name:
                continue
            found = by_name.get(folded(e.name), [])
            if len(found) == 1:
                self.users[e.lms_id] = str(found[0]["id"])
            elif len(found) > 1:
                ambiguous.append(f"{e.student} ({e.name!r}: Moodle users {', '.join(str(p['id']) for p in found)})")
        if ambiguous:
            raise CourseError(f"Moodle assignment {self.id} has two or more participants of one name, and gives no"
                              " participant numbers (blind marking is off), so these students cannot be told apart:"
                              f" {'; '.join(ambiguous)}. Nothing was written: grade them in Moodle by hand, or turn"
                              " blind marking on (then Moodle names each participant number).")

    def _post(self, path: str, data: dict, files=None):
        import requests

        try:
            answer = self.http.post(self.url + path, data=data, files=files, timeout=60)
        except (requests.ConnectionError, requests.Timeout) as err:
            raise Interrupted(f"{path}: {type(err).__name__}") from None
        if answer.status_code == 429 or (answer.status_code == 403 and "Rate Limit" in answer.text):
            raise RateLimited(f"HTTP {answer.status_code}")
        if answer.status_code != 200:
            raise CourseError(f"Moodle answered HTTP {answer.status_code} to {path}")
        try:
            return answer.json()
        except ValueError:
            raise CourseError(f"Moodle's answer to {path} is not JSON: is [moodle] url the site's address?") from None

    def _call(self, function: str, params: dict):
        data = {"wstoken": self.token, "wsfunction": function, "moodlewsrestformat": "json", **params}

        def once():
            out = self._post("/webservice/rest/server.php", data)
            if isinstance(out, dict) and "exception" in out:
                code = out.get("errorcode", "")
                if code in ("invalidtoken", "accessexception"):
                    raise CourseError(f"Moodle refused the token ({function}: {out.get('message')}): make a"
                                      " web-service token (Site administration > Server > Web services >"
                                      " Manage tokens) and set $MOODLE_TOKEN")
                raise CourseError(f"Moodle answered an error to {function}: {out.get('message')} ({code})")
            return out
        return retry(once, function)

    def points(self) -> float | None:
        grade = number(self.meta.get("grade"))
        if grade is not None and grade < 0:
            raise CourseError(f"Moodle assignment {self.id} is graded with a scale, not points: push sends points;"
                              " export the grading worksheet instead (pm-course export --to moodle)")
        return grade

    def title(self) -> str:
        return str(self.meta.get("name") or "")

    def late_policy(self) -> float | None:
        """Moodle deducts nothing of its own for lateness (its worksheet gives the times pm-course's policy uses)."""
        return None

    def posting(self) -> str:
        if self.meta.get("markingworkflow"):
            return ("Moodle's marking workflow is on for this assignment: the grades pushed reach students when"
                    " you release them (workflow state Released).")
        return ""

    def cells(self) -> dict[str, Cell]:
        got = self._call("mod_assign_get_grades", {"assignmentids[0]": self.id})
        by_user = {str(g["userid"]): g.get("grade", "") for a in got.get("assignments", [])
                   for g in a.get("grades", [])}
        out = {}
        for participant, uid in self.users.items():
            value = number(by_user.get(uid, ""))
            out[participant] = Cell("" if value is None or value < 0 else points(value))
        return out

    def read(self, participant: str) -> Cell:
        return self.cells().get(participant, Cell())

    def write(self, participant: str, grade: str, text: str, page: Path | None) -> None:
        """Grade, comment and feedback file in one ``mod_assign_save_grades`` (the file uploaded to a draft first)."""
        uid = self.users[participant]
        params = {"assignmentid": self.id, "applytoall": 0, "grades[0][userid]": uid, "grades[0][grade]": grade,
                  "grades[0][attemptnumber]": -1, "grades[0][addattempt]": 0, "grades[0][workflowstate]": "",
                  "grades[0][plugindata][assignfeedbackcomments_editor][text]": text,
                  "grades[0][plugindata][assignfeedbackcomments_editor][format]": 1}
        if page is not None:
            def upload():
                with page.open("rb") as f:
                    return self._post("/webservice/upload.php", {"token": self.token, "filearea": "draft",
                                                                 "itemid": 0}, files={"file_1": (page.name, f)})
            out = retry(upload, f"uploading {participant}'s feedback page")
            if not (isinstance(out, list) and out and "itemid" in out[0]):
                raise CourseError(f"Moodle did not take {participant}'s feedback page: {str(out)[:200]}")
            params["grades[0][plugindata][files_filemanager]"] = out[0]["itemid"]
        self._call("mod_assign_save_grades", params)
