"""attnlib.attribution against brute force: Model.trace's logits and scores, plain forward passes, paths.trace."""
import numpy as np
import pytest

import attnlib
from attnlib import paths
from attnlib.attribution import Attribution, logit_attribution, patch, path_attribution, qk_attribution
from attnlib.model import Model, available, load
from attnlib.paths import Edge

MODELS = available()


def toy(smear=None, seed=0, vocab=9, n_ctx=10, d_model=8, n_heads=2, n_layers=3):
    rng = np.random.default_rng(seed)
    layers = [attnlib.random_weights(d_model, n_heads, seed=seed + l) for l in range(n_layers)]
    return Model(rng.normal(size=(vocab, d_model)), rng.normal(size=(n_ctx, d_model)),
                 rng.normal(size=(d_model, vocab)), layers, {}, None, None, smear)


def sequence(model, T, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, model.vocab, size=T)


def brute_scores(model, tokens, layer):
    """Every head's scaled, unmasked score from Model.trace's stream, head by head with plain matrices."""
    x = model.trace(tokens).residual[layer]  # (T, d_model)
    w = model.layers[layer]
    out = []
    for i in range(w.n_heads):
        Q = x @ w.per_head.W_Q[i]
        K = x @ w.per_head.W_K[i]
        if model.smear is not None:
            s = model.smear[layer][i]
            K = s * K + (1 - s) * np.vstack([K[:1], K[:-1]])
        out.append(Q @ K.T / np.sqrt(w.d_head))
    return np.array(out)


@pytest.fixture(scope="module", params=MODELS + ["toy3", "toy3_smear"])
def case(request):
    if request.param == "toy3":
        m = toy()
    elif request.param == "toy3_smear":
        m = toy(smear=[np.array([0.3, 1.0]), np.array([0.7, 0.1]), np.array([0.5, 0.9])])
    else:
        m = load(request.param)
    T = min(m.n_ctx, 24)
    return m, sequence(m, T, seed=len(request.param))


def test_logit_attribution_sums_to_the_logit(case):
    m, toks = case
    logits = m.trace(toks).logits
    rng = np.random.default_rng(1)
    for t in (0, len(toks) - 1, int(rng.integers(len(toks)))):
        for u in rng.integers(0, m.vocab, size=3):
            a = logit_attribution(m, toks, t, int(u))
            assert abs(a.values.sum() - logits[t, u]) < 1e-10
            assert a.names[:2] == ["embed", "pos"] and len(a.names) == 2 + sum(w.n_heads for w in m.layers)


def test_logit_attribution_terms_are_the_stream_terms(case):
    m, toks = case
    tr = m.trace(toks)
    t, u = len(toks) - 1, 1
    a = logit_attribution(m, toks, t, u)
    assert np.isclose(a["embed"], m.W_E[toks[t]] @ m.W_U[:, u], atol=1e-12)
    assert np.isclose(a["pos"], m.W_pos[t] @ m.W_U[:, u], atol=1e-12)
    assert np.isclose(a[f"L{m.n_layers - 1}H0"], tr.writes[-1][0, t] @ m.W_U[:, u], atol=1e-12)


def test_path_attribution_sums_to_the_logit_and_regroups_into_heads(case):
    m, toks = case
    logits = m.trace(toks).logits
    t, u = len(toks) - 1, int(np.argmax(logits[-1]))
    p = path_attribution(m, toks, t, u)
    assert abs(p.values.sum() - logits[t, u]) < 1e-10
    # the paths ending in a head add up to that head's write: the logit attribution's term
    a = logit_attribution(m, toks, t, u)
    for name in a.names[2:]:
        ending = sum(v for n, v in zip(p.names, p.values) if n.split(">")[-1] == name)
        assert abs(ending - a[name]) < 1e-10
    assert abs(p["embed"] - a["embed"]) < 1e-10 and abs(p["pos"] - a["pos"]) < 1e-10
    assert not set(p.names) & set(a.names[2:])  # a head's name alone is its whole write, never a path
    n_chains = 2
    for w in m.layers:
        n_chains *= 1 + w.n_heads
    assert len(p.names) == n_chains


