"""The graph with the input as a node, metrics beyond a direction, ACDC's two tests, faithfulness and ROC (chapter 17)."""
import numpy as np
import pytest

from attnlib import backward, discovery, objectives, paths, sites
from attnlib.attribution import patch
from attnlib.discovery import Edge, all_edges
from attnlib.model import load


@pytest.fixture(scope="module")
def toy():
    return load("induction")


@pytest.fixture(scope="module")
def runs(toy):
    clean = np.array([[50, *range(s, s + 6), *range(s, s + 6)] for s in (11, 21, 31)])  # a span, then again
    corrupt = clean.copy()
    corrupt[:, 3] = 5  # one token of the first occurrence replaced (as discovery's examples do)
    return clean, corrupt


def induction_direction(toy, clean):
    """The logit, at position 9, of the token that followed it in the first occurrence."""
    d = np.zeros(clean.shape + (toy.vocab,))
    d[np.arange(len(clean)), 9, clean[:, 10]] = 1.0
    return d


def test_the_input_is_a_sender_of_every_head_and_the_logits(toy):
    edges = all_edges(toy)
    from_input = [e for e in edges if e.sender == "embed"]
    assert len(from_input) == 8 * 3 + 1 and from_input[-1] == Edge("embed", "logits")
    assert all_edges(toy, embed=False) == [e for e in edges if e.sender != "embed"]


def test_every_edge_patched_at_once_is_the_other_run(toy, runs):
    """With the input a node, path-patching every edge gives every reader the other run's values: that run.
    Without it, the embedding stays: the heads-only graph cannot reach the other run."""
    clean, corrupt = runs
    np.testing.assert_allclose(patch(toy, clean, corrupt, all_edges(toy)), toy.forward(clean), atol=1e-10)
    assert not np.allclose(patch(toy, clean, corrupt, all_edges(toy, embed=False)), toy.forward(clean), atol=1e-3)


@pytest.mark.parametrize("sender", ["embed", "tok", "pos"])
@pytest.mark.parametrize("receiver,via", [((0, 2), "v"), ((1, 1), "k"), ((1, 0), "qv"), ("logits", "qkv")])
def test_an_input_edge_is_the_run_with_that_read_replaced(toy, runs, sender, receiver, via):
    clean, corrupt = runs
    other = toy.run(clean).cache
    if receiver == "logits":
        edits = {(toy.n_layers, "stream"): lambda s, x, c: x - c[sender] + other[sender]}
    else:
        edits = {(*receiver, "x_" + v): (lambda s, x, c: x - c[sender] + other[sender]) for v in via}
    by_hand = toy.run(corrupt, edits).logits
    np.testing.assert_allclose(patch(toy, clean, corrupt, [Edge(sender, receiver, via)]), by_hand, atol=1e-12)
    np.testing.assert_allclose(paths.forward(toy, corrupt, [Edge(sender, receiver, via)]),
                               toy.run(corrupt, {s: (lambda s_, x, c: x - c[sender]) for s in edits}).logits,
                               atol=1e-12)


def test_an_input_edge_cannot_be_mistaken(toy):
    with pytest.raises(ValueError, match="'embedding' is not a"):
        paths.forward(toy, np.arange(5), [Edge("embedding", (1, 0), "k")])


def test_edge_effects_of_the_input_are_path_patches(toy, runs):
    clean, corrupt = runs
    d = np.zeros(clean.shape + (toy.vocab,))
    d[:, 9, :] = np.random.default_rng(0).standard_normal(toy.vocab)
    fx = discovery.edge_effects(toy, clean, corrupt, d, edges=[e for e in all_edges(toy) if e.sender == "embed"])
    base = (d * toy.forward(clean)).sum()
    for e, v in fx.items():
        assert v == pytest.approx((d * patch(toy, corrupt, clean, [e])).sum() - base, abs=1e-9)


# --- metrics -----------------------------------------------------------------------

def metrics(logits):
    reference = logits + np.random.default_rng(3).normal(0, 0.5, logits.shape)
    return [objectives.Linear(np.random.default_rng(4).standard_normal(logits.shape)),
            objectives.LogitDifference(-2, [3, 4, 5], 7), objectives.LogProb(5, [1, 2, 3]),
            objectives.KL(reference), objectives.KL(reference, positions=[2, 9])]


