"""attnlib.discovery: edges, their exact effects, EAP and ACDC, scored on models with a planted circuit."""
import numpy as np
import pytest

from attnlib import discovery, paths, random_weights
from attnlib.attribution import patch
from attnlib.discovery import acdc, all_edges, counting, eap, edge_effects, planted
from attnlib.model import Model, load
from attnlib.paths import Edge
from reference import ref_model_run


def repeats(model, n, L, seed):
    """Clean: BOS, L distinct tokens, the same again; corrupt: the first copy shuffled; the metric's direction."""
    rng = np.random.default_rng(seed)
    vocab = model.vocab
    tokens = np.array([t for t in range(vocab) if t != model.bos])
    spans = np.array([rng.choice(tokens, L, replace=False) for _ in range(n)])
    clean = np.concatenate([np.full((n, 1), model.bos), spans, spans], axis=1)
    corrupt = clean.copy()
    corrupt[:, 1:L + 1] = [rng.permutation(s) for s in spans]
    d = np.zeros(clean.shape + (vocab,))
    for b in range(n):
        for p in range(L + 1, 2 * L):  # in the second copy: the token after the earlier copy
            d[b, p, clean[b, p + 1]] = 1.0 / (n * (L - 1))
    return clean, corrupt, d


@pytest.fixture(scope="module")
def toy():
    return load("induction")


def heads(model):
    """The graph between heads (these tests predate the input as a node: tests/attnlib/test_graph.py has it)."""
    return all_edges(model, embed=False)


def test_all_edges(toy):
    edges = heads(toy)
    assert len(edges) == 4 * 4 * 3 + 8 == len(set(edges))
    assert Edge((0, 2), (1, 0), "k") in edges and Edge((1, 3), "logits") in edges
    paths._edges(toy, edges)  # every one is an edge paths can cut
    rng = np.random.default_rng(0)
    three = Model(rng.standard_normal((5, 8)), rng.standard_normal((6, 8)), rng.standard_normal((8, 5)),
                  [random_weights(8, h, seed=h, d_head=4) for h in (2, 1, 3)], {})
    # layer 0 (2 heads) into layers 1 and 2 (4 heads), layer 1 into layer 2; 3 inputs each; 6 heads into the logits
    assert len(heads(three)) == 3 * (2 * 4 + 1 * 3) + 6


def test_edge_effects_against_an_independent_forward(toy):
    clean, corrupt, d = repeats(toy, 3, 6, seed=1)
    fx = edge_effects(toy, clean, corrupt, d, edges=heads(toy))
    base = (d * ref_model_run(toy, clean)).sum()
    w_clean, w_corrupt = toy.trace(clean).writes, toy.trace(corrupt).writes
    for e in [Edge((0, 2), (1, 0), "k"), Edge((0, 0), (1, 3), "q"), Edge((0, 3), (1, 1), "v"), Edge((1, 2), "logits")]:
        change = w_corrupt[e.sender[0]][:, e.sender[1]] - w_clean[e.sender[0]][:, e.sender[1]]
        add = {"final": change} if e.receiver == "logits" else {("in", *e.receiver, e.via): change}
        assert fx[e] == pytest.approx((d * ref_model_run(toy, clean, add)).sum() - base, abs=1e-10)
        assert fx[e] == pytest.approx((d * patch(toy, corrupt, clean, [e])).sum() - base, abs=1e-10)
    assert max(abs(v) for v in fx.values()) > 0.1


def test_eap_is_exact_into_the_logits_and_first_order_elsewhere(toy):
    clean, corrupt, d = repeats(toy, 3, 6, seed=2)
    est, fx = eap(toy, clean, corrupt, d, edges=heads(toy)), edge_effects(toy, clean, corrupt, d, edges=heads(toy))
    assert est.keys() == fx.keys()
    into_logits = [e for e in est if e.receiver == "logits"]
    assert len(into_logits) == 8
    for e in into_logits:
        assert est[e] == pytest.approx(fx[e], abs=1e-12)
    assert max(abs(fx[e]) for e in into_logits) > 0.05
    # into a head: the derivative along the noising line at the clean end
    w_clean, w_corrupt = toy.trace(clean).writes, toy.trace(corrupt).writes
    eps = 1e-5
    for e in [Edge((0, 2), (1, 0), "k"), Edge((0, 1), (1, 2), "q"), Edge((0, 3), (1, 3), "v")]:
        change = w_corrupt[0][:, e.sender[1]] - w_clean[0][:, e.sender[1]]
        f = [(d * ref_model_run(toy, clean, {("in", *e.receiver, e.via): s * eps * change})).sum() for s in (1, -1)]
        assert est[e] == pytest.approx((f[0] - f[1]) / (2 * eps), abs=1e-7)


