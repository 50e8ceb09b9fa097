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

import attnlib.checks as checks
from wrong_answers import ALTERNATIVES, WRONG

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[2]
from pm_course.grading import isolate  # noqa: E402

pytestmark = pytest.mark.grading  # grades each wrong answer and alternative (687 cases): not in make check
ASSIGNMENTS = sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir())
REGION = re.compile(r"[ \t]*### BEGIN SOLUTION\n(.*?)[ \t]*### END SOLUTION\n?", re.S)


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


def hidden_span(test):
    """1-based line numbers of the hidden region's first and last lines (the markers)."""
    lines = test.splitlines()
    begin = next(i for i, line in enumerate(lines) if "### BEGIN HIDDEN TESTS" in line)
    end = next(i for i, line in enumerate(lines) if "### END HIDDEN TESTS" in line)
    return begin + 1, end + 1


class _VisibleLenient(ast.NodeTransformer):
    """The visible statements of a test cell made harmless (asserts off, failures ignored),
    the hidden region left as it is: only the hidden tests judge."""

    def __init__(self, span):
        self.first, self.last = span

    def _body(self, body):
        out = []
        for stmt in body:
            end = getattr(stmt, "end_lineno", stmt.lineno)
            if end < self.first or stmt.lineno > self.last:      # wholly visible
                stmt = _NoAsserts().visit(stmt)
                stmt = ast.Try(body=[stmt], handlers=[ast.ExceptHandler(
                    type=ast.Tuple([ast.Name("AssertionError", ast.Load()), ast.Name("FloatingPointError", ast.Load())],
                                   ast.Load()), name=None, body=[ast.Pass()])], orelse=[], finalbody=[])
            elif stmt.lineno < self.first:                         # holds the hidden region: go inside
                for field in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(stmt, field, None), list):
                        setattr(stmt, field, self._body(getattr(stmt, field)))
            out.append(stmt)
        return out

    def visit_Module(self, node):
        node.body = self._body(node.body)
        return node


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


def run_cell(name, test_id, answers, part):
    """Run test cell ``test_id`` as the grader does, with ``answers`` (solution cell sources with a
    student's answers) in place: the instructor's versions of the functions judged above it are
    offered to its ``judging`` block. ``part`` is "visible" (the hidden region left out) or "hidden"
    (the visible checks made harmless). Returns the error raised, or None."""
    nb = notebook(name)
    test = next(c.source for c in nb.cells if grade_id(c) == test_id)
    first, last = hidden_span(test)
    if part == "visible":
        lines = test.splitlines()
        tree = ast.parse("\n".join(lines[:first - 1] + lines[last:]))
    else:
        tree = ast.fix_missing_locations(_VisibleLenient((first, last)).visit(ast.parse(test)))
    ns = dict(solved_namespace(name))
    for source in answers:
        exec(compile(source, f"<{name}: answer>", "exec"), ns)
    if part == "hidden":
        _lenient_checks(ns)
    checks._offer(isolate.instructor_source(nb, test_id))
    try:
        with np.errstate(all="ignore"):
            exec(compile(tree, f"<{name}:{test_id} {part}>", "exec"), ns)
    except Exception as err:  # noqa: BLE001 -- any failure of the cell counts
        return err
    finally:
        __import__("attnlib.grader").grader._offered = None
    return None


def run_test_cell(name, target, test_id, body):
    """(error of the visible part, error of the hidden part) with ``target`` answered by ``body``."""
    wrong = with_wrong_answer(solution_cell(name, target).source, target, body)
    return run_cell(name, test_id, [wrong], "visible"), run_cell(name, test_id, [wrong], "hidden")


def graded_cells(name):
    return [grade_id(c) for c in notebook(name).cells if isolate.is_test(c)]


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


