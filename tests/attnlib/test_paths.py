"""Path-specific ablation (attnlib.paths) against a plain loop, and against the residual-stream ablation."""
import math

import numpy as np
import pytest

import attnlib
from attnlib import incontext, paths
from attnlib.model import Model, load
from attnlib.paths import Edge

from reference import ref_softmax


def toy(smear=None, seed=0, vocab=9, n_ctx=10, d_model=8, n_heads=2, n_layers=3):
    rng = np.random.default_rng(seed)
    layers = [attnlib.random_weights(d_model, n_heads, seed=seed + l) for l in range(n_layers)]
    return Model(rng.normal(size=(vocab, d_model)), rng.normal(size=(n_ctx, d_model)),
                 rng.normal(size=(d_model, vocab)), layers, {}, None, None, smear)


def loop_paths(model, batch, edges, how="zero"):
    """The model run sequence by sequence, head by head, position by position, with each edge cut.

    A receiver's query (key, value) input is the stream minus each cut sender's
    write in this run (minus its batch mean at that position, for "mean").
    Returns the logits and each layer's patterns, (n, T, vocab) and per layer
    (n, n_heads, T, T).
    """
    n, T = batch.shape
    clean_writes = {}
    if how == "mean":  # the clean run's writes, head by head
        for b in range(n):
            _, _, w = _loop_one(model, batch[b], [], {})
            for key, v in w.items():
                clean_writes.setdefault(key, []).append(v)
        means = {key: np.mean(v, axis=0) for key, v in clean_writes.items()}
    else:
        means = None
    logits, patterns = [], []
    for b in range(n):
        lg, pat, _ = _loop_one(model, batch[b], edges, means)
        logits.append(lg)
        patterns.append(pat)
    return np.array(logits), [np.array([p[l] for p in patterns]) for l in range(model.n_layers)]


def _loop_one(model, tokens, edges, means):
    T = len(tokens)
    x = np.array([model.W_E[tok] + model.W_pos[t] for t, tok in enumerate(tokens)])
    writes, patterns = {}, []

    def removed(sender):
        term = writes[sender]
        return term - means[sender] if means else term

    for l, w in enumerate(model.layers):
        d = w.d_head
        new = x.copy()
        layer_patterns = []
        for i in range(w.n_heads):
            cols = slice(i * d, (i + 1) * d)
            reads = {}
            for c, W in zip("qkv", (w.W_Q, w.W_K, w.W_V)):
                x_c = x.copy()
                for e in edges:
                    if e.receiver == (l, i) and c in e.via:
                        x_c = x_c - removed(e.sender)
                reads[c] = x_c @ W[:, cols]
            Q, K, V = reads["q"], reads["k"], reads["v"]
            if model.smear is not None:
                s = model.smear[l][i]
                K = np.array([s * K[t] + (1 - s) * K[max(t - 1, 0)] for t in range(T)])
            A = np.zeros((T, T))
            out = np.zeros((T, model.d_model))
            for t in range(T):
                A[t] = ref_softmax([float(Q[t] @ K[s]) / math.sqrt(d) if s <= t else -math.inf for s in range(T)])
                out[t] = (A[t] @ V) @ w.W_O[cols]
            writes[(l, i)] = out
            new += out
            layer_patterns.append(A)
        x = new
        patterns.append(np.array(layer_patterns))
    for e in edges:
        if e.receiver == "logits":
            x = x - removed(e.sender)
    return x @ model.W_U, patterns, writes


SMEAR = [np.array([0.4, 1.0]), np.array([0.8, 0.2]), np.array([1.0, 0.6])]
CASES = [
    [Edge((0, 0), (1, 1), "k")],
    [Edge((0, 1), (2, 0), "q"), Edge((1, 0), (2, 0), "v")],
    [Edge((0, 0), (1, 0), "qk"), Edge((0, 0), (2, 1), "kv"), Edge((1, 1), "logits")],
    [Edge((0, 1), (1, 0), "qkv"), Edge((1, 0), (2, 1), "k"), Edge((0, 1), "logits")],
]


@pytest.mark.parametrize("how", ["zero", "mean"])
@pytest.mark.parametrize("edges", CASES)
@pytest.mark.parametrize("smear", [None, SMEAR])
def test_cutting_paths_equals_a_plain_loop(edges, how, smear):
    model = toy(smear=smear)
    batch = np.random.default_rng(3).integers(0, model.vocab, size=(4, 7))
    want_logits, want_patterns = loop_paths(model, batch, edges, how)
    tr = paths.trace(model, batch, edges, how=how)
    np.testing.assert_allclose(tr.logits, want_logits, atol=1e-9)
    for got, want in zip(tr.attention_weights, want_patterns):
        np.testing.assert_allclose(got, want, atol=1e-12)
    assert not np.allclose(tr.logits, model.forward(batch))  # the cut changed something