def test_each_metrics_gradient_is_its_finite_difference(toy, runs):
    logits = toy.forward(runs[0])
    rng = np.random.default_rng(5)
    for metric in metrics(logits):
        g = metric.gradient(logits)
        for _ in range(3):
            step = rng.standard_normal(logits.shape)
            eps = 1e-6
            fd = (metric.value(logits + eps * step) - metric.value(logits - eps * step)) / (2 * eps)
            assert (g * step).sum() == pytest.approx(fd, rel=1e-6, abs=1e-7), metric


def test_gradients_of_a_nonlinear_metric_are_its_finite_differences_through_the_model(toy, runs):
    clean = runs[0]
    metric = objectives.LogProb(8, clean[:, 9])
    g = backward.gradients(toy, clean, metric)
    assert g.metric == pytest.approx(metric.value(toy.forward(clean)))
    step = np.random.default_rng(6).standard_normal(clean.shape + (toy.d_model,))
    eps = 1e-6

    def moved(t):
        return metric.value(toy.run(clean, {"embed": lambda s, x, c: x + t * step}).logits)

    assert (g.stream[0] * step).sum() == pytest.approx((moved(eps) - moved(-eps)) / (2 * eps), rel=1e-5)


def test_eap_with_the_kl_divergence_sees_nothing_at_the_clean_run(toy, runs):
    """The KL divergence from the clean run is smallest there: its gradient is zero, so EAP estimates 0
    for every edge, however large the exact effect (why EAP uses a logit difference and ACDC the KL)."""
    clean, corrupt = runs
    kl = objectives.KL(toy.forward(clean))
    est = discovery.eap(toy, clean, corrupt, kl)
    assert max(abs(v) for v in est.values()) < 1e-12
    exact = discovery.edge_effects(toy, clean, corrupt, kl, edges=all_edges(toy)[:30])
    assert max(exact.values()) > 0.05 and min(exact.values()) >= -1e-12  # noising can only raise it


def test_acdc_tests(toy, runs):
    clean, corrupt = runs
    kl = objectives.KL(toy.forward(clean))
    graph = all_edges(toy, embed=False)
    signed, absolute = (discovery.acdc(toy, clean, corrupt, kl, 0.02, test=t, edges=graph) for t in ("signed", "abs"))
    assert signed and set(signed) <= set(graph)
    d = induction_direction(toy, clean)
    # with a linear metric, a signed test drops every edge whose noising lowers the metric, however much:
    # the circuit's own edges among them; the abs test keeps them
    lin_signed = discovery.acdc(toy, clean, corrupt, d, 0.5, test="signed", edges=graph)
    lin_abs = discovery.acdc(toy, clean, corrupt, d, 0.5, test="abs", edges=graph)
    assert len(lin_signed) < len(lin_abs)
    with pytest.raises(ValueError, match="test must be 'abs'"):
        discovery.acdc(toy, clean, corrupt, d, 0.5, test="two-sided")
    assert absolute is not None


# --- faithfulness and ROC ------------------------------------------------------------------

def test_faithfulness_against_explicit_runs(toy, runs):
    clean, corrupt = runs
    d = induction_direction(toy, clean)
    graph = all_edges(toy)
    assert discovery.faithfulness(toy, clean, corrupt, graph, d) == pytest.approx(1.0, abs=1e-12)
    assert discovery.faithfulness(toy, clean, corrupt, [], d) == pytest.approx(0.0, abs=1e-9)
    circuit = [e for e in graph if e.sender in ((0, 2), (1, 1), "embed")][:20]
    rest = [e for e in graph if e not in circuit]
    value = (d * patch(toy, corrupt, clean, rest)).sum()
    lo, hi = (d * toy.forward(corrupt)).sum(), (d * toy.forward(clean)).sum()
    assert discovery.faithfulness(toy, clean, corrupt, circuit, d) == pytest.approx((value - lo) / (hi - lo), abs=1e-9)