def test_path_attribution_single_head_path_by_hand():
    m = load("induction")
    toks = np.array([50, 3, 7, 9, 3, 7, 9])
    tr = m.trace(toks)
    w0, w1 = m.layers
    # the virtual head L0H2 > L1H1, written out: pattern, values, output, pattern, values, output
    v = tr.attention_weights[0][2] @ tr.embedding @ w0.per_head.W_V[2] @ w0.per_head.W_O[2]
    v = tr.attention_weights[1][1] @ v @ w1.per_head.W_V[1] @ w1.per_head.W_O[1]
    p = path_attribution(m, toks, 5, 9)
    assert np.isclose(p["embed>L0H2>L1H1"] + p["pos>L0H2>L1H1"], v[5] @ m.W_U[:, 9], atol=1e-12)


def test_qk_attribution_sums_to_the_score_and_softmaxes_to_the_pattern(case):
    m, toks = case
    tr = m.trace(toks)
    T = len(toks)
    q = T - 1
    for layer in range(m.n_layers):
        S = brute_scores(m, toks, layer)
        for head in {0, m.layers[layer].n_heads - 1}:
            row = []
            for k in range(q + 1):
                a = qk_attribution(m, toks, layer, head, q, k)
                assert abs(a.values.sum() - S[head, q, k]) < 1e-10
                row.append(a.total)
            row = np.array(row)
            e = np.exp(row - row.max())
            np.testing.assert_allclose(e / e.sum(), tr.attention_weights[layer][head, q, :q + 1], atol=1e-10)
            n_terms = 2 + sum(w.n_heads for w in m.layers[:layer])
            assert a.values.shape == (n_terms, n_terms) and a.names == a.key_names


def test_qk_attribution_entry_by_hand():
    m = load("induction")
    toks = np.array([50, 3, 7, 9, 3, 7])
    tr = m.trace(toks)
    a = qk_attribution(m, toks, 1, 0, 4, 2)
    w = m.layers[1]
    want = (m.W_E[toks[4]] @ w.per_head.W_Q[0]) @ (tr.writes[0][2, 2] @ w.per_head.W_K[0]) / np.sqrt(w.d_head)
    assert np.isclose(a[("embed", "L0H2")], want, atol=1e-12)
    assert np.isclose(a.query_side()["embed"], a.values[0].sum())
    assert np.isclose(a.key_side()["L0H2"], a.values[:, 4].sum())
    with pytest.raises(KeyError, match="indexed by"):
        a["embed"]


def test_patching_identical_inputs_changes_nothing(case):
    m, toks = case
    sites = ["embed"] + [(l, i) for l, w in enumerate(m.layers) for i in range(w.n_heads)]
    sites += [(0, 0, "q"), (m.n_layers - 1, 0, "k"), (0, m.layers[0].n_heads - 1, "v")]
    np.testing.assert_allclose(patch(m, toks, toks, sites), m.forward(toks), atol=1e-10)


def test_patching_every_site_restores_the_clean_logits(case):
    m, clean = case
    corrupt = np.random.default_rng(7).permutation(clean)
    heads = [(l, i) for l, w in enumerate(m.layers) for i in range(w.n_heads)]
    want = m.forward(clean)
    np.testing.assert_allclose(patch(m, clean, corrupt, ["embed"] + heads), want, atol=1e-10)
    # the embedding and every head's three inputs: the writes are then recomputed, and come out clean
    inputs = ["embed"] + [h + (c,) for h in heads for c in "qkv"]
    np.testing.assert_allclose(patch(m, clean, corrupt, inputs), want, atol=1e-10)
    np.testing.assert_allclose(patch(m, clean, corrupt, []), m.forward(corrupt), atol=1e-12)


