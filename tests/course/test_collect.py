"""Collecting from a Canvas or Moodle zip: every file used or listed, the newest upload graded, nothing unsafe."""
import json
import os
import sys
import zipfile

import pytest

from conftest import ASSIGNMENTS, canvas_gradebook, canvas_zips, moodle_worksheet, moodle_zip
from pm_course.steps import collect
from pm_course import lms
from pm_course.state import submissions
import pm


def run(course, exercises, *args):
    env = dict(os.environ, PM_COURSE_DIR=str(course), PM_EXERCISES=str(exercises))
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=300)


@pytest.fixture
def expected(monkeypatch, two_assignments):
    monkeypatch.setenv("PM_EXERCISES", str(two_assignments))
    return {a: nb for a, (nb, _) in ASSIGNMENTS.items()}


def test_canvas_names_are_parsed_and_the_newest_upload_wins(tmp_path, expected):
    zips = canvas_zips(tmp_path)
    found, chosen = collect.from_zip(zips["03_subspace"], "canvas", None, {})
    [jose, zoe] = sorted(found.entries, key=lambda e: e.lms_id)
    assert (jose.student, jose.assignment, jose.lms_id, jose.late) == ("nunezjose_101", "03_subspace", "101", True)
    assert chosen[(jose.student, "03_subspace")].filename == "nunezjose_LATE_101_9001_subspace-1.ipynb"
    assert jose.submitted == ""  # the zip's dates are when it was made: never a submission time
    assert (zoe.student, zoe.late, zoe.reason) == ("obrienzoe_102", False,
                                                   "graded Subspace (2).ipynb as 03_subspace/subspace.ipynb")
    assert found.why_unused == {
        "nunezjose_LATE_101_9001_subspace.ipynb": "an older upload: nunezjose_101's newest,"
                                                  " nunezjose_LATE_101_9001_subspace-1.ipynb, is graded",
        "obrienzoe_102_9002_notes.pdf": "not a notebook (.pdf)",
    }


def test_moodle_folders_with_accents_and_spaces(tmp_path, expected):
    found, chosen = collect.from_zip(moodle_zip(tmp_path), "moodle", "03_subspace", {})
    by = {e.lms_id: e for e in found.entries}
    assert by["201"].student == "josenunez_201" and by["201"].name == "José Núñez"
    assert chosen[("zoeobrien_202", "03_subspace")].filename.endswith("Subspace (2).ipynb")  # (2): the newer
    assert set(found.why_unused) == {"Zoë O'Brien_202_assignsubmission_file_/subspace.ipynb",
                                     "Zoë O'Brien_202_assignsubmission_onlinetext_/onlinetext.html"}


def test_rosters_of_both_lmss(tmp_path):
    canvas = lms.roster(canvas_gradebook(tmp_path / "gradebook.csv"), "canvas")
    assert [(s.lms_id, s.name) for s in canvas] == [("101", "Núñez, José"), ("102", "O'Brien, Zoë"),
                                                     ("103", "Smith, Ann Marie")]  # no test student, no points row
    moodle = lms.roster(moodle_worksheet(tmp_path / "worksheet.csv"), "moodle")
    assert [(s.lms_id, s.late) for s in moodle] == [("201", True), ("202", False), ("203", False)]
    with pytest.raises(SystemExit, match="a Canvas file, but the submissions come from Moodle"):
        lms.roster(tmp_path / "gradebook.csv", "moodle")


@pytest.mark.parametrize("evil", ["../../escaped.ipynb", "/etc/evil_1_2_x.ipynb", "a/../../b.ipynb",
                                  "C:\\evil_1_2_x.ipynb"])
def test_a_zip_that_points_outside_is_refused_and_nothing_is_written(tmp_path, two_assignments, evil):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("ok_1_2_subspace.ipynb", "{}")
        z.writestr(evil, "{}")
    proc = run(tmp_path / "course", two_assignments, "collect", "--from", "canvas", bad)
    assert proc.returncode != 0 and "refused" in proc.stderr and "outside" in proc.stderr, proc.stderr
    assert not (tmp_path / "course" / "submitted").exists()
    assert not (tmp_path / "escaped.ipynb").exists()


