"""methods.effect_split and methods.attribution_patching, against brute force (chapter 17)."""
import numpy as np
import pytest

from attnlib import attribution, tasks
from attnlib.attribution import patch
from attnlib.methods import attribution_patching, effect_split
from attnlib.model import load
from attnlib.paths import Edge
from reference import ref_model_run


@pytest.fixture(scope="module")
def toy():
    return load("induction")


@pytest.fixture(scope="module")
def fresh(toy):
    return tasks.induction(8, seed=16, **{**toy.card["data"], "alternating": 0.0})


# --- effect_split ---------------------------------------------------------------

@pytest.mark.parametrize("ablate", [[(0, 2)], [(0, 0), (1, 3)], [(1, 1)], []])
def test_effect_split_against_a_frozen_forward(toy, fresh, ablate):
    seq = fresh.tokens[1]
    t = int(np.flatnonzero(fresh.masks["repeat"][1])[2])
    nxt = int(fresh.targets[1, t])
    split = effect_split(toy, seq, t, nxt, ablate)
    weights = toy.trace(seq).attention_weights  # of the un-ablated run
    clean = ref_model_run(toy, seq)[t, nxt]
    frozen = ref_model_run(toy, seq, freeze=weights, drop=set(ablate))[t, nxt]
    ablated = ref_model_run(toy, seq, drop=set(ablate))[t, nxt]
    assert split.names == ["frozen attention", "through attention"]
    assert split["frozen attention"] == pytest.approx(frozen - clean, abs=1e-10)
    assert split["through attention"] == pytest.approx(ablated - frozen, abs=1e-10)
    assert split.total == pytest.approx(ablated - clean, abs=1e-10)


def test_previous_token_head_acts_through_attention(toy):
    """Chapter 16's sequence and query: L0H2's effect on the induction prediction is almost all through attention."""
    fresh = tasks.induction(200, seed=16, **{**toy.card["data"], "alternating": 0.0})
    seq = fresh.tokens[0]
    t = int(np.flatnonzero(fresh.masks["repeat"][0])[3])
    split = effect_split(toy, seq, t, int(fresh.targets[0, t]), [(0, 2)])
    assert split["through attention"] < -5
    assert abs(split["frozen attention"]) < 0.02 * abs(split["through attention"])


def test_effect_split_rejects_bad_heads(toy):
    with pytest.raises(ValueError, match=r"ablate names \(2, 0\)"):
        effect_split(toy, [50, 1, 2], 1, 2, [(2, 0)])


# --- attribution_patching ---------------------------------------------------------

def _interpolate(model, clean, corrupt, site, t, keep):
    """The metric's input with ``site`` moved a fraction ``t`` of the way from its corrupt to its clean value."""
    _, a_clean = attribution._run(model, clean)
    _, a_corrupt = attribution._run(model, corrupt)
    mask = keep[:, None]  # (T, 1)
    if isinstance(site, Edge):
        l, h = site.sender
        change = t * (a_clean[(l, h)] - a_corrupt[(l, h)])
        if site.receiver == "logits":
            return {"final": change}
        return {("in", *site.receiver, c): change for c in site.via}
    if site == "embed":
        return {"embed": t * mask * (a_clean["embed"] - a_corrupt["embed"])}
    if len(site) == 2:
        return {("write", *site): t * mask * (a_clean[site] - a_corrupt[site])}
    return {(site[2], site[0], site[1]): t * mask * (a_clean[site] - a_corrupt[site])}


SITES = ["embed", (0, 2), (1, 0), (1, 3), (0, 1, "v"), (1, 0, "q"), (1, 1, "k"), (1, 2, "v"),
         Edge((0, 2), (1, 0), "k"), Edge((0, 1), (1, 3), "qv"), Edge((1, 0), "logits"), Edge((0, 2), "logits")]


@pytest.mark.parametrize("positions", [None, [5, 9, 12]])
def test_attribution_patching_is_the_derivative_along_each_patch(toy, fresh, positions):
    clean = fresh.tokens[:3, :16]
    corrupt = fresh.tokens[3:6, :16]
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(clean.shape + (toy.vocab,))
    sites = SITES if positions is None else [s for s in SITES if not isinstance(s, Edge)]
    est = attribution_patching(toy, clean, corrupt, sites, direction, positions)
    keep = np.zeros(16, bool)
    keep[positions if positions is not None else slice(None)] = True
    eps = 1e-5
    for site, e in zip(sites, est):
        f = [(direction * ref_model_run(toy, corrupt, _interpolate(toy, clean, corrupt, site, s * eps, keep))).sum()
             for s in (1, -1)]
        fd = (f[0] - f[1]) / (2 * eps)
        assert abs(fd - e) < 1e-6 * max(1.0, abs(fd)), (site, fd, e)
        # the line's far end is the patch itself
        end = (direction * ref_model_run(toy, corrupt, _interpolate(toy, clean, corrupt, site, 1.0, keep))).sum()
        assert end == pytest.approx((direction * patch(toy, clean, corrupt, [site], positions)).sum(), abs=1e-8)
    assert np.abs(est).max() > 1.0  # not a vacuous comparison


def test_attribution_patching_is_exact_where_the_metric_is_linear(toy, fresh):
    """A write read only by the unembedding: the estimate is the patch's effect itself."""
    clean, corrupt = fresh.tokens[:2], fresh.tokens[2:4]
    d = np.zeros(clean.shape + (toy.vocab,))
    d[:, -5, 7] = 1.0
    site = Edge((1, 2), "logits")
    est, = attribution_patching(toy, clean, corrupt, [site], d)
    got = (d * patch(toy, clean, corrupt, [site])).sum() - (d * toy.forward(corrupt)).sum()
    assert est == pytest.approx(got, abs=1e-10) and abs(got) > 1e-3