def test_patching_a_head_write_by_brute_force():
    m = load("induction")
    rng = np.random.default_rng(3)
    clean = np.concatenate([[50], rng.integers(0, 50, 10)])
    corrupt = np.concatenate([[50], rng.integers(0, 50, 10)])
    # a last-layer head's write: logits = corrupt logits - corrupt write + clean write, at the patched positions
    pos = [3, 7]
    got = patch(m, clean, corrupt, [(1, 2)], positions=pos)
    tc, tk = m.trace(clean), m.trace(corrupt)
    want = tk.logits.copy()
    want[pos] += (tc.writes[1][2, pos] - tk.writes[1][2, pos]) @ m.W_U
    np.testing.assert_allclose(got, want, atol=1e-10)
    # a layer-0 head's values at every position: its pattern stays corrupt, its values clean
    got = patch(m, clean, corrupt, [(0, 1, "v")])
    w = m.layers[0]
    write = tk.attention_weights[0][1] @ (tc.embedding @ w.per_head.W_V[1]) @ w.per_head.W_O[1]
    x = tk.embedding + tk.writes[0].sum(0) - tk.writes[0][1] + write  # the stream layer 1 reads
    Wts = m.layers[1].per_head
    y = x.copy()
    T = len(clean)
    for i in range(m.layers[1].n_heads):
        S = (x @ Wts.W_Q[i]) @ (x @ Wts.W_K[i]).T / np.sqrt(m.layers[1].d_head)
        S = np.where(np.tri(T, dtype=bool), S, -np.inf)
        A = np.exp(S - S.max(1, keepdims=True))
        A /= A.sum(1, keepdims=True)
        y = y + A @ x @ Wts.W_V[i] @ Wts.W_O[i]
    assert not np.allclose(m.forward(corrupt), y @ m.W_U)
    np.testing.assert_allclose(got, y @ m.W_U, atol=1e-10)


@pytest.mark.parametrize("name", ["induction", "toy3_smear"])
def test_path_patching_agrees_with_paths_trace(name):
    m = toy(smear=[np.array([0.3, 1.0]), np.array([0.7, 0.1]), np.array([0.5, 0.9])]) if name == "toy3_smear" \
        else load(name)
    rng = np.random.default_rng(5)
    T = min(m.n_ctx, 12)
    corrupt = rng.integers(0, m.vocab, size=(4, T))
    clean_one = rng.integers(0, m.vocab, size=T)
    clean = np.repeat(clean_one[None], 4, axis=0)  # every corrupt row patched from the same clean sequence
    edges = [Edge((0, 1), (m.n_layers - 1, 0), "k"), Edge((0, 0), "logits"), Edge((0, 1), (1, 1), "qv")]
    want = paths.forward(m, corrupt, edges, how="mean", reference=clean)
    np.testing.assert_allclose(patch(m, clean, corrupt, edges), want, atol=1e-10)
    # identical clean and corrupt: nothing changes
    np.testing.assert_allclose(patch(m, corrupt, corrupt, edges), m.forward(corrupt), atol=1e-10)


def test_path_patching_every_edge_of_a_sender_is_activation_patching_its_write():
    m = load("induction")
    rng = np.random.default_rng(6)
    clean, corrupt = rng.integers(0, 50, size=(2, 3, 15))
    got = patch(m, clean, corrupt, paths.residual(m, [(0, 2)]))
    np.testing.assert_allclose(got, patch(m, clean, corrupt, [(0, 2)]), atol=1e-10)
    assert not np.allclose(got, m.forward(corrupt))


def test_path_patching_into_the_logits_by_brute_force():
    m = toy()
    rng = np.random.default_rng(8)
    clean, corrupt = rng.integers(0, m.vocab, size=(2, 10))
    tc, tk = m.trace(clean), m.trace(corrupt)
    got = patch(m, clean, corrupt, [Edge((1, 0), "logits")])
    np.testing.assert_allclose(got, tk.logits + (tc.writes[1][0] - tk.writes[1][0]) @ m.W_U, atol=1e-10)


def test_attribution_table_and_errors():
    a = Attribution(["a", "b", "c"], [1.0, -3.0, 0.5])
    lines = a.table(top=2).splitlines()
    assert [l.split()[0] for l in lines] == ["term", "b", "a", "(1", "total"]
    assert lines[-1].split()[-1] == "-1.500"
    assert np.isclose(a.share("b"), -3 / 4.5)
    with pytest.raises(ValueError, match="add up to"):
        Attribution(["a"], [1.0], total=2.0)
    with pytest.raises(KeyError, match="no term called 'z'"):
        a["z"]
    m = load("induction")
    toks = [50, 3, 7, 9]
    with pytest.raises(ValueError, match="key = 3 comes after query = 1"):
        qk_attribution(m, toks, 1, 0, 1, 3)
    with pytest.raises(ValueError, match="head = 4 is out of range"):
        qk_attribution(m, toks, 1, 4, 3, 1)
    with pytest.raises(ValueError, match="one sequence"):
        logit_attribution(m, [toks], 0, 1)
    with pytest.raises(ValueError, match="target = 51 is out of range"):
        logit_attribution(m, toks, 0, 51)
    with pytest.raises(ValueError, match=r"source has shape \(4,\) and base \(3,\)"):
        patch(m, toks, toks[:3], [(0, 1)])
    with pytest.raises(ValueError, match=r"site \(2, 0\) is not"):
        patch(m, toks, toks, [(2, 0)])
    with pytest.raises(ValueError, match=r"site \(0, 0, 'x'\) is not"):
        patch(m, toks, toks, [(0, 0, "x")])
    with pytest.raises(ValueError, match="takes neither"):
        patch(m, toks, toks, [Edge((0, 0), "logits")], positions=[1])
    with pytest.raises(ValueError, match="positions must be"):
        patch(m, toks, toks, [(0, 0)], positions=[9])


