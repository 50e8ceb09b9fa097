"""Each point judged on its own function: the judging block, what the grader hands it, and
what make assignments refuses."""
from pathlib import Path

import nbformat
import pytest

import attnlib.checks as checks
from attnlib.checks import judging

ROOT = Path(__file__).resolve().parents[2]
from pm_course.grading import isolate  # noqa: E402


def cell(source, gid, solution=False, points=1):
    c = nbformat.v4.new_code_cell(source)
    c.metadata["nbgrader"] = {"grade_id": gid, "solution": solution, "grade": not solution,
                              "points": 0 if solution else points, "locked": not solution, "schema_version": 3}
    return c


SOLUTION = '''
def weights(s):
    ### BEGIN SOLUTION
    e = _exp(s - max(s))
    return e / e.sum()
    ### END SOLUTION


def _exp(x):
    import numpy as np
    return np.exp(x)


def pick(s):
    ### BEGIN SOLUTION
    return weights(s).argmax()
    ### END SOLUTION


def last(s):
    ### BEGIN SOLUTION
    return s[-1]
    ### END SOLUTION
'''


def toy(*tests):
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell(SOLUTION, "sol", solution=True), *(cell(src, f"test-{i}") for i, src in enumerate(tests))]
    return nb


GOOD = ['with judging("weights"):\n    assert weights([0.0, 1.0]).sum() == 1\nprint("ok")',
        'with judging("pick"):\n    assert pick([0.0, 2.0]) == 1 and weights([1.0]).size == 1',
        'with judging("last"):\n    assert last([1, 2]) == 2']


def test_a_well_formed_notebook_has_no_problems():
    assert isolate.problems(toy(*GOOD), "toy") == []


@pytest.mark.parametrize("source,why", [
    ('assert weights([0.0]).sum() == 1', "no `with judging"),
    ('with judging("weights"):\n    pass\nassert weights([0.0]).sum() == 1', "outside its judging block"),
    ('with judging("weights"):\n    assert pick([0.0, 1.0]) == 1', "relies on ['pick']"),
    ('with judging("nothing"):\n    pass', "which no solution cell defines"),
])
def test_a_cell_that_would_cascade_is_refused(source, why):
    problems = isolate.problems(toy(source, *GOOD[1:]), "toy")
    assert any(why in p and "test-0" in p for p in problems), problems


def test_a_judged_function_whose_own_code_calls_a_later_one_is_refused():
    nb = toy('with judging("pick"):\n    assert pick([0.0, 2.0]) == 1', *GOOD)   # pick before weights
    assert any("relies on ['weights']" in p for p in isolate.problems(nb, "toy"))


def test_the_grader_hands_over_only_what_was_judged_above():
    nb = toy(*GOOD)
    assert isolate.instructor_source(nb, "test-0") == ""
    given = isolate.instructor_source(nb, "test-1")
    assert "def weights(" in given and "def _exp(" in given      # with the private helper it calls
    assert "def pick(" not in given and "def last(" not in given  # never the judged one, nor a later one
    assert "BEGIN SOLUTION" not in given
    later = isolate.instructor_source(nb, "test-2")
    assert "def weights(" in later and "def pick(" in later and "def last(" not in later


def test_an_answer_that_is_a_value_is_judged_but_never_handed_over():
    nb = toy(*GOOD)
    nb.cells.insert(1, cell("### BEGIN SOLUTION\nverdict = True\n### END SOLUTION", "ans", solution=True))
    nb.cells.insert(2, cell('with judging("verdict"):\n    assert verdict', "test-v"))
    assert isolate.problems(nb, "toy") == []
    assert "verdict" not in isolate.instructor_source(nb, "test-0")


def test_judging_puts_the_instructors_versions_in_place_and_back():
    ns = {"judging": judging}
    exec("def weights(s):\n    return 'wrong'\ndef pick(s):\n    return weights(s)", ns)
    mine = ns["weights"]
    checks._offer("def weights(s):\n    return 'right'")
    exec('with judging("pick"):\n    inside = pick([1])', ns)
    assert ns["inside"] == "right" and ns["weights"] is mine
    exec('with judging("pick"):\n    outside = pick([1])', ns)       # nothing offered: nothing changes
    assert ns["outside"] == "wrong"


def test_judging_restores_after_an_error_and_names_a_missing_function():
    ns = {"judging": judging, "weights": "mine"}
    checks._offer("def weights(s):\n    return 1")
    with pytest.raises(NameError, match="pick is not defined: the cell that defines it"):
        exec('with judging("pick"):\n    pick([1])', ns)
    assert ns["weights"] == "mine"


def test_the_judged_function_is_never_replaced():
    ns = {"judging": judging}
    exec("def pick(s):\n    return 'mine'", ns)
    checks._offer("def pick(s):\n    return 'instructor'")
    exec('with judging("pick"):\n    got = pick([1])', ns)
    assert ns["got"] == "mine"


def judged(student: str, instructor: str, call: str = "got = pick([1])", ns: dict | None = None) -> dict:
    """The namespace after ``student``'s code ran and ``call`` ran inside ``judging("pick")``, the instructor's
    ``instructor`` offered for the functions judged before."""
    ns = ns if ns is not None else {"judging": judging}
    if student:
        exec(student, ns)
    checks._offer(instructor)
    exec(f'with judging("pick"):\n    {call}', ns)
    return ns


def test_the_instructors_version_takes_the_call_the_students_function_takes():
    """The student named the parameters their own way and calls the function by keyword: the
    instructor's version put in its place takes that call, by the student's parameter order."""
    theirs = "def weights(s, t):\n    return ('right', s, t)"
    ns = judged("def weights(scores, temp=1.0):\n    return 'wrong'\n"
                "def pick(s):\n    return weights(temp=2.0, scores=s)", theirs)
    assert ns["got"] == ("right", [1], 2.0)
    ns = judged("", theirs, "by_default = weights([3])", ns)   # the student's default, handed on
    assert ns["by_default"] == ("right", [3], 1.0)


def test_a_keyword_call_by_the_students_name_reaches_the_instructors_version():
    """Without the mapping, the instructor's names would refuse the student's keyword (a TypeError)."""
    theirs = "def weights(s):\n    return 'right'"
    ns = judged("def weights(scores):\n    return 'wrong'\ndef pick(s):\n    return weights(scores=s)", theirs)
    assert ns["got"] == "right"
    ns["weights"] = lambda scores: "wrong"   # a lambda has a signature too
    assert judged("", theirs, ns=ns)["got"] == "right"


@pytest.mark.parametrize("student", [
    "def weights(*args):\n    return 'wrong'",            # nothing to map by
    "def weights(s, extra):\n    return 'wrong'",         # more parameters than the instructor's
    "weights = 'not a function'",
])
def test_a_signature_that_cannot_be_mapped_leaves_the_instructors_as_it_is(student):
    ns = judged(student + "\ndef pick(s):\n    return weights(s)", "def weights(s):\n    return 'right'")
    assert ns["got"] == "right"


def test_the_same_names_hand_over_the_instructors_function_itself():
    ns = judged("def weights(s):\n    return 'wrong'\ndef pick(s):\n    return weights",
                "def weights(s):\n    return 'right'")
    assert ns["got"].__name__ == "weights" and not hasattr(ns["got"], "__wrapped__")
