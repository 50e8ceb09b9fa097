"""Model.run, the one forward pass: every site read and edited, identity edits exact, the former entry points unchanged."""
import numpy as np
import pytest
from entry_points import compute

from attnlib import attribution, sites
from attnlib.model import Model, available, load

BEFORE = np.load(__import__("pathlib").Path(__file__).parent / "data" / "entry_points_before.npz")


def smeared():
    """The induction model with smeared keys (no shipped model has them), so the smear sites are exercised."""
    m = load("induction")
    rng = np.random.default_rng(3)
    return Model(m.W_E, m.W_pos, m.W_U, m.layers, {}, smear=[rng.uniform(0.2, 0.9, w.n_heads) for w in m.layers])


MODELS = {name: (lambda name=name: load(name)) for name in available()} | {"smeared": smeared}


def tokens(m, shape=(2, 9), seed=0):
    t = np.random.default_rng(seed).integers(0, m.vocab, shape)
    if m.bos is not None:
        t[..., 0] = m.bos
    return t


@pytest.mark.parametrize("name", MODELS)
def test_an_identity_edit_of_every_site_leaves_everything_bit_identical(name):
    m = MODELS[name]()
    toks = tokens(m)
    plain = m.run(toks)
    every = list(plain.cache)
    assert len(every) == len(plain.cache) == len(set(every))
    for same in (lambda site, v, c: v, lambda site, v, c: v.copy()):
        edited = m.run(toks, {s: same for s in every})
        assert np.array_equal(edited.logits, plain.logits)
        for s in every:
            assert np.array_equal(edited.cache[s], plain.cache[s]), s


@pytest.mark.parametrize("name", ["induction", "copy_back", "smeared", "plays_2l_spans"])
def test_every_site_is_read_with_its_shape_and_an_edit_there_is_seen_downstream(name):
    m = MODELS[name]()
    toks = tokens(m, (2, 7))
    plain = m.run(toks)
    T, D = 7, m.d_model
    for s in plain.cache:
        value = plain.cache[s]
        d_head = None if isinstance(s, str) or s[1] == "stream" else m.layers[s[0]].d_head
        want = {"logits": (2, T, m.vocab), "pos": (T, D)}.get(s) if isinstance(s, str) else None
        if want is None:
            name_ = s if isinstance(s, str) else (s[2] if len(s) == 3 else "write")
            want = {"q": (2, T, d_head), "k": (2, T, d_head), "k_raw": (2, T, d_head), "v": (2, T, d_head),
                    "scores": (2, T, T), "weights": (2, T, T)}.get(name_, (2, T, D))
        assert value.shape == want, (s, value.shape)
        bump = np.random.default_rng(1).standard_normal(value.shape)
        if s != "logits" and isinstance(s, tuple) and len(s) == 3 and s[2] == "scores":
            bump = np.where(np.tri(T, dtype=bool), bump, 0.0)
        edited = m.run(toks, {s: lambda site, v, c, bump=bump: v + bump})
        assert np.allclose(edited.cache[s], value + bump), s
        assert not np.allclose(edited.logits, plain.logits), f"an edit of {sites.site_name(s)} changed nothing"


def test_attention_weights_can_be_patched_and_a_head_never_sees_the_future():
    m = load("induction")
    toks = tokens(m, (1, 8))
    prev = np.eye(8, k=-1)
    prev[0, 0] = 1
    tr = m.run(toks, {(0, 2, "weights"): prev})
    assert np.array_equal(tr.cache[0, 2, "weights"][0], prev)
    # an edit that makes a future score huge: the mask is applied again, so the weights stay causal
    tr = m.run(toks, {(1, 0, "scores"): lambda site, v, c: np.full_like(v, 50.0)})
    assert np.allclose(tr.cache[1, 0, "weights"], np.tril(np.ones((8, 8))) / np.arange(1, 9)[:, None])


def test_edits_read_what_the_run_computed_so_far():
    """A path cut written by hand as an edit: L1H0's keys lose L0H2's write; paths.trace does the same."""
    from attnlib import paths
    m = load("induction")
    toks = tokens(m, (2, 10))
    by_hand = m.run(toks, {(1, 0, "x_k"): lambda site, x, cache: x - cache[0, 2]})
    assert np.array_equal(by_hand.logits, paths.forward(m, toks, [paths.Edge((0, 2), (1, 0), "k")]))


