"""The exercises as a student meets them: prompts that do not give answers away, and
checks that catch the common wrong answers (listed in ``wrong_answers.py``).

Each wrong answer replaces one function's solution in the instructor's notebook.
Its test cell is then run twice, in-process on a copy of the notebook's namespace:
the visible part alone must fail with a message that says something, and the
hidden part, with every visible assertion and check switched off, must fail too.
"""
from __future__ import annotations

import ast
import functools
import re
import textwrap
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import pytest

from wrong_answers import WRONG

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir())
REGION = re.compile(r"[ \t]*### BEGIN SOLUTION\n(.*?)[ \t]*### END SOLUTION\n?", re.S)
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS\n?", re.S)


def notebook(name):
    return nbformat.read(next((ROOT / "exercises" / name).glob("*.ipynb")), as_version=4)


def grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def runnable(cell):
    """Code cells that run outside Jupyter: not the install cell nor the live widgets."""
    return (cell.cell_type == "code" and "remove-cell" not in cell.metadata.get("tags", [])
            and "widgets." not in cell.source and "get_ipython" not in cell.source)


@functools.cache
def solved_namespace(name):
    """Run the instructor's notebook (hidden tests included) and keep its names."""
    ns = {"__name__": f"exercise_{name}"}
    for cell in notebook(name).cells:
        if runnable(cell):
            exec(compile(cell.source, f"<{name}:{grade_id(cell)}>", "exec"), ns)
    return ns


def solution_cell(name, target):
    """The solution cell that defines ``target`` (a function or a variable)."""
    for cell in notebook(name).cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code" and (
                f"def {target}(" in cell.source or re.search(rf"^{target} = ", cell.source, re.M)):
            return cell
    raise KeyError(f"{name}: no solution cell defines {target}")


def with_wrong_answer(source, target, body):
    """``source`` with the solution region that belongs to ``target`` replaced by ``body``."""
    start = source.find(f"def {target}(")
    start = start if start >= 0 else re.search(rf"^{target} = ", source, re.M).start()
    m = REGION.search(source, start)
    indent = re.match(r"[ \t]*", m.group(0)).group(0)
    return source[:m.start()] + textwrap.indent(textwrap.dedent(body).strip() + "\n", indent) + source[m.end():]


class _NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()


def _lenient_checks(ns):
    """check_* helpers that let everything through, so that only the hidden tests judge."""
    def as_array(x, *args, **kwargs):
        return np.asarray(x, dtype=float)
    for helper in ("check_array", "check_distribution", "check_scalar"):
        if helper in ns:
            ns[helper] = as_array if helper != "check_scalar" else (lambda x, *a, **k: float(np.asarray(x, dtype=float)))
    if "check_verdict" in ns:
        ns["check_verdict"] = lambda *a, **k: None


def run_test_cell(name, target, test_id, body):
    """(error of the visible part, error of the hidden part) with ``target`` answered by ``body``."""
    wrong = with_wrong_answer(solution_cell(name, target).source, target, body)
    test = next(c.source for c in notebook(name).cells if grade_id(c) == test_id)
    hidden = "\n".join(HIDDEN.findall(test))
    visible = HIDDEN.sub("", test)
    assert hidden.strip(), f"{name}:{test_id} has no hidden tests"

    def run(parts):
        ns = dict(solved_namespace(name))
        exec(compile(wrong, f"<{name}: wrong {target}>", "exec"), ns)
        try:
            for part in parts(ns):
                exec(part, ns)
        except Exception as err:  # noqa: BLE001 -- any failure of the cell counts
            return err
        return None

    def visible_only(ns):
        yield compile(visible, f"<{name}:{test_id} visible>", "exec")

    def hidden_only(ns):
        _lenient_checks(ns)
        for stmt in _NoAsserts().visit(ast.parse(visible)).body:  # visible set-up, run statement by statement
            try:
                exec(compile(ast.Module([ast.fix_missing_locations(stmt)], []), "<visible set-up>", "exec"), ns)
            except (AssertionError, FloatingPointError):
                pass
        yield compile(hidden, f"<{name}:{test_id} hidden>", "exec")

    with np.errstate(all="ignore"):
        return run(visible_only), run(hidden_only)


