"""Every visible check can fail: each test cell's visible part is fed the wrong answers listed
for it (``wrong_answers.py``), and at least one must make it raise.

A visible check that no wrong answer can fail tells a student "all visible checks pass" whatever
they wrote. The cell-level test names every such cell; the per-assertion test does the same,
for the exercises listed in ``EVERY_ASSERTION``, for each ``assert`` of a visible part.
"""
from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import attnlib.checks as checks
from test_exercises import (ASSIGNMENTS, graded_cells, grade_id, hidden_span, isolate, notebook, run_cell,
                            solution_cell, solved_namespace, with_wrong_answer)
from wrong_answers import WRONG

pytestmark = pytest.mark.slow  # every test cell's visible part against each wrong answer: not in make check


def visible_source(name, test_id):
    test = next(c.source for c in notebook(name).cells if grade_id(c) == test_id)
    first, last = hidden_span(test)
    lines = test.splitlines()
    return "\n".join(lines[:first - 1] + lines[last:])


def wrong_for(name, test_id):
    """The wrong answers listed for test cell ``test_id``: [(why, solution cell source with it)]."""
    return [(why, with_wrong_answer(solution_cell(name, target).source, target, body))
            for target, tid, why, body in WRONG.get(name, []) if tid == test_id]


CELLS = [(name, gid) for name in ASSIGNMENTS for gid in graded_cells(name)]


@pytest.mark.parametrize("name,test_id", CELLS, ids=[f"{n[:2]}-{g}" for n, g in CELLS])
def test_every_visible_check_fails_on_some_wrong_answer(name, test_id):
    tree = ast.parse(visible_source(name, test_id))
    checking = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)
                or (isinstance(n, ast.Call) and getattr(n.func, "id", "").startswith("check_"))]
    assert checking, f"{name}: test cell {test_id!r} has no visible check at all (no assert, no check_*)"
    cases = wrong_for(name, test_id)
    assert cases, f"{name}: no wrong answer is listed for test cell {test_id!r}, so nothing shows its visible check can fail"
    if not any(isinstance(run_cell(name, test_id, [answer], "visible"), AssertionError) for _, answer in cases):
        pytest.fail(f"{name}: the visible check of test cell {test_id!r} passes every wrong answer listed for it"
                    f" ({', '.join(why for why, _ in cases)}): it cannot fail")


# --- each assertion of a visible part ------------------------------------------------------

EVERY_ASSERTION = ["01_copying", "02_averaging", "03_subspace", "04_noisy_keys", "05_two_heads", "06_debug_head",
                   "07_bookkeeping", "08_patterns_messages", "09_attribution",
                   "10_attribution_patching"]


class _Recorder(ast.NodeTransformer):
    """Each statement of a visible part run on its own: an ``assert`` (or a ``check_*`` call)
    that fails records its line and the cell goes on, so that a wrong answer caught early
    still shows which later checks it fails too."""

    def _wrap(self, body):
        out = []
        for stmt in body:
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(stmt, field, None), list) and not isinstance(stmt, ast.FunctionDef):
                    setattr(stmt, field, self._wrap(getattr(stmt, field)))
            if isinstance(stmt, (ast.For, ast.While, ast.With, ast.If, ast.Try, ast.FunctionDef)):
                out.append(stmt)
                continue
            record = ast.parse(f"_fired.add({stmt.lineno})").body
            out.append(ast.Try(body=[stmt], handlers=[
                ast.ExceptHandler(type=ast.Name("AssertionError", ast.Load()), name=None, body=record),
                ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), name=None, body=[ast.Pass()])],
                orelse=[], finalbody=[]))
        return out

    def visit_Module(self, node):
        node.body = self._wrap(node.body)
        return node


def fired_lines(name, test_id, answer):
    """The lines of the visible part whose check fails with ``answer`` in place."""
    tree = ast.fix_missing_locations(_Recorder().visit(ast.parse(visible_source(name, test_id))))
    ns = dict(solved_namespace(name))
    exec(compile(answer, f"<{name}: answer>", "exec"), ns)
    ns["_fired"] = fired = set()
    checks._offer(isolate.instructor_source(notebook(name), test_id))
    try:
        with np.errstate(all="ignore"):
            exec(compile(tree, f"<{name}:{test_id} visible, each check>", "exec"), ns)
    except Exception:  # noqa: BLE001, S110 -- a statement outside the wrapped ones; what fired so far counts
        pass
    finally:
        __import__("attnlib.grader").grader._offered = None
    return fired


ASSERT_CELLS = [(name, gid) for name in EVERY_ASSERTION if name in ASSIGNMENTS for gid in graded_cells(name)]


@pytest.mark.parametrize("name,test_id", ASSERT_CELLS, ids=[f"{n[:2]}-{g}" for n, g in ASSERT_CELLS])
def test_every_visible_assertion_fails_on_some_wrong_answer(name, test_id):
    """Only asserts: a check_* call (shape, finiteness) is a guard, caught or not by the listed answers."""
    source = visible_source(name, test_id)
    lines = source.splitlines()
    asserts = {n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assert)}
    fired = set().union(*(fired_lines(name, test_id, answer) for _, answer in wrong_for(name, test_id)))
    dead = sorted(asserts - fired)
    assert not dead, f"{name}: in test cell {test_id!r}, no wrong answer listed fails " + "; ".join(
        repr(lines[i - 1].strip()[:90]) for i in dead)


# --- exercise 1.3: the check on a tiny eps -------------------------------------------------

def _visible_error(body):
    answer = with_wrong_answer(solution_cell("01_copying", "smallest_beta").source, "smallest_beta", body)
    return run_cell("01_copying", "test-beta", [answer], "visible")


def test_1_3s_check_fails_on_a_formula_that_loses_eps_digits():
    """1 - (1 - eps) is off by 2e-5 of itself at eps = 1e-12: the check's tolerance is relative, and catches it."""
    error = _visible_error("weight = 1 - eps\nreturn np.log(weight * (n - 1) / (1 - weight))")
    assert isinstance(error, AssertionError) and "not 1e-12" in str(error), error


def test_1_3s_check_fails_on_any_large_beta_for_a_tiny_eps():
    """np.isclose's default atol (1e-8) would let any beta above about 20 pass at eps = 1e-12; this check does not."""
    for beta in (25.0, 28.7, 50.0, 700.0):
        error = _visible_error(f"return {beta} if eps < 1e-6 else np.log(n - 1) + np.log1p(-eps) - np.log(eps)")
        assert isinstance(error, AssertionError) and "not 1e-12" in str(error), (beta, error)
    assert np.isclose(np.exp(-50.0), 1e-12), "the trap this check avoids: an absolute tolerance passes beta = 50"


def test_1_3s_check_passes_the_right_beta_for_tiny_eps_written_with_log_instead_of_log1p():
    """The lesson the exercise states: log(1 - eps) keeps the digits as well as log1p(-eps) here."""
    assert _visible_error("return np.log(n - 1) - np.log(eps) + np.log(1 - eps)") is None
    assert re.search(r"Sterbenz", "".join(c.source for c in notebook("01_copying").cells))