@pytest.mark.parametrize("name,target,test_id,why,body", CASES,
                         ids=[f"{c[0][:2]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_wrong_answer_costs_only_its_own_cells(name, target, test_id, why, body):
    """Every other test cell of the notebook passes, visible and hidden parts alike: a wrong
    helper does not take the points of the right functions that call it."""
    wrong = with_wrong_answer(solution_cell(name, target).source, target, body)
    for other in graded_cells(name):
        if target in isolate.judged(next(c.source for c in notebook(name).cells if grade_id(c) == other)):
            continue
        for part in ("visible", "hidden"):
            error = run_cell(name, other, [wrong], part)
            assert error is None, f"a wrong {target} ({why}) fails {other}'s {part} part: {error!r}"


ALT_CASES = [(name, *case) for name, cases in ALTERNATIVES.items() for case in cases]


@pytest.mark.parametrize("name,target,why,body", ALT_CASES,
                         ids=[f"{c[0][:2]}-{c[1]}-{i}" for i, c in enumerate(ALT_CASES)])
def test_a_valid_alternative_keeps_every_point(name, target, why, body):
    answer = with_wrong_answer(solution_cell(name, target).source, target, body)
    for test_id in graded_cells(name):
        for part in ("visible", "hidden"):
            error = run_cell(name, test_id, [answer], part)
            assert error is None, f"a valid {target} ({why}) fails {test_id}'s {part} part: {error!r}"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_exercise_function_has_two_valid_alternatives(name):
    for fn in functions(name):
        n = sum(1 for c in ALTERNATIVES.get(name, []) if c[0] == fn)
        assert n >= 2, f"{name}: {fn} has {n} valid alternative answers listed"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_test_cell_judges_its_own_function(name):
    """What make assignments checks: each test cell is a judging block, relying only on itself
    and on functions judged above it."""
    assert isolate.problems(notebook(name), name) == []


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


def solution_expressions(nb, shortest):
    """What the solutions compute, line by line (the right-hand sides), without spaces."""
    for cell in nb.cells:
        if not (cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")):
            continue
        for region in REGION.findall(cell.source):
            for line in region.splitlines():
                expr = re.sub(r"#.*", "", line).strip()
                expr = re.sub(r"^(return|\w+(,\s*\w+)*\s*=)\s*", "", expr)
                if len(_code_words(expr)) >= shortest and not re.fullmatch(r"np\.random\.default_rng\(\d+\)", expr):
                    yield expr


def test_no_prompt_contains_what_its_cell_asks_for():
    """No markdown cell shows an expression that a solution computes (compared without spaces)."""
    for name in ASSIGNMENTS:
        nb = notebook(name)
        prompts = _code_words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"
                                        and not c.metadata.get("nbgrader", {}).get("solution")))
        for expr in solution_expressions(nb, 8):
            assert _code_words(expr) not in prompts, f"{name}: a prompt shows the answer {expr!r}"


def test_no_visible_check_contains_what_a_solution_computes():
    """A visible check's source is read by students: no expression of a solution appears in it."""
    for name in ASSIGNMENTS:
        nb = notebook(name)
        for cell in filter(isolate.is_test, nb.cells):
            first, last = hidden_span(cell.source)
            lines = cell.source.splitlines()
            visible = _code_words("\n".join(lines[:first - 1] + lines[last:]))
            for expr in solution_expressions(nb, 12):
                assert _code_words(expr) not in visible, f"{name}: {grade_id(cell)}'s visible checks show the answer {expr!r}"


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


@pytest.mark.parametrize("target,test_id,call", [
    ("logit_attribution", "test-logit", "lib(model, tokens, position, target).values"),
    ("qk_attribution", "test-qk", "lib(model, tokens, layer, head, query, key).values"),
])
def test_the_library_answer_saved_at_import_scores_nothing(target, test_id, call):
    """Exercise 9: a student's cell that imports the library's answer under another name at its top
    (before the test cell starts judging) fails both parts, with the message that names it."""
    cell = solution_cell("09_attribution", target).source
    answer = f"from attnlib.attribution import {target} as lib\n" + with_wrong_answer(cell, target, f"return {call}")
    visible, hidden = (run_cell("09_attribution", test_id, [answer], part) for part in ("visible", "hidden"))
    assert isinstance(visible, checks.Withheld) and f"attnlib.attribution.{target} is what" in str(visible)
    assert isinstance(hidden, checks.Withheld)


# Valid answers that change more than a function's body: the student's own parameter names
# (called by keyword from another of their functions), or float32 arithmetic. Each is a list of
# whole solution cells, put in place of the instructor's.
_QK_RENAMED = '''
def qk_attribution(model, tokens, layer, head, q_pos, k_pos):
    tr = model.trace(tokens)
    T = len(tokens)
    terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]]
                     + [w[i] for w in tr.writes[:layer] for i in range(len(w))])
    w = model.layers[layer].per_head
    return (terms[:, q_pos] @ w.W_Q[head]) @ (terms[:, k_pos] @ w.W_K[head]).T / np.sqrt(w.W_Q.shape[-1])
'''
_KEYS_BY_KEYWORD = '''
def keys_read(model, tokens, layer, head, query):
    A = model.trace(tokens).attention_weights[layer][head, query]
    best = int(np.argmax(A[: query + 1]))
    M = np.stack([qk_attribution(model, tokens, layer=layer, head=head, q_pos=query, k_pos=k)
                  for k in range(query + 1)])
    side = (M[best] - np.delete(M, best, axis=0).mean(axis=0)).sum(axis=0)[2:]
    names = [f"L{l}H{i}" for l in range(layer) for i in range(model.layers[l].n_heads)]
    return names[int(np.argmax(side))] if side.max() > 0 else None
'''
_QK_FLOAT32 = '''
def qk_attribution(model, tokens, layer, head, query, key):
    f = np.float32
    tr = model.trace(tokens)
    T = len(tokens)
    terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]]
                     + [w[i] for w in tr.writes[:layer] for i in range(len(w))]).astype(f)
    w = model.layers[layer].per_head
    q_side, k_side = terms[:, query] @ w.W_Q[head].astype(f), terms[:, key] @ w.W_K[head].astype(f)
    return q_side @ k_side.T / f(np.sqrt(w.W_Q.shape[-1]))
'''
_GRAD_RENAMED = '''
def stream_gradient(model, tokens, pos, good, bad):
    x = model.trace(tokens).residual[1]
    G = np.zeros_like(x)
    G[pos] = model.W_U[:, good] - model.W_U[:, bad]
    grad = G.copy()
    w, d = model.layers[1].per_head, model.layers[1].d_head
    for i in range(model.layers[1].n_heads):
        Q, K, V = x @ w.W_Q[i], x @ w.W_K[i], x @ w.W_V[i]
        A = attnlib.attention_weights(Q, K, causal=True)
        dZ = G @ w.W_O[i].T
        dA, dV = dZ @ V.T, A.T @ dZ
        dS = A * (dA - (A * dA).sum(axis=1, keepdims=True))
        grad += (dS @ K / np.sqrt(d)) @ w.W_Q[i].T + (dS.T @ Q / np.sqrt(d)) @ w.W_K[i].T + dV @ w.W_V[i].T
    return grad
'''
_ATP_BY_KEYWORD = '''
def attribution_patch(model, clean, corrupt, head, position, good, bad):
    g = stream_gradient(model, tokens=corrupt, pos=position, good=good, bad=bad)
    change = model.trace(clean).writes[0][head] - model.trace(corrupt).writes[0][head]
    return float((g * change).sum())
'''
_GRAD_FLOAT32 = _GRAD_RENAMED.replace("x = model.trace(tokens).residual[1]",
                                      "x = model.trace(tokens).residual[1].astype(np.float32)").replace(
    "G[pos] = model.W_U[:, good] - model.W_U[:, bad]",
    "G[pos] = (model.W_U[:, good] - model.W_U[:, bad]).astype(np.float32)").replace(
    "w, d = model.layers[1].per_head, model.layers[1].d_head",
    "w, d = model.layers[1].per_head, model.layers[1].d_head\n"
    "    w = type(w)(*(a.astype(np.float32) for a in w))")

WHOLE_ALTERNATIVES = [
    ("09_attribution", "qk_attribution renamed (q_pos, k_pos), called by keyword from keys_read",
     [_QK_RENAMED, _KEYS_BY_KEYWORD]),
    ("09_attribution", "qk_attribution in float32", [_QK_FLOAT32]),
    ("10_attribution_patching", "stream_gradient's position renamed pos, called by keyword from attribution_patch",
     [_GRAD_RENAMED, _ATP_BY_KEYWORD]),
    ("10_attribution_patching", "stream_gradient in float32", [_GRAD_FLOAT32]),
]


@pytest.mark.parametrize("name,why,answers", WHOLE_ALTERNATIVES, ids=[f"{c[0][:2]}-{i}" for i, c in
                                                                      enumerate(WHOLE_ALTERNATIVES)])
def test_a_valid_alternative_with_its_own_signature_or_precision_keeps_every_point(name, why, answers):
    """The grader puts the instructor's version of an earlier function in place of the student's:
    it must take the call the student's code makes (the student's parameter names), and a
    float32-precise answer passes the hidden tests as it passes the visible ones."""
    for test_id in graded_cells(name):
        for part in ("visible", "hidden"):
            error = run_cell(name, test_id, answers, part)
            assert error is None, f"a valid answer ({why}) fails {test_id}'s {part} part: {error!r}"


_NO_CONTRAST = {
    "the key's own matrix, not the contrast": "side = M[best].sum(axis=0)[2:]",
    "the attention-weighted matrix, not the contrast": "side = np.tensordot(A[: query + 1], M, 1).sum(axis=0)[2:]",
}


@pytest.mark.parametrize("why", _NO_CONTRAST)
def test_keys_read_without_the_contrast_fails_a_visible_check_that_names_it(why):
    body = _KEYS_BY_KEYWORD.replace(
        "side = (M[best] - np.delete(M, best, axis=0).mean(axis=0)).sum(axis=0)[2:]", _NO_CONTRAST[why]).replace(
        "q_pos=query, k_pos=k", "query, k").replace("layer=layer, head=head, ", "layer, head, ")
    assert _NO_CONTRAST[why] in body
    visible, hidden = (run_cell("09_attribution", "test-keys", [body], part) for part in ("visible", "hidden"))
    assert isinstance(visible, AssertionError) and "contrast" in str(visible), visible
    assert hidden is not None


def test_a_wrong_gradient_is_named_where_attribution_patch_fails_for_it(monkeypatch):
    """In a student's own run (nothing handed over), a wrong 10.1 makes a right attribution_patch
    fail its checks: the message says to check 10.1 first."""
    wrong = _GRAD_RENAMED.replace("grad = G.copy()", "grad = 0 * G")
    monkeypatch.setattr(isolate, "instructor_source", lambda nb, gid: "")
    error = run_cell("10_attribution_patching", "test-atp", [wrong, _ATP_BY_KEYWORD], "visible")
    assert isinstance(error, AssertionError) and "check 10.1/10.2 first" in str(error), error
    assert "stream_gradient (10.1)" in str(error) and "activation_patch" not in str(error)
    monkeypatch.undo()   # graded: the instructor's stream_gradient is handed over, and the cell passes
    assert run_cell("10_attribution_patching", "test-atp", [wrong, _ATP_BY_KEYWORD], "visible") is None


def test_a_double_counted_position_embedding_is_named():
    wrong = with_wrong_answer(solution_cell("09_attribution", "logit_attribution").source, "logit_attribution", """
        tr = model.trace(tokens)
        u = model.W_U[:, target]
        heads = [w[:, position] @ u for w in tr.writes]
        return np.concatenate([[tr.embedding[position] @ u, model.W_pos[position] @ u], *heads])
    """)
    error = run_cell("09_attribution", "test-logit", [wrong], "visible")
    assert isinstance(error, AssertionError) and "position embedding left in the token term" in str(error), error


@pytest.mark.parametrize("name,target,call", [
    ("10_attribution_patching", "stream_gradient",
     "D = np.zeros((len(tokens), model.W_U.shape[1])); D[position, good], D[position, bad] = 1.0, -1.0\n"
     "return __import__('attnlib.backward').backward.gradients(model, tokens, D).stream[1]"),
    ("10_attribution_patching", "attribution_patch",
     "from attnlib.methods import attribution_patching\n"
     "D = np.zeros((len(clean), model.W_U.shape[1])); D[position, good], D[position, bad] = 1.0, -1.0\n"
     "return float(attribution_patching(model, clean, corrupt, [(0, head)], D)[0])"),
])
def test_exercise_10s_library_answers_score_nothing(name, target, call):
    """10.1 asks for the gradient without an autodiff library: the library's gradient and its
    attribution patching are withheld while the student's functions are judged."""
    answer = with_wrong_answer(solution_cell(name, target).source, target, call)
    test_id = {"stream_gradient": "test-grad", "attribution_patch": "test-atp"}[target]
    for part in ("visible", "hidden"):
        assert isinstance(run_cell(name, test_id, [answer], part), checks.Withheld)