def test_no_edges_is_the_model_itself():
    model = toy(smear=SMEAR)
    batch = np.random.default_rng(0).integers(0, model.vocab, size=(3, 8))
    tr, clean = paths.trace(model, batch), model.trace(batch)
    np.testing.assert_allclose(tr.logits, clean.logits, atol=1e-12)
    np.testing.assert_allclose(tr.residual, clean.residual, atol=1e-12)


def test_all_three_inputs_and_the_logits_are_the_residual_ablation():
    """Two layers, attention only: cutting L0Hj from every layer-1 head's q, k, v and the logits is ablate=[(0, j)]."""
    model = load("induction")
    batch = np.random.default_rng(1).integers(0, 50, size=(8, 20))
    for j in range(4):
        edges = [Edge((0, j), (1, i), "qkv") for i in range(4)] + [Edge((0, j), "logits")]
        assert set(edges) == set(paths.residual(model, [(0, j)]))
        got, want = paths.trace(model, batch, edges), model.trace(batch, ablate=[(0, j)])
        np.testing.assert_allclose(got.logits, want.logits, atol=1e-10)
        for a, b in zip(got.attention_weights, want.attention_weights):
            np.testing.assert_allclose(a, b, atol=1e-12)
    # one input alone is not the whole ablation, and the three inputs without the logits leave the direct path
    keys_only = paths.forward(model, batch, [Edge((0, 2), (1, i), "k") for i in range(4)])
    assert not np.allclose(keys_only, model.forward(batch, ablate=[(0, 2)]))


def test_three_layers_a_cut_sender_still_reaches_other_readers():
    """Removing L0H0 from L1H0's keys only leaves layer 2 and the logits reading L0H0 as before."""
    model = toy()
    batch = np.random.default_rng(2).integers(0, model.vocab, size=(2, 6))
    tr, clean = paths.trace(model, batch, [Edge((0, 0), (1, 0), "k")]), model.trace(batch)
    np.testing.assert_allclose(tr.attention_weights[1][:, 1], clean.attention_weights[1][:, 1], atol=1e-12)  # L1H1 untouched
    assert not np.allclose(tr.attention_weights[1][:, 0], clean.attention_weights[1][:, 0])


def test_mean_ablation_of_a_constant_term_changes_nothing():
    """On a batch of one sequence repeated, each write equals its mean: mean ablation is no ablation."""
    model = toy()
    batch = np.tile(np.arange(6), (3, 1))
    tr = paths.trace(model, batch, paths.residual(model, [(0, 1)]), how="mean")
    np.testing.assert_allclose(tr.logits, model.forward(batch), atol=1e-10)


def test_induction_scores_take_edges():
    """incontext.induction_scores with the residual edges is induction_scores with ablate."""
    model = load("plays_2l_spans")
    seqs = incontext.repeated_random(model, n=4, occurrences=3)
    a = incontext.induction_scores(model, seqs, ablate=[(0, 1)])
    b = incontext.induction_scores(model, seqs, edges=paths.residual(model, [(0, 1)]))
    for k in a:
        np.testing.assert_allclose(a[k], b[k], atol=1e-12)
    c = incontext.repeat_losses(model, seqs, edges=[Edge((0, 1), (1, 0), "k")])
    assert c.shape == (3,) and not np.allclose(c, incontext.repeat_losses(model, seqs))


@pytest.mark.parametrize("edges, how, message", [
    ([Edge((1, 0), (0, 1), "k")], "zero", "later layer than sender"),
    ([Edge((1, 0), (1, 1), "k")], "zero", "later layer than sender"),
    ([Edge((0, 0), (1, 1), "x")], "zero", "via must be some of"),
    ([Edge((0, 0), (1, 1), "")], "zero", "via must be some of"),
    ([Edge((0, 5), (1, 1), "q")], "zero", r"sender \(0, 5\) is not a \(layer, head\) pair"),
    ([Edge((0, 0), (4, 0), "q")], "zero", r"receiver \(4, 0\) is not"),
    ([Edge((0, 0), (1, 1), "q")], "median", "how must be"),
])
def test_bad_edges_are_refused_with_the_reason(edges, how, message):
    model = toy()
    with pytest.raises(ValueError, match=message):
        paths.trace(model, np.arange(5)[None], edges, how=how)