def test_bad_input_is_named(tmp_path, two_assignments):
    course = tmp_path / "course"
    (tmp_path / "not.zip").write_text("hello")
    for args, says in ((["--from", "canvas", tmp_path / "not.zip"], "not a zip file"),
                       (["--from", "canvas", tmp_path / "missing.zip"], "no such file"),
                       (["--from", "folder", tmp_path / "nowhere"], "is not a folder"),
                       (["--from", "canvas", tmp_path / "not.zip", "--assignment", "99_nope"], "is not an assignment")):
        proc = run(course, two_assignments, "collect", *args)
        assert proc.returncode != 0 and says in proc.stderr, (args, proc.stderr)


def test_collecting_copies_and_keeps_the_lms_facts(tmp_path, two_assignments):
    course, zips = tmp_path / "course", canvas_zips(tmp_path / "downloads")
    before = {p: p.read_bytes() for p in (tmp_path / "downloads").iterdir()}
    gradebook = canvas_gradebook(tmp_path / "gradebook.csv")
    proc = run(course, two_assignments, "collect", "--from", "canvas", zips["03_subspace"], "--roster", gradebook)
    assert proc.returncode == 0, proc.stderr
    assert {p: p.read_bytes() for p in (tmp_path / "downloads").iterdir()} == before  # copied, never moved
    assert "obrienzoe_102_9002_notes.pdf: not a notebook (.pdf)" in proc.stdout
    assert "Not submitted: smithannmarie_103/03_subspace" in proc.stdout
    rows = {(e.student, e.assignment): e for e in submissions.read_manifest(course / "submissions.csv")}
    assert rows[("nunezjose_101", "03_subspace")].late and rows[("nunezjose_101", "03_subspace")].lms == "canvas"
    assert rows[("smithannmarie_103", "03_subspace")].status == "not submitted"
    assert sorted(p.relative_to(course / "submitted").as_posix() for p in (course / "submitted").rglob("*.ipynb")) \
        == ["nunezjose_101/03_subspace/subspace.ipynb", "obrienzoe_102/03_subspace/subspace.ipynb"]


def flat(download, path):
    """Moodle's download with "Download submissions in folders" unticked: each folder's '/' gone from the names."""
    with zipfile.ZipFile(download) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(zipfile.ZipInfo(info.filename.replace("_/", "_"), date_time=info.date_time),
                         src.read(info))
    return path