def test_plot_helper_draws_bars_and_a_heatmap():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    m = load("induction")
    toks = [50, 3, 7, 9, 3, 7]
    ax = logit_attribution(m, toks, 4, 7).plot(top=5)
    assert len(ax.patches) == 5 and ax.get_xlabel() == "contribution to the logit"
    ax = qk_attribution(m, toks, 1, 0, 4, 2).plot()
    assert ax.images[0].get_array().shape == (6, 6)
    plt.close("all")


def test_attribution_graph_edges_are_exact():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attnlib.attribution import attribution_graph, graph_table, qk_contrast
    from attnlib.plots import plot_graph
    m = load("induction")
    rng = np.random.default_rng(0)
    seg = rng.choice(50, size=12, replace=False)
    toks = np.concatenate([[50], seg, seg])  # (25,)
    t, k = 18, 7  # the second copy of seg[5] looks at seg[6] after the first
    target = int(toks[t + 1])
    la = logit_attribution(m, toks, t, target, centred=True)
    qk = qk_contrast(m, toks, 1, 0, t, k)
    best = qk.key_side().terms()[0][0]
    assert best.startswith("L0H")
    for top in (None, 3):
        links = attribution_graph(m, toks, t, target, 1, 0, k, top=top)
        into = {}
        for e in links:
            into[e.target] = into.get(e.target, 0.0) + e.value
        by_term = {(n.term, n.position): v for n, v in into.items()}
        # every node's inputs (the left-out edges as one "(rest)" edge) add up to its value
        assert np.isclose(by_term[f"logit {m.token_names[target]}", t], la.total, atol=1e-10)
        assert np.isclose(by_term["L1H0", t], la["L1H0"], atol=1e-10)  # the OV hop: the head's term of the logit
        assert np.isclose(by_term["query side L1H0", t], qk.total, atol=1e-10)
        assert np.isclose(by_term["key side L1H0", k], qk.total, atol=1e-10)
        assert np.isclose(by_term[best, k], qk.key_side()[best], atol=1e-10)
        assert all(e.unit == ("logit" if e.target.term.startswith(("logit", "L1H0")) else "contrast") for e in links)
        assert (top is None) == all(e.source.term != "(rest)" for e in links)
    # the centred logit is the logit minus the position's mean logit
    logits = m.forward(toks)[t]
    assert np.isclose(la.total, logits[target] - logits.mean(), atol=1e-10)
    text = graph_table(links)
    assert text.splitlines()[0].split() == ["from", "to", "value", "unit"]
    assert len(text.splitlines()) == 1 + len(links) + len({e.target for e in links})  # one sum per node
    ax = plot_graph(links, token_names=m.token_names, tokens=toks)
    assert len(ax.texts) > len(links) - 5
    plt.close("all")