def test_roc_auc_is_the_share_of_true_false_pairs_ranked_right():
    rng = np.random.default_rng(8)
    edges = [Edge((0, h), "logits") for h in range(40)]
    scores = {e: float(v) for e, v in zip(edges, np.round(rng.standard_normal(40), 1))}  # ties included
    truth = edges[:9]
    fpr, tpr, auc = discovery.roc(scores, truth)
    mag = {e: abs(v) for e, v in scores.items()}
    pairs = [(t, f) for t in truth for f in edges if f not in truth]
    brute = np.mean([1.0 if mag[t] > mag[f] else 0.5 if mag[t] == mag[f] else 0.0 for t, f in pairs])
    assert auc == pytest.approx(brute)
    assert fpr[0] == tpr[0] == 0 and fpr[-1] == tpr[-1] == 1 and np.all(np.diff(tpr) >= 0)
    assert discovery.roc({e: (10.0 if e in truth else 1.0) for e in edges}, truth)[2] == 1.0
    with pytest.raises(ValueError, match="without a score"):
        discovery.roc({edges[0]: 1.0, edges[1]: 0.0}, [edges[2]])


def test_cache_names_the_input_sites_for_edits(toy):
    assert sites.site_name("embed") == "embed"


def test_patch_names_its_runs_and_the_old_keywords_still_work_with_a_warning(toy, runs):
    clean, corrupt = runs
    new = patch(toy, source=clean, base=corrupt, sites=[(1, 1)])
    with pytest.warns(DeprecationWarning, match="'clean' is now called 'source'"):
        old = patch(toy, clean=clean, corrupt=corrupt, sites=[(1, 1)])
    np.testing.assert_array_equal(new, old)
    with pytest.raises(ValueError, match="source has shape"):
        patch(toy, clean, corrupt[:1], [(1, 1)])


# --- the planted benchmark with noise ---------------------------------------------------

@pytest.mark.parametrize("composition", ["k", "q"])
def test_the_planted_circuit_with_the_input_is_every_edge_that_matters(composition):
    """Without noise, only the circuit's edges (the input's among them) move the metric.

    Which of them move depends on the corruption: the second occurrence is the same in both runs, so
    the input's edges into what reads the current token (L1H0's queries) carry no difference."""
    m, circuit = discovery.planted(composition, embed=True)
    rng = np.random.default_rng(11)
    s = np.array([rng.choice(np.arange(1, m.vocab), 5, replace=False) for _ in range(6)])
    clean = np.hstack([np.zeros((6, 1), int), s, s])
    corrupt = clean.copy()
    corrupt[:, 1:6] = np.array([rng.choice(np.arange(1, m.vocab), 5, replace=False) for _ in range(6)])
    d = np.zeros(clean.shape + (m.vocab,))
    d[np.arange(6), 8, clean[:, 9]] = 1.0
    fx = discovery.edge_effects(m, clean, corrupt, d)
    moved = {e for e, v in fx.items() if abs(v) > 1e-9}
    assert moved <= set(circuit)
    assert {e for e in circuit if e.sender != "embed"} <= moved
    # the true edges that move outrank every false one; those that do not tie with the false ones (half)
    moving = len(moved) / len(circuit)
    assert discovery.roc(fx, circuit)[2] == pytest.approx(moving + (1 - moving) / 2)


def test_noise_gives_every_edge_an_effect_and_is_seeded():
    m0, circuit = discovery.planted("k")
    a, _ = discovery.planted("k", noise=0.01, seed=3)
    b, _ = discovery.planted("k", noise=0.01, seed=3)
    c, _ = discovery.planted("k", noise=0.01, seed=4)
    assert np.array_equal(a.W_U, b.W_U) and not np.array_equal(a.W_U, c.W_U)
    assert (a.layers[0].W_Q - m0.layers[0].W_Q).std() == pytest.approx(0.01, rel=0.05)
    with pytest.raises(ValueError, match="noise must be"):
        discovery.planted("k", noise=-1)


# --- the remedies: AtP* and EAP-IG --------------------------------------------------------

def test_atp_star_is_exact_on_the_last_layers_query_and_key_sites_and_atp_is_not(toy, runs):
    from attnlib.methods import atp_star, attribution_patching
    clean, corrupt = runs
    d = induction_direction(toy, clean)
    base = (d * toy.forward(corrupt)).sum()
    sites_ = [(1, h, c) for h in range(4) for c in "qk"]
    exact = np.array([(d * patch(toy, clean, corrupt, [s])).sum() - base for s in sites_])
    star, atp = atp_star(toy, clean, corrupt, sites_, d), attribution_patching(toy, clean, corrupt, sites_, d)
    np.testing.assert_allclose(star, exact, atol=1e-9)
    assert np.abs(atp - exact).max() > 0.1  # the first-order estimate misses where the softmax saturates
    # elsewhere AtP* is attribution patching
    other = ["embed", (0, 2), (1, 1), (0, 1, "v"), Edge((0, 2), (1, 0), "v"), Edge((0, 2), "logits")]
    np.testing.assert_array_equal(atp_star(toy, clean, corrupt, other, d),
                                  attribution_patching(toy, clean, corrupt, other, d))
    # positions: only those queries (or keys) patched
    np.testing.assert_allclose(
        atp_star(toy, clean, corrupt, [(1, 1, "k")], d, positions=[2, 3, 4]),
        [(d * patch(toy, clean, corrupt, [(1, 1, "k")], positions=[2, 3, 4])).sum() - base], atol=1e-9)