CASES = [(name, *case) for name, cases in WRONG.items() for case in cases]


@pytest.mark.parametrize("name,target,test_id,why,body", CASES,
                         ids=[f"{c[0][:2]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_wrong_answer_fails_a_visible_check_with_a_message_and_the_hidden_tests(name, target, test_id, why, body):
    visible_error, hidden_error = run_test_cell(name, target, test_id, body)
    assert isinstance(visible_error, AssertionError), f"no visible check catches: {why} ({visible_error!r})"
    message = str(visible_error).strip()
    assert len(message) >= 20, f"the visible check that catches '{why}' says only {message!r}"
    assert hidden_error is not None, f"the hidden tests let through: {why}"


def test_the_instructor_solutions_pass_both_parts():
    """The harness itself: the right answers fail neither part (else every case above is vacuous)."""
    for name, cases in WRONG.items():
        for target, test_id in {(c[0], c[1]) for c in cases}:
            cell = solution_cell(name, target)
            right = REGION.search(cell.source, max(cell.source.find(f"def {target}("), 0)).group(1)
            assert run_test_cell(name, target, test_id, right) == (None, None), (name, target)


def functions(name):
    """Every function a student writes in this exercise."""
    return [m.group(1) for c in notebook(name).cells if c.metadata.get("nbgrader", {}).get("solution")
            for m in re.finditer(r"^def (\w+)\(", c.source, re.M)]


def test_every_exercise_function_has_at_least_four_wrong_answers():
    listed = {(name, c[0]) for name, cases in WRONG.items() for c in cases}
    for name in ASSIGNMENTS:
        for fn in functions(name):
            n = sum(1 for c in WRONG.get(name, []) if c[0] == fn)
            assert n >= 4, f"{name}: {fn} has {n} wrong answers listed"
    assert listed, "no wrong answers at all"


def _code_words(text):
    return re.sub(r"\s+", "", text)


def test_no_prompt_contains_what_its_cell_asks_for():
    """No markdown cell shows an expression that a solution computes (compared without spaces)."""
    for name in ASSIGNMENTS:
        nb = notebook(name)
        prompts = _code_words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"
                                        and not c.metadata.get("nbgrader", {}).get("solution")))
        for cell in nb.cells:
            if not (cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")):
                continue
            for region in REGION.findall(cell.source):
                for line in region.splitlines():
                    expr = re.sub(r"#.*", "", line).strip()
                    expr = re.sub(r"^(return|\w+(,\s*\w+)*\s*=)\s*", "", expr)
                    if len(_code_words(expr)) >= 8:
                        assert _code_words(expr) not in prompts, f"{name}: a prompt shows the answer {expr!r}"


# Answers the prompts once gave in mathematical form (kept out for good).
GIVEN_AWAY = {
    "01_copying": [r"q = \beta k_j", r"\beta k_0", r"\alpha_j = e^\beta / (e^\beta + n - 1)"],
    "02_averaging": [r"\beta (k_a + k_b)", r"\beta(k_0 + k_3)", r"\alpha_a = \dfrac{e^\beta}{2e^\beta + n - 2}"],
    "04_noisy_keys": [r"\sigma((\gamma - 1)\beta)", r"\beta\sqrt{2\alpha}"],
    "05_two_heads": [r"q_1 = \beta\mu_a", r"q_2 = \beta\mu_b"],
}


def test_the_answers_the_prompts_used_to_give_stay_out():
    for name, phrases in GIVEN_AWAY.items():
        nb = notebook(name)
        prompts = _code_words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"
                                        and not c.metadata.get("nbgrader", {}).get("solution")))
        for phrase in phrases:
            assert _code_words(phrase) not in prompts, f"{name}: a prompt gives away {phrase!r}"