def test_the_graph_labels_an_embedding_by_the_token_at_its_position():
    """An embedding node at position p shows the token at p, not the vocabulary's p-th token."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attnlib.attribution import Link, Node
    from attnlib.plots import plot_graph
    m = load("induction")
    toks = np.array([50, 3, 7, 9, 3, 7])
    links = [Link(Node("embed", 1, 0.0), Node("L0H2", 2, 1.0), 1.0, "contrast"),
             Link(Node("embed", 4, 0.0), Node("logit", 4, 3.0), 2.0, "logit")]
    ax = plot_graph(links, token_names=m.token_names, tokens=toks)
    labels = [t.get_text() for t in ax.texts if t.get_text().startswith("embed")]
    assert sorted(labels) == [f"embed\n{m.token_names[3]!r}\n@1", f"embed\n{m.token_names[3]!r}\n@4"]
    assert m.token_names[1] != m.token_names[3]  # a lookup by position would have shown another token
    with pytest.raises(ValueError, match="token_names and tokens"):
        plot_graph(links, token_names=m.token_names)
    plt.close("all")


@pytest.mark.parametrize("name", ["induction", "plays_2l_spans"])
def test_a_centred_split_is_the_split_minus_its_mean_over_the_vocabulary(name):
    m = load(name)
    toks = sequence(m, 12, seed=3)
    plain = np.stack([logit_attribution(m, toks, 9, v).values for v in range(m.vocab)])  # (vocab, n_terms)
    paths_ = np.stack([path_attribution(m, toks, 9, v).values for v in range(m.vocab)])
    for v in (0, 5):
        c = logit_attribution(m, toks, 9, v, centred=True)
        assert np.allclose(c.values, plain[v] - plain.mean(0), atol=1e-10) and c.what == "centred logit"
        p = path_attribution(m, toks, 9, v, centred=True)
        assert np.allclose(p.values, paths_[v] - paths_.mean(0), atol=1e-10)
        logits = m.forward(toks)[9]
        assert np.isclose(p.total, logits[v] - logits.mean(), atol=1e-10)


@pytest.mark.parametrize("name", ["induction", "plays_2l_spans", "toy3_smear"])
def test_qk_contrast_is_the_attribution_minus_its_mean_over_the_other_keys(name):
    from attnlib.attribution import qk_contrast
    m = toy(smear=[np.array([0.3, 1.0]), np.array([0.7, 0.1]), np.array([0.5, 0.9])]) if name == "toy3_smear" \
        else load(name)
    toks = sequence(m, 10, seed=4)
    q, k, layer = 8, 3, m.n_layers - 1
    each = np.stack([qk_attribution(m, toks, layer, 1, q, j).values for j in range(q + 1)])
    c = qk_contrast(m, toks, layer, 1, q, k)
    np.testing.assert_allclose(c.values, each[k] - np.delete(each, k, 0).mean(0), atol=1e-10)
    S = brute_scores(m, toks, layer)[1, q, :q + 1]
    assert abs(c.total - (S[k] - np.delete(S, k).mean())) < 1e-10
    with pytest.raises(ValueError, match="needs another key"):
        qk_contrast(m, toks, layer, 1, 0, 0)


def test_the_graph_s_edges_and_values_keep_clear_of_the_boxes():
    """No edge passes through a node it does not join, and no value's label covers a node or another label."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attnlib import incontext
    from attnlib.attribution import attribution_graph
    from attnlib.plots import plot_graph
    m = load("plays_2l_spans")
    seqs = incontext.repeated_random(m, n=1, occurrences=2, seed=16)
    half = (seqs.shape[1] - 1) // 2
    q = 1 + half + half // 2
    links = attribution_graph(m, seqs[0], q, int(seqs[0, q + 1]), 1, 0, q - half + 1, top=3)
    ax = plot_graph(links, token_names=m.token_names, tokens=seqs[0])
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    nodes = [t for t in ax.texts if "@" in t.get_text()]
    values = [t for t in ax.texts if t.get_text()[:1] in "+-" and t.get_text() != ""]
    assert len(values) == sum(e.source.term != "(rest)" for e in links)
    node_box = {t.get_text(): t.get_bbox_patch().get_window_extent(renderer) for t in nodes}
    value_box = [t.get_bbox_patch().get_window_extent(renderer) for t in values]
    for i, v in enumerate(value_box):
        assert not any(v.overlaps(b) for b in node_box.values()), f"{values[i].get_text()} covers a node"
        assert not any(v.overlaps(w) for w in value_box[:i]), f"{values[i].get_text()} covers another value"
    arrows = [t.arrow_patch for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == len(values)
    for arrow in arrows:
        points = arrow.get_path().interpolated(60).vertices  # display coordinates
        points = points[4:-8]  # not the ends, where it leaves its source and enters its target (the head)
        inside = [name for name, b in node_box.items()
                  if any(b.contains(x, y) for x, y in points)]
        assert not inside, f"an edge passes through {inside}"
    plt.close("all")