@pytest.mark.parametrize("composition", ["k", "q"])
def test_planted_model_does_induction_and_its_distractors_are_unread(composition):
    m, circuit = planted(composition)
    clean, _, d = repeats(m, 20, 5, seed=3)
    pred = m.forward(clean).argmax(-1)
    assert (pred[:, 6:10] == clean[:, 7:11]).all()  # every next token of the second copy
    # what the distractors write, nothing later reads
    dis = m.layers[0].per_head.W_O[1]  # (d_head, d_model)
    later = m.layers[1]
    for W in (later.W_Q, later.W_K, later.W_V, m.W_U):
        assert np.abs(dis @ W).max() == 0
    assert np.abs(later.per_head.W_O[1] @ m.W_U).max() == 0
    assert circuit == [Edge((0, 0), (1, 0), composition), Edge((1, 0), "logits")]


@pytest.mark.parametrize("composition", ["k", "q"])
def test_acdc_recovers_exactly_the_planted_edges(composition):
    m, circuit = planted(composition)
    clean, corrupt, d = repeats(m, 20, 5, seed=4)
    fx = edge_effects(m, clean, corrupt, d, edges=heads(m))
    planted_min = min(abs(fx[e]) for e in circuit)
    distractor_max = max(abs(v) for e, v in fx.items() if e not in circuit)
    assert planted_min > 0.1 and distractor_max < 1e-9
    for threshold in (1e-6, planted_min / 2, 0.9 * planted_min):
        with counting() as cost:
            kept = acdc(m, clean, corrupt, d, threshold, edges=heads(m))
        assert kept == circuit, threshold
        assert (cost.forward, cost.backward) == (2 + len(heads(m)), 0)
    assert acdc(m, clean, corrupt, d, 0.0, edges=heads(m)) == heads(m)  # nothing changes the metric by less than 0
    assert acdc(m, clean, corrupt, d, 1e6, edges=heads(m)) == []


def test_acdc_keeps_the_previous_token_heads_key_edges_in_the_trained_model(toy):
    clean, corrupt, d = repeats(toy, 8, 10, seed=5)
    kept = acdc(toy, clean, corrupt, d, threshold=0.05, edges=heads(toy))
    prev = toy.card["metrics"]["previous_token_head"][1]
    assert any(e.sender == (0, prev) and e.via == "k" and e.receiver != "logits" for e in kept)
    assert any(e.receiver == "logits" and e.sender[0] == 1 for e in kept)


def test_counting_counts_each_method():
    m, _ = planted("k")
    clean, corrupt, d = repeats(m, 2, 5, seed=6)
    with counting() as outer:
        with counting() as c1:
            edge_effects(m, clean, corrupt, d, edges=heads(m))
        with counting() as c2:
            eap(m, clean, corrupt, d, edges=heads(m))
    assert (c1.forward, c1.backward) == (2 + 2 * 2 * 3 + 4, 0)
    assert (c2.forward, c2.backward) == (2, 1)
    assert (outer.forward, outer.backward) == (c1.forward + c2.forward, 1)
    assert __import__("attnlib.model").model._counters == []


def test_bad_input():
    m, _ = planted("k")
    clean, corrupt, d = repeats(m, 2, 5, seed=7)
    with pytest.raises(ValueError, match="threshold must be a finite number >= 0"):
        acdc(m, clean, corrupt, d, -1, edges=heads(m))
    with pytest.raises(ValueError, match="threshold"):
        acdc(m, clean, corrupt, d, float("nan"))
    with pytest.raises(ValueError, match="clean has shape"):
        eap(m, clean, corrupt[:1], d)
    with pytest.raises(ValueError, match="direction has shape"):
        edge_effects(m, clean, corrupt, d[0])
    with pytest.raises(TypeError, match="model must be an attnlib Model"):
        all_edges("induction")
    with pytest.raises(ValueError, match="composition must be 'k'"):
        planted("v")


def test_score():
    m, circuit = planted("q")
    edges = heads(m)
    assert discovery.score(circuit, circuit) == (1.0, 1.0)
    assert discovery.score(edges, circuit) == (2 / len(edges), 1.0)
    assert discovery.score([], circuit) == (0.0, 0.0)  # an empty circuit found nothing right (exercise 10.5's rule)
    with pytest.raises(ValueError, match="truth is empty"):
        discovery.score(edges, [])


def test_acdc_against_a_plain_greedy_loop(toy):
    """ACDC's removals accumulate: each edge is tried with the edges already removed still noised."""
    clean, corrupt, d = repeats(toy, 4, 8, seed=8)

    def metric(edges):
        logits = patch(toy, corrupt, clean, edges) if edges else toy.forward(clean)
        return (d * logits).sum()

    threshold = 0.02
    removed, current = [], metric([])
    order = sorted((e for e in heads(toy) if e.receiver == "logits"),
                   key=lambda e: (-e.sender[0], e.sender[1]))  # the latest sender first
    order += [Edge((0, h), (1, j), c) for j in range(4) for c in "qkv" for h in range(4)]
    for e in order:
        trial = metric(removed + [e])
        if abs(trial - current) < threshold:
            removed.append(e)
            current = trial
    want = [e for e in heads(toy) if e not in removed]
    assert acdc(toy, clean, corrupt, d, threshold, edges=heads(toy)) == want
    assert 0 < len(want) < len(heads(toy))
