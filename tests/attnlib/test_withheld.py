"""While a student's function is judged, the library's version of it cannot be called (exercise 9).

``attnlib.checks.judging`` withholds every library function that calls
``attnlib.checks.asked``: the attributions an exercise asks students to write,
and the private helpers that compute them. The check is made when the function
runs, so no way of reaching it first (a name saved at import, the module, a
reload) gets round it; outside the block everything works as before.
"""
import importlib

import numpy as np
import pytest

import attnlib.attribution
from attnlib import grader
from attnlib.checks import Withheld, judging
from attnlib.model import load

TOKS = np.array([50, 3, 7, 9, 3, 7])
ANSWERS = {
    "logit_attribution": lambda m: attnlib.attribution.logit_attribution(m, TOKS, 4, 7),
    "path_attribution": lambda m: attnlib.attribution.path_attribution(m, TOKS, 4, 7),
    "qk_attribution": lambda m: attnlib.attribution.qk_attribution(m, TOKS, 1, 0, 4, 2),
    "qk_contrast": lambda m: attnlib.attribution.qk_contrast(m, TOKS, 1, 0, 4, 2),
    "attribution_graph": lambda m: attnlib.attribution.attribution_graph(m, TOKS, 4, 7, 1, 0, 2),
    "_terms": lambda m: attnlib.attribution._terms(m, m.trace(TOKS), 1),
    "_path_terms": lambda m: attnlib.attribution._path_terms(m, m.trace(TOKS)),
    "_qk_matrices": lambda m: attnlib.attribution._qk_matrices(m, m.trace(TOKS), 1, 0, 4, [2]),
}


@pytest.fixture(scope="module")
def model():
    return load("induction")


@pytest.mark.parametrize("name", ANSWERS)
def test_every_answer_is_withheld_while_judged_and_works_outside(model, name):
    ANSWERS[name](model)  # outside a judging block: as ever
    with pytest.raises(Withheld) as caught:
        with judging("logit_attribution"):
            ANSWERS[name](model)
    text = str(caught.value)
    assert "is what this exercise asks you to write" in text and "logit_attribution is checked" in text
    # the graph is built from the attributions: the first one it calls is named
    assert f"attnlib.attribution.{name if name != 'attribution_graph' else 'logit_attribution'} is" in text
    ANSWERS[name](model)  # and back after it


def test_a_name_saved_at_import_is_withheld_too(model):
    """The student's cell imports the library's function under another name before the test cell runs."""
    ns = {}
    exec("from attnlib.attribution import logit_attribution as la\n"
         "import attnlib.attribution as A\n"
         "from attnlib import attribution\n"
         "def logit_attribution(model, tokens, position, target):\n"
         "    return la(model, tokens, position, target).values\n"
         "def by_module(model, tokens, position, target):\n"
         "    return A.logit_attribution(model, tokens, position, target).values\n"
         "def reloaded(model, tokens, position, target):\n"
         "    import importlib\n"
         "    return importlib.reload(attribution).logit_attribution(model, tokens, position, target).values\n", ns)
    for fn in ("logit_attribution", "by_module", "reloaded"):
        assert np.isclose(ns[fn](model, TOKS, 4, 7).sum(), model.forward(TOKS)[4, 7])
        with pytest.raises(Withheld, match="attnlib.attribution.logit_attribution is what"):
            with judging("logit_attribution"):
                ns[fn](model, TOKS, 4, 7)
    importlib.reload(attnlib.attribution)


def test_an_error_in_the_block_ends_the_withholding(model):
    with pytest.raises(ZeroDivisionError):
        with judging("qk_attribution"):
            1 / 0
    assert grader._judged == ()
    ANSWERS["qk_attribution"](model)


def test_a_block_whose_record_was_changed_fails():
    """Code run inside the block that clears the record (to call the library) does not pass unseen."""
    with pytest.raises(AssertionError, match="changed while they ran"):
        with judging("logit_attribution"):
            grader._judged = ()
    assert grader._judged == ()


def test_the_withheld_error_is_a_failed_check():
    """An AssertionError, so the test cell fails with its message, as for every failed check."""
    assert issubclass(Withheld, AssertionError)


EXERCISE_10 = {
    "attnlib.backward.gradients": lambda m, d: __import__("attnlib.backward").backward.gradients(m, TOKS, d),
    "attnlib.methods.attribution_patching": lambda m, d: __import__("attnlib.methods").methods.attribution_patching(
        m, TOKS, TOKS[::-1], [(0, 0)], d),
    "attnlib.methods.atp_star": lambda m, d: __import__("attnlib.methods").methods.atp_star(
        m, TOKS, TOKS[::-1], [(0, 0, "k")], d),
}


@pytest.mark.parametrize("name", EXERCISE_10)
def test_exercise_10s_answers_are_withheld_while_judged(model, name):
    """Exercise 10 asks for the gradient with numpy (no autodiff) and for attribution patching:
    the library's gradient and its attribution patching are withheld too."""
    d = np.zeros((len(TOKS), model.vocab))
    d[4, 7] = 1.0
    EXERCISE_10[name](model, d)
    with pytest.raises(Withheld, match="attnlib.backward.gradients is what" if "backward" in name
                       else f"{name} is what"):
        with judging("stream_gradient"):
            EXERCISE_10[name](model, d)
    EXERCISE_10[name](model, d)


def test_the_metrics_split_of_the_logits_is_withheld_while_exercise_9_is_judged(model):
    """``metrics.logit_terms`` splits the target logit by head, which 9.1 asks for: withheld as well."""
    from attnlib import metrics
    tr = model.trace(TOKS)
    metrics.logit_terms(tr, model.W_U, TOKS)
    with pytest.raises(Withheld, match="attnlib.metrics.logit_terms is what"):
        with judging("logit_attribution"):
            metrics.logit_terms(tr, model.W_U, TOKS)
    metrics.logit_terms(tr, model.W_U, TOKS)