def test_attribution_patching_takes_one_site_or_a_list(toy, fresh):
    clean, corrupt = fresh.tokens[0], fresh.tokens[1]
    d = np.ones(clean.shape + (toy.vocab,))
    one = attribution_patching(toy, clean, corrupt, (1, 0, "q"), d)
    assert one.shape == (1,)
    assert one[0] == attribution_patching(toy, clean, corrupt, [(1, 0, "q"), (1, 1)], d)[0]


def test_attribution_patching_bad_input(toy, fresh):
    clean, corrupt = fresh.tokens[0], fresh.tokens[1]
    d = np.ones(clean.shape + (toy.vocab,))
    with pytest.raises(ValueError, match="direction has shape"):
        attribution_patching(toy, clean, corrupt, [(1, 0)], d[:, :3])
    with pytest.raises(ValueError, match="takes no positions"):
        attribution_patching(toy, clean, corrupt, [Edge((0, 1), "logits")], d, positions=[3])
    with pytest.raises(ValueError, match="clean has shape"):
        attribution_patching(toy, clean, corrupt[:-1], [(1, 0)], d)
    with pytest.raises(ValueError, match=r"site \(2, 0\)"):
        attribution_patching(toy, clean, corrupt, [(2, 0)], d)


# --- linearised_softmax and error_split ---------------------------------------------

def test_linearised_softmax_is_the_softmax_to_first_order(toy, fresh):
    """Against the softmax of scores moved by eps: the linear weights' error shrinks as eps squared."""
    from attnlib.methods import linearised_softmax

    tokens = fresh.tokens[:2]
    base = toy.run(tokens).cache
    S0 = base[1, 2, "scores"]
    dS = np.where(np.isfinite(S0), np.random.default_rng(0).normal(size=S0.shape), 0.0)
    site, edit = linearised_softmax(base, 1, 2)
    assert site == (1, 2, "weights")
    errors = []
    for eps in (1e-2, 1e-3):
        moved = S0 + eps * dS
        exact = np.exp(moved - moved.max(-1, keepdims=True))
        exact /= exact.sum(-1, keepdims=True)
        linear = edit(site, None, {(1, 2, "scores"): moved})
        assert np.allclose(linear.sum(-1), 1) and (np.triu(linear[0], 1) == 0).all()
        errors.append(np.abs(linear - exact).max())
    assert errors[1] < errors[0] / 50  # second order: 100 times smaller for 10 times smaller eps


def test_error_split_of_a_key_site_is_its_heads_softmax_alone(toy, fresh):
    """A layer-1 key site crosses one softmax, and the metric is linear in that head's weights: linearising it
    gives attribution patching's estimate (a separate computation, from the backward pass) exactly."""
    from attnlib.methods import error_split

    clean = fresh.tokens[:4]
    corrupt = clean.copy()
    rng = np.random.default_rng(1)
    for row in corrupt:
        row[1:] = rng.permutation(row[1:])
    d = np.random.default_rng(2).normal(size=clean.shape + (toy.vocab,))
    split = error_split(toy, clean, corrupt, (1, 3, "k"), d)
    assert [k for k in split if isinstance(k, tuple)] == [(1, 3)]
    exact = (d * patch(toy, clean, corrupt, [(1, 3, "k")])).sum() - (d * toy.forward(corrupt)).sum()
    assert split["exact"] == pytest.approx(exact, abs=1e-9)
    assert split["estimate"] == pytest.approx(attribution_patching(toy, clean, corrupt, [(1, 3, "k")], d)[0])
    assert split["products"] == pytest.approx(0, abs=1e-9) and split["interaction"] == pytest.approx(0, abs=1e-9)
    assert split[1, 3] == pytest.approx(split["estimate"] - split["exact"], abs=1e-9)
    assert abs(split[1, 3]) > 1e-3  # a real error, not an empty split


def test_error_split_heads_and_the_sum(toy, fresh):
    from attnlib.methods import error_split

    clean, corrupt = fresh.tokens[:2], fresh.tokens[2:4]
    d = np.random.default_rng(3).normal(size=clean.shape + (toy.vocab,))
    embed = error_split(toy, clean, corrupt, "embed", d)
    assert {k for k in embed if isinstance(k, tuple)} == {(l, h) for l in range(2) for h in range(4)}
    write = error_split(toy, clean, corrupt, (1, 0), d)  # read by the logits only: no softmax, no error
    assert [k for k in write if isinstance(k, tuple)] == []
    assert write["estimate"] == pytest.approx(write["exact"], abs=1e-9)
    for split in (embed, error_split(toy, clean, corrupt, (0, 1, "q"), d)):
        parts = sum(v for k, v in split.items() if k not in ("exact", "estimate"))
        assert split["exact"] + parts == pytest.approx(split["estimate"], abs=1e-9)
    assert {k for k in error_split(toy, clean, corrupt, (0, 1, "q"), d) if isinstance(k, tuple)} == {
        (0, 1), (1, 0), (1, 1), (1, 2), (1, 3)}
    with pytest.raises(ValueError, match="one activation site"):
        error_split(toy, clean, corrupt, Edge((0, 1), (1, 0), "k"), d)