def test_bad_sites_and_edits_are_named():
    m = load("induction")
    toks = tokens(m, (1, 5))
    with pytest.raises(ValueError, match=r"\(2, 0\) is not a site"):
        m.run(toks, {(2, 0): np.zeros(1)})
    with pytest.raises(ValueError, match=r"\(0, 1, 'pattern'\) is not a site.*weights"):
        m.run(toks, {(0, 1, "pattern"): np.zeros(1)})
    with pytest.raises(ValueError, match=r"edit of L0H1.q returned shape \(3,\), expected \(1, 5, 16\)"):
        m.run(toks, {(0, 1, "q"): lambda site, v, c: np.zeros(3)})
    with pytest.raises(TypeError, match="dict of site to edit"):
        m.run(toks, [3])
    clean = m.run(toks)
    with pytest.raises(ValueError, match="edits of L0H1 come before start_at_layer = 1"):
        m.run(toks, {(0, 1): sites.zero}, start_at_layer=1, start_from=clean)
    with pytest.raises(ValueError, match="same tokens"):
        m.run(toks[:, ::-1], start_at_layer=1, start_from=clean)


def test_cache_false_keeps_only_the_logits():
    m = load("induction")
    toks = tokens(m)
    tr = m.run(toks, cache=False)
    assert tr.cache is None and tr.residual is None
    assert np.array_equal(tr.logits, m.run(toks).logits)


@pytest.mark.parametrize("name", available())
def test_every_former_entry_point_gives_the_numbers_it_gave_before_the_one_forward_pass(name):
    """Model.trace, paths.trace, patch, path patching, effect_split, attribution patching, gradients, EAP, ACDC."""
    got = compute(name)
    assert set(got) == {k for k in BEFORE.files if k.startswith(name + "/")}
    for key, value in got.items():
        want = BEFORE[key]
        assert value.shape == want.shape, key
        np.testing.assert_allclose(value, want, rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()), err_msg=key)


# --- whole-sequence attribution ---------------------------------------------------

@pytest.mark.parametrize("name", ["induction", "plays_2l_spans", "copy_back"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_whole_sequence_attribution_is_the_per_position_calls(name, dtype):
    m = load(name, dtype)
    seq = tokens(m, (12,), seed=5)
    L = m.n_layers
    tol = 1e-12 if dtype == np.float64 else 1e-5  # one run with a batch axis against one run each: sums in another order
    for fn in (attribution.logit_attribution, attribution.path_attribution):
        every = fn(m, seq)  # each position's next token
        assert every.over == ("position",) and every.values.shape[1] == len(seq) - 1
        for t in range(len(seq) - 1):
            one = fn(m, seq, t, int(seq[t + 1]))
            np.testing.assert_allclose(every.at(t).values, one.values, rtol=tol, atol=tol)
        targets = fn(m, seq, 4, centred=True)  # every target at one position
        assert targets.over == ("target",) and targets.values.shape[1] == m.vocab
        for k in (0, int(seq[5]), m.vocab - 1):
            np.testing.assert_allclose(targets.at(k).values, fn(m, seq, 4, k, centred=True).values, atol=tol)
        one_target = fn(m, seq, target=3)
        np.testing.assert_allclose(one_target.at(7).values, fn(m, seq, 7, 3).values, atol=tol)
    pairs = attribution.qk_attribution(m, seq, L - 1, 0)
    assert pairs.over == ("query", "key")
    for q in range(len(seq)):
        for k in range(q + 1):
            np.testing.assert_allclose(pairs.at(q, k).values,
                                       attribution.qk_attribution(m, seq, L - 1, 0, q, k).values, atol=tol)
        assert not pairs.values[..., q, q + 1:].any()
    keys = attribution.qk_attribution(m, seq, L - 1, 0, 6)
    np.testing.assert_allclose(keys.values, pairs.values[..., 6, :], atol=tol)


def test_a_wrong_split_is_refused_at_the_position_where_it_is_wrong():
    values = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"at \{'position': 2\}"):
        attribution.Attribution(["a", "b"], values, total=[1.5, 2.5, 3.6], over=("position",))


@pytest.mark.parametrize("name", ["induction", "plays_2l_spans"])
def test_float32_models_attribute_exactly_enough_for_their_dtype(name):
    """Every (position, target) of a float32 model passes the sum check (it failed on most at 1e-8)."""
    m = load(name, np.float32)
    seq = tokens(m, (16,), seed=2)
    for t in range(16):
        attribution.logit_attribution(m, seq, t)  # every target at once: the check runs for each
    attribution.path_attribution(m, seq)
    attribution.qk_attribution(m, seq, 1, 2)
    attribution.qk_contrast(m, seq, 1, 0, 9, 4)