def test_moodles_download_not_in_folders_is_read_like_the_one_in_folders(tmp_path, two_assignments, expected):
    folders = moodle_zip(tmp_path / "downloads")
    download = flat(folders, tmp_path / "flat.zip")
    assert "Zoë O'Brien_202_assignsubmission_file_Subspace (2).ipynb" in zipfile.ZipFile(download).namelist()
    found, chosen = collect.from_zip(download, "moodle", "03_subspace", {})
    same, _ = collect.from_zip(folders, "moodle", "03_subspace", {})
    assert [(e.student, e.assignment, e.name, e.lms_id) for e in found.entries] == \
        [(e.student, e.assignment, e.name, e.lms_id) for e in same.entries] == \
        [("josenunez_201", "03_subspace", "José Núñez", "201"), ("zoeobrien_202", "03_subspace", "Zoë O'Brien", "202")]
    assert chosen[("zoeobrien_202", "03_subspace")].filename == "Zoë O'Brien_202_assignsubmission_file_Subspace (2).ipynb"
    course = tmp_path / "course"
    proc = run(course, two_assignments, "collect", "--from", "moodle", download, "--assignment", "03_subspace",
               "--roster", moodle_worksheet(tmp_path / "worksheet.csv"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {e.student: e for e in submissions.read_manifest(course / "submissions.csv")}
    assert {s: e.status for s, e in rows.items()} == {"josenunez_201": "graded", "zoeobrien_202": "graded",
                                                       "annmariesmith_203": "not submitted"}, rows
    kept = json.loads((course / "submitted" / "zoeobrien_202" / "03_subspace" / "subspace.ipynb").read_bytes())
    assert kept == json.loads(zipfile.ZipFile(download).read("Zoë O'Brien_202_assignsubmission_file_Subspace (2).ipynb"))


def test_canvas_anonymous_download_is_refused_saying_what_to_download(tmp_path, two_assignments):
    """Anonymous grading: Canvas names files anon_<anonymous id>_<file id>_<name>, with no student's id."""
    download = tmp_path / "anonymous.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr("anon_gKHvu_9001_subspace.ipynb", "{}")
        z.writestr("LATE_anon_Xq7Rt_9002_subspace.ipynb", "{}")
    course = tmp_path / "course"
    proc = run(course, two_assignments, "collect", "--from", "canvas", download, "--assignment", "03_subspace")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert f"{download} is Canvas's download of an assignment graded anonymously (2 file(s) named" \
        " anon_<anonymous id>_..., e.g. LATE_anon_Xq7Rt_9002_subspace.ipynb)" in proc.stderr, proc.stderr
    assert "turn off 'Graders cannot view student names' in the assignment's settings" in proc.stderr
    assert "Download Submissions again: that zip names each file <name>_<user id>_<submission id>_" in proc.stderr
    assert not (course / "submitted").exists() and not (course / "submissions.csv").exists()


NAMES = [  # what Canvas and Moodle write, and what they do not
    "lovelaceada_1001_9001_copying.ipynb", "lovelaceada_LATE_1001_9001_copying-2.ipynb",
    "lovelaceada_late_1001_9001_copying (1).ipynb", "lovelaceada_1001_9001_notes.pdf",
    "lovelaceada_1001_9001_copying.IPYNB", "lovelaceada_1001_copying.ipynb", "anon_x1y2_77_copying.ipynb",
    "lovelaceada_1001_9001_.ipynb", "sub/lovelaceada_1001_9001_copying.ipynb", "copying.ipynb", ".ipynb", "",
    "Ada Lovelace_1001_assignsubmission_file_/copying.ipynb",
    "Ada Lovelace_1001_assignsubmission_file_copying.ipynb",
    "Ada Lovelace_1001_assignsubmission_file_/sub/copying.ipynb",
    "Ada Lovelace_1001_assignsubmission_onlinetext_/onlinetext.html",
    "Núñez José_1002_assignsubmission_file_/Exercise 1.ipynb", "Ada Lovelace_assignsubmission_file_/x.ipynb",
]


@pytest.mark.parametrize("regexp", [lms.CANVAS_NAME, lms.MOODLE_NAME], ids=["canvas", "moodle"])
def test_file_names_are_read_as_nbgraders_file_name_collector_reads_them(regexp):
    from nbgrader.plugins import FileNameCollectorPlugin

    plugin = FileNameCollectorPlugin(named_regexp=regexp, valid_ext=[".ipynb"])
    got = {name: collect.file_name_fields(regexp, name) for name in NAMES}
    assert got == {name: plugin.collect(name) for name in NAMES}
    assert sum(v is not None for v in got.values()) >= 3  # the names cover matches and refusals alike
    assert sum(v is None for v in got.values()) >= 5


def test_a_canvas_link_or_text_entry_could_not_be_graded_with_the_reason(tmp_path, two_assignments):
    """Canvas names a website URL submission <name>_<user id>_link.html (no submission id): handed in, so
    "could not be graded" with why, never "not submitted"."""
    from conftest import MARCH, _zip, solved

    course = tmp_path / "course"
    download = _zip(tmp_path / "submissions.zip", [
        ("nunezjose_101_9001_subspace.ipynb", solved("03_subspace"), MARCH),
        ("smithannmarie_103_link.html", b'<meta http-equiv="refresh" content="0; url=https://colab.example.org/'
                                        b'drive/abc123">', MARCH)])
    proc = run(course, two_assignments, "collect", "--from", "canvas", download, "--assignment", "03_subspace",
               "--roster", canvas_gradebook(tmp_path / "gradebook.csv"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {(e.student, e.assignment): e for e in submissions.read_manifest(course / "submissions.csv")}
    ann = rows[("smithannmarie_103", "03_subspace")]
    assert ann.status == "could not be graded", (ann.status, ann.reason)
    assert "submitted a link (https://colab.example.org/drive/abc123" in ann.reason and "link.html" in ann.reason