def test_mean_ablation_needs_a_batch():
    model = toy()
    with pytest.raises(ValueError, match="needs a batch"):
        paths.trace(model, np.arange(5), [Edge((0, 0), (1, 1), "q")], how="mean")
    with pytest.raises(TypeError, match="Edge"):
        paths.trace(model, np.arange(5)[None], ["L0H0"])


def test_the_loss_is_the_mean_cross_entropy_that_accuracy_rounds_away():
    from attnlib import incontext, metrics

    model = load("induction")
    toks = np.random.default_rng(0).integers(0, 50, size=(6, 12))
    logits, targets = model.forward(toks[:, :-1]), toks[:, 1:]
    mask = np.ones(targets.shape, bool)
    mask[:, :3] = False
    by_hand = incontext.token_losses(model, toks[:, :-1], targets)[mask].mean()
    assert metrics.loss(logits, targets, mask) == pytest.approx(by_hand, rel=1e-12)
    # a sure right answer and a barely right one: the same accuracy, not the same loss
    sure, barely = np.array([[[9.0, 0.0]]]), np.array([[[0.1, 0.0]]])
    one, t = np.ones((1, 1), bool), np.zeros((1, 1), int)
    assert metrics.accuracy(sure, t, one) == metrics.accuracy(barely, t, one) == 1.0
    assert metrics.loss(sure, t, one) < 0.001 < 0.6 < metrics.loss(barely, t, one)
    with pytest.raises(ValueError, match="mask selects no position"):
        metrics.loss(sure, t, ~one)
    with pytest.raises(ValueError, match=r"logits \(1, 1, 2\) must be targets \(2,\)"):
        metrics.loss(sure, np.zeros(2, int), one)


def test_given_attention_weights_replace_what_the_head_computes():
    model = load("induction")
    toks = np.random.default_rng(3).integers(0, 50, size=(4, 15))
    own = model.attention_weights(toks)[0][:, 2]  # (4, 15, 15): L0H2's own weights
    np.testing.assert_allclose(paths.forward(model, toks, attention={(0, 2): own}), model.forward(toks),
                               atol=1e-12)
    # uniform weights for L0H2, by hand: its message is the mean of the values so far
    uniform = np.tril(np.ones((15, 15))) / np.arange(1, 16)[:, None]
    tr = paths.trace(model, toks, attention={(0, 2): np.broadcast_to(uniform, (4, 15, 15))})
    np.testing.assert_allclose(tr.attention_weights[0][:, 2], np.broadcast_to(uniform, (4, 15, 15)))
    _, _, W_V, W_O = model.layers[0].per_head
    x = model.W_E[toks] + model.W_pos[:15]  # (4, 15, d_model)
    np.testing.assert_allclose(tr.writes[0][:, 2], uniform @ x @ W_V[2] @ W_O[2], atol=1e-10)
    assert not np.allclose(tr.logits, model.forward(toks))
    with pytest.raises(ValueError, match="expected the tokens' shape plus T"):
        paths.forward(model, toks, attention={(0, 2): uniform})
    with pytest.raises(ValueError, match="not a \\(layer, head\\) pair"):
        paths.forward(model, toks, attention={(2, 0): own})


def test_onto_one_occurrence_moves_the_weight_on_earlier_copies_only():
    from attnlib import metrics

    tokens = np.array([7, 3, 7, 3, 7])
    A = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]  # uniform over the past
    last, first = (metrics.onto_one_occurrence(A, tokens, w) for w in ("last", "first"))
    np.testing.assert_allclose(last.sum(-1), 1.0)
    # query 4 (token 7): earlier 7s at 0 and 2 hold 0.4 in all; the 3s keep their 0.2 each
    np.testing.assert_allclose(last[4], [0, 0.2, 0.4, 0.2, 0.2])
    np.testing.assert_allclose(first[4], [0.4, 0.2, 0, 0.2, 0.2])
    np.testing.assert_allclose(last[:2], A[:2])  # no earlier copy: unchanged
    with pytest.raises(ValueError, match="which must be"):
        metrics.onto_one_occurrence(A, tokens, "middle")
    with pytest.raises(ValueError, match="expected the tokens' shape plus T"):
        metrics.onto_one_occurrence(A[:4], tokens)