def test_eap_ig_on_the_inputs_edges_converges_to_the_whole_change(toy, runs):
    """The input moves along a straight line: its edges' scores add up to metric(corrupt) - metric(clean)
    as the steps grow (completeness), and the error shrinks as the steps do."""
    clean, corrupt = runs
    d = induction_direction(toy, clean)
    whole = (d * toy.forward(corrupt)).sum() - (d * toy.forward(clean)).sum()
    graph = [e for e in all_edges(toy) if e.sender == "embed"]
    errors = [abs(sum(discovery.eap_ig(toy, clean, corrupt, d, s, edges=graph).values()) - whole)
              for s in (1, 4, 16, 64)]
    assert errors[-1] < 0.01 * abs(whole) and errors[-1] < errors[1] < errors[0]
    assert np.all(np.diff(errors[1:]) < 0)


def test_eap_ig_with_one_step_is_eap_at_the_midpoint(toy, runs):
    clean, corrupt = runs
    d = induction_direction(toy, clean)
    graph = all_edges(toy)[:40]
    mid = {"embed": 0.5 * (toy.run(clean).cache["embed"] + toy.run(corrupt).cache["embed"])}
    g = backward.gradients(toy, clean, d, edits=mid)
    one = discovery.eap_ig(toy, clean, corrupt, d, 1, edges=graph)
    w_clean, w_corrupt = toy.run(clean).cache, toy.run(corrupt).cache
    for e in graph:
        grad = g.stream[-1] if e.receiver == "logits" else g.inputs[e.receiver[0]][..., "qkv".index(e.via),
                                                                                    e.receiver[1], :, :]
        assert one[e] == pytest.approx(float((grad * (w_corrupt[e.sender] - w_clean[e.sender])).sum()), abs=1e-12)
    with pytest.raises(ValueError, match="steps must be a whole number >= 1"):
        discovery.eap_ig(toy, clean, corrupt, d, 0)


def test_effect_split_with_mean_ablation_is_the_run_with_the_mean_write_in_place(toy):
    from attnlib import tasks
    from attnlib.methods import effect_split
    batch = tasks.induction(24, seed=21, **{**toy.card["data"], "alternating": 0.0}).tokens
    seq, reference = batch[0], batch[1:]
    heads = [(0, 2), (0, 1)]
    mean = {h: toy.run(reference).cache[h].mean(axis=0) for h in heads}  # (T, d_model) each
    clean = toy.run(seq)
    frozen = {(l, i, "weights"): clean.cache[l, i, "weights"] for l in range(2) for i in range(4)}
    t, target = 20, int(seq[21])
    ablated = toy.run(seq, dict(mean)).logits[t, target]
    held = toy.run(seq, {**mean, **frozen}).logits[t, target]
    split = effect_split(toy, seq, t, target, heads, replacement="mean", reference=reference)
    assert split["frozen attention"] == pytest.approx(held - clean.logits[t, target], abs=1e-9)
    assert split["through attention"] == pytest.approx(ablated - held, abs=1e-9)
    zero = effect_split(toy, seq, t, target, heads)
    assert zero.total == pytest.approx(toy.forward(seq, ablate=heads)[t, target] - clean.logits[t, target])
    with pytest.raises(ValueError, match="takes reference sequences"):
        effect_split(toy, seq, t, target, heads, replacement="mean")
    with pytest.raises(ValueError, match="replacement must be"):
        effect_split(toy, seq, t, target, heads, replacement="resample")


