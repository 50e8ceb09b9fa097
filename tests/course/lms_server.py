"""A small Canvas and Moodle on 127.0.0.1, for the push tests: the endpoints push uses, with their documented semantics.

Canvas (REST, ``/api/v1``): a course's assignment (``points_possible``,
``post_manually``); its submissions, paged by ``Link`` headers; one submission;
``PUT`` of ``submission[posted_grade]`` (a string: ``"8.5"``), ``comment[text_comment]``
and ``comment[file_ids][]`` in one request; the three-step file upload of a
comment's file (ask, upload to the returned address with its parameters, then
attach the file's id); the course's Late Policy (``late_policy``: a percent per
late day), under which a submission's ``score`` is its ``entered_score`` less
``points_deducted``. Moodle (``/webservice/rest/server.php``):
``mod_assign_get_assignments``, ``mod_assign_list_participants`` (``recordid``:
the participant number of the download and worksheet, given only under blind
marking), ``mod_assign_get_grades``
(``-1`` for no grade), ``mod_assign_save_grades`` (grade, comment and feedback
files from a draft area, each save replacing the grade's comment and files), and
``/webservice/upload.php``. Errors as each answers
them: Canvas 401 with ``WWW-Authenticate`` for a bad token, 429 (or the older
403 "Rate Limit Exceeded") with ``X-Rate-Limit-Remaining``; Moodle an exception
object with HTTP 200.

Faults a test injects: ``rate_limit(n)`` answers the next n requests 429;
``forget(uid)`` answers 200 to that student's grade but keeps nothing;
``cut_after(n)`` closes the connection on the n+1-th write request with no answer;
``slow_after(n, s)`` answers the n+1-th write request only after s seconds;
``edit(...)`` is someone else grading in the LMS. Every request is logged.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlparse


@dataclass
class Sub:
    score: float | None = None      # Canvas: entered_score, what was written (score is it less the deduction)
    excused: bool = False
    days_late: int = 0              # Canvas: from the real submission time, which its Late Policy reads
    comments: list = field(default_factory=list)   # {"text"} or {"file": name, "body": bytes}


class FakeLMS:
    """Canvas and Moodle in one small server; ``url`` is its address."""

    def __init__(self, token: str = "secret-token-123", canvas_users=(), moodle_participants=(), per_page: int = 2,
                 points: float = 3, post_manually: bool = False, course: int = 1, assignment: int = 502,
                 moodle_assignment: int = 77, moodle_grade: float = 3, late_policy: float | None = None,
                 blind_marking: bool = False):
        self.token, self.per_page, self.course = token, per_page, course
        self.late_policy = late_policy  # Canvas's Late Policy: percent of the points deducted per late day
        self.canvas = {str(u): Sub() for u in canvas_users}
        self.assignment = {"id": assignment, "course_id": course, "name": "03_subspace", "points_possible": points,
                           "post_manually": post_manually}
        self.moodle_assignment = {"id": moodle_assignment, "name": "Exercise 3", "grade": moodle_grade,
                                  "markingworkflow": 0}
        # participant number -> (user id, full name); moodle_participants: numbers, or a mapping number -> name
        names = moodle_participants if isinstance(moodle_participants, dict) else {}
        self.participants = {str(p): (str(1000 + int(p)), names.get(p, f"Student {p}")) for p in moodle_participants}
        self.blind_marking = blind_marking
        self.moodle = {uid: Sub() for uid, _ in self.participants.values()}
        self.files, self.drafts, self.log = {}, {}, []
        self._limited, self._forget, self._cut_after, self._writes = 0, set(), None, 0
        self._slow, self._slow_writes = None, 0
        self.rate_limit_code = 429
        self.lock = threading.Lock()
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    # --- faults ---
    def rate_limit(self, n: int, code: int = 429):
        self._limited, self.rate_limit_code = n, code

    def forget(self, uid: str):
        self._forget.add(str(uid))

    def cut_after(self, n: int | None):
        self._cut_after, self._writes = n, 0

    def slow_after(self, n: int, seconds: float):
        """Answer the n+1-th write request only after ``seconds`` (time for a test to press Ctrl-C)."""
        self._slow, self._slow_writes = (n, seconds), 0

    def edit(self, uid: str, score: float | None = None, excused: bool = False, moodle: bool = False):
        sub = (self.moodle[self.participants[str(uid)][0]] if moodle else self.canvas[str(uid)])
        sub.score, sub.excused = score, excused

    # --- the server ---
    def _handler(self):
        lms = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, code: int, data, headers=()):
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _form(self, body: bytes) -> list[tuple[str, str]]:
                kind = self.headers.get("Content-Type", "")
                if kind.startswith("multipart/"):
                    msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + kind.encode() + b"\r\n\r\n" + body)
                    out = []
                    for part in msg.iter_parts():
                        name = part.get_param("name", header="content-disposition")
                        filename = part.get_filename()
                        payload = part.get_payload(decode=True)
                        out.append((name, (filename, payload) if filename else payload.decode()))
                    return out
                return parse_qsl(body.decode(), keep_blank_values=True)

            def do_GET(self):
                self._route("GET")

            def do_PUT(self):
                self._route("PUT")

            def do_POST(self):
                self._route("POST")

            def _route(self, method):
                url = urlparse(self.path)
                body = self._body()
                with lms.lock:
                    lms.log.append((method, url.path, dict(parse_qsl(url.query)), body))
                    if lms._limited > 0:
                        lms._limited -= 1
                        if lms.rate_limit_code == 403:
                            raw = b"403 Forbidden (Rate Limit Exceeded)"
                            self.send_response(403)
                            self.send_header("Content-Length", str(len(raw)))
                            self.send_header("X-Rate-Limit-Remaining", "0.0")
                            self.end_headers()
                            self.wfile.write(raw)
                            return
                        return self._send(429, {"errors": [{"message": "Rate Limit Exceeded"}]},
                                          [("X-Rate-Limit-Remaining", "0.0")])
                    writes = (method == "PUT" or url.path.endswith("server.php") and b"save_grades" in body)
                    if writes and lms._slow is not None:
                        lms._slow_writes += 1
                        if lms._slow_writes > lms._slow[0]:
                            import time
                            time.sleep(lms._slow[1])
                    if writes and lms._cut_after is not None:
                        if lms._writes >= lms._cut_after:
                            self.close_connection = True
                            self.connection.shutdown(2)  # no answer at all: a network error
                            return
                        lms._writes += 1
                    if url.path.startswith("/api/v1/"):
                        return self._canvas(method, url, body)
                    if url.path.startswith("/files_api/"):
                        return self._canvas_upload(url, body)
                    if url.path == "/webservice/rest/server.php":
                        return self._moodle(body)
                    if url.path == "/webservice/upload.php":
                        return self._moodle_upload(body)
                    self._send(404, {"errors": [{"message": "not found"}]})

            # --- Canvas ---
            def _sub(self, uid: str) -> dict:
                s = lms.canvas[uid]
                # Canvas's Late Policy: score = entered_score - points_deducted, the deduction a percent of the
                # assignment's points per late day, never below zero (Canvas's documented semantics)
                deducted = 0.0
                if s.score is not None and lms.late_policy and s.days_late:
                    per_day = lms.late_policy / 100 * lms.assignment["points_possible"]
                    deducted = min(s.score, round(per_day * s.days_late, 2))
                score = None if s.score is None else round(s.score - deducted, 2)
                return {"user_id": int(uid), "assignment_id": lms.assignment["id"], "score": score,
                        "entered_score": s.score, "points_deducted": deducted if s.score is not None else None,
                        "late": s.days_late > 0, "seconds_late": 86400 * s.days_late - 3600 if s.days_late else 0,
                        "grade": None if score is None else f"{score:g}", "excused": s.excused,
                        "workflow_state": "graded" if s.score is not None else "submitted",
                        "submission_comments": [{"comment": c.get("text", ""), "attachments": [
                            {"display_name": c["file"]}] if "file" in c else []} for c in s.comments]}

            def _canvas(self, method, url, body):
                if self.headers.get("Authorization") != f"Bearer {lms.token}":
                    return self._send(401, {"errors": [{"message": "Invalid access token."}]},
                                      [("WWW-Authenticate", 'Bearer realm="canvas-lms"')])
                parts = url.path.split("/")[3:]  # courses, c, assignments, a, submissions, uid, comments, files
                if len(parts) < 2 or parts[0] != "courses" or parts[1] != str(lms.course):
                    return self._send(404, {"errors": [{"message": "The specified resource does not exist."}]})
                if len(parts) == 2:
                    return self._send(200, {"id": lms.course, "name": "Patterns and Messages"})
                if parts[2:] == ["late_policy"]:
                    return self._send(200, {"late_policy": {
                        "id": 1, "course_id": lms.course, "missing_submission_deduction_enabled": False,
                        "late_submission_deduction_enabled": bool(lms.late_policy),
                        "late_submission_deduction": lms.late_policy or 0, "late_submission_interval": "day"}})
                if len(parts) < 4 or parts[2] != "assignments" or parts[3] != str(lms.assignment["id"]):
                    return self._send(404, {"errors": [{"message": "The specified resource does not exist."}]})
                if len(parts) == 4:
                    return self._send(200, lms.assignment)
                if len(parts) == 5 and method == "GET":  # the submissions, paged by Link headers
                    query = dict(parse_qsl(url.query))
                    page, per = int(query.get("page", 1)), min(int(query.get("per_page", 10)), lms.per_page)
                    ids = sorted(lms.canvas, key=int)
                    chunk = ids[(page - 1) * per: page * per]
                    base = f"{lms.url}{url.path}?per_page={per}"
                    links = [f'<{base}&page={page + 1}>; rel="next"'] if page * per < len(ids) else []
                    links.append(f'<{base}&page=1>; rel="first"')
                    return self._send(200, [self._sub(u) for u in chunk], [("Link", ", ".join(links))])
                uid = parts[5] if len(parts) > 5 else ""
                if uid not in lms.canvas:
                    return self._send(404, {"errors": [{"message": "The specified resource does not exist."}]})
                if len(parts) == 6 and method == "GET":
                    return self._send(200, self._sub(uid))
                if len(parts) == 6 and method == "PUT":
                    form = self._form(body)
                    sub = lms.canvas[uid]
                    for key, value in form:
                        if key == "submission[posted_grade]":
                            if uid not in lms._forget:  # a 200 that keeps nothing
                                sub.score = None if value == "" else float(value)
                        elif key == "submission[excuse]":
                            sub.excused = value == "true"
                        elif key == "comment[text_comment]":
                            sub.comments.append({"text": value})
                        elif key == "comment[file_ids][]":
                            name, data = lms.files[int(value)]
                            sub.comments.append({"file": name, "body": data})
                    return self._send(200, self._sub(uid))
                if parts[6:] == ["comments", "files"] and method == "POST":  # step 1: ask where to upload
                    form = dict(self._form(body))
                    token = f"t{len(lms.files) + len(lms.drafts) + 1}"
                    lms.drafts[token] = form.get("name", "file")
                    return self._send(200, {"upload_url": f"{lms.url}/files_api/upload/{token}",
                                            "upload_params": {"key": token, "filename": form.get("name")}})
                return self._send(404, {"errors": [{"message": "not found"}]})

            def _canvas_upload(self, url, body):  # step 2: the file, with the parameters given (no token)
                token = url.path.rsplit("/", 1)[1]
                form = dict(self._form(body))
                if token not in lms.drafts or form.get("key") != token or "file" not in form:
                    return self._send(400, {"message": "bad upload"})
                name, data = form["file"]
                fid = 700 + len(lms.files)
                lms.files[fid] = (name, data)
                return self._send(201, {"id": fid, "display_name": name, "url": f"{lms.url}/files/{fid}"})

            # --- Moodle ---
            def _moodle(self, body):
                form = dict(self._form(body))
                if form.get("wstoken") != lms.token:
                    return self._send(200, {"exception": "moodle_exception", "errorcode": "invalidtoken",
                                            "message": "Invalid token - token not found"})
                fn = form.get("wsfunction")
                if fn == "mod_assign_get_assignments":
                    if form.get("courseids[0]") != str(lms.course):
                        return self._send(200, {"courses": [], "warnings": [  # as Moodle answers it
                            {"item": "course", "itemid": int(form.get("courseids[0]") or 0), "warningcode": "1",
                             "message": "No access rights in course context"}]})
                    return self._send(200, {"courses": [{"id": lms.course, "assignments": [lms.moodle_assignment]}],
                                            "warnings": []})
                if fn == "mod_assign_list_participants":
                    # recordid (the participant number) only under blind marking, as Moodle does
                    return self._send(200, [{"id": int(uid), "fullname": name,
                                             **({"recordid": int(p)} if lms.blind_marking else {})}
                                            for p, (uid, name) in lms.participants.items()])
                if fn == "mod_assign_get_grades":
                    grades = [{"id": i, "userid": int(uid), "grade": "-1.00000" if s.score is None else
                               f"{s.score:.5f}", "attemptnumber": 0, "timemodified": 0}
                              for i, (uid, s) in enumerate(lms.moodle.items())]
                    return self._send(200, {"assignments": [{"assignmentid": lms.moodle_assignment["id"],
                                                             "grades": grades}], "warnings": []})
                if fn == "mod_assign_save_grades":
                    uid = form.get("grades[0][userid]", "")
                    if uid not in lms.moodle:
                        return self._send(200, {"exception": "invalid_parameter_exception",
                                                "errorcode": "invalidparameter", "message": "Invalid user"})
                    sub = lms.moodle[uid]
                    if uid not in lms._forget:
                        sub.score = float(form["grades[0][grade]"])
                    # one feedback comment and one file area per grade: a save replaces them (the comments
                    # plugin updates its record; file_save_draft_area_files makes the area the draft's)
                    text = form.get("grades[0][plugindata][assignfeedbackcomments_editor][text]")
                    if text:
                        sub.comments = [c for c in sub.comments if "text" not in c] + [{"text": text}]
                    draft = form.get("grades[0][plugindata][files_filemanager]")
                    if draft:
                        name, data = lms.files[int(draft)]
                        sub.comments = [c for c in sub.comments if "file" not in c] + [{"file": name, "body": data}]
                    return self._send(200, None)
                return self._send(200, {"exception": "webservice_access_exception", "errorcode": "accessexception",
                                        "message": f"Access control exception ({fn})"})

            def _moodle_upload(self, body):
                form = dict(self._form(body))
                if form.get("token") != lms.token:
                    return self._send(200, {"error": "Invalid token"})
                name, data = form["file_1"]
                item = 900 + len(lms.files)
                lms.files[item] = (name, data)
                return self._send(200, [{"component": "user", "filearea": "draft", "itemid": item,
                                         "filename": name}])

        return Handler