def test_atp_star_is_exact_on_edges_into_the_last_layers_queries_and_keys(toy, runs):
    from attnlib.methods import atp_star, attribution_patching
    clean, corrupt = runs
    d = induction_direction(toy, clean)
    base = (d * toy.forward(corrupt)).sum()
    edges = [Edge(s, (1, h), c) for s in ("embed", (0, 1), (0, 2)) for h in range(4) for c in ("q", "k", "qk")]
    exact = np.array([(d * patch(toy, clean, corrupt, [e])).sum() - base for e in edges])
    np.testing.assert_allclose(atp_star(toy, clean, corrupt, edges, d), exact, atol=1e-9)
    assert np.abs(attribution_patching(toy, clean, corrupt, edges, d) - exact).max() > 0.1
    # an edge into the values too: the softmax part exact, the values' part first order (here exact: linear)
    qv = [Edge((0, 2), (1, h), "qv") for h in range(4)]
    exact_qv = [(d * patch(toy, clean, corrupt, [e])).sum() - base for e in qv]
    np.testing.assert_allclose(atp_star(toy, clean, corrupt, qv, d), exact_qv, atol=0.05 * np.abs(exact_qv).max())


def test_every_method_is_counted_where_it_runs_the_model(toy, runs):
    """counting counts Model.run and backward.gradients themselves, so no method can leave a pass out."""
    from attnlib.methods import atp_star, attribution_patching
    clean, corrupt = runs
    d = induction_direction(toy, clean)
    graph = all_edges(toy)[:10]
    want = {  # (forward, backward)
        "edge_effects": ((2 + 10, 0), lambda: discovery.edge_effects(toy, clean, corrupt, d, edges=graph)),
        "eap": ((2, 1), lambda: discovery.eap(toy, clean, corrupt, d, edges=graph)),
        "eap_ig": ((2 + 3, 3), lambda: discovery.eap_ig(toy, clean, corrupt, d, 3, edges=graph)),
        "faithfulness": ((3, 0), lambda: discovery.faithfulness(toy, clean, corrupt, graph[:3], d, graph)),
        "attribution_patching": ((2, 1), lambda: attribution_patching(toy, clean, corrupt, [(1, 0, "q")], d)),
        "atp_star": ((2, 1), lambda: atp_star(toy, clean, corrupt, [(1, 0, "q")], d)),
    }
    for name, (expected, call) in want.items():
        with discovery.counting() as cost:
            call()
        assert (cost.forward, cost.backward) == expected, name


# --- mean ablation as the corruption ------------------------------------------------

def test_mean_ablation_edges_against_paths_mean_cuts():
    """edge_effects with MeanAblation(ref) is, edge by edge, paths.forward's mean-ablated cut of that edge
    (a separate computation); acdc takes it too; the methods that need a paired run refuse it by name."""
    from attnlib import paths
    from attnlib.discovery import MeanAblation, acdc, all_edges, eap, edge_effects, faithfulness

    m = load("induction")
    rng = np.random.default_rng(5)
    seg = rng.choice(np.arange(1, 50), (3, 6))
    clean = np.concatenate([np.full((3, 1), 50), seg, seg], 1)  # (3, 13)
    ref = np.concatenate([np.full((6, 1), 50), rng.integers(1, 50, (6, 12))], 1)
    d = rng.normal(size=clean.shape + (m.vocab,))
    graph = all_edges(m)
    fx = edge_effects(m, clean, MeanAblation(ref), d, edges=graph)
    base = (d * m.forward(clean)).sum()
    for e in graph[::5] + [Edge("embed", (0, 1), "v"), Edge((0, 2), (1, 1), "k"), Edge((1, 0), "logits")]:
        cut = (d * paths.forward(m, clean, [e], how="mean", reference=ref)).sum()
        assert fx[e] == pytest.approx(cut - base, abs=1e-9), e
    assert max(abs(v) for v in fx.values()) > 0.1  # the means do move the metric
    kept = acdc(m, clean, MeanAblation(ref), d, threshold=0.05 * abs(base), edges=graph)
    assert 0 < len(kept) < len(graph)
    for method, call in (("eap", lambda c: eap(m, clean, c, d)),
                         ("faithfulness", lambda c: faithfulness(m, clean, c, kept, d))):
        with pytest.raises(ValueError, match=f"{method} needs a paired corrupt run"):
            call(MeanAblation(ref))
    with pytest.raises(ValueError, match="reference must be"):
        edge_effects(m, clean, MeanAblation(ref[:, :7]), d)
