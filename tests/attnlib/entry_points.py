"""Every way of running a model that existed before ``Model.run``, on every shipped model, as named arrays.

``test_run.py`` compares these with ``data/entry_points_before.npz``, which this
file wrote at commit ec3a348 (the last one with the forward pass written four
times: ``Model.trace``, ``paths.trace``, ``attribution._run`` and
``attribution._path_patch``)::

    git worktree add /tmp/before ec3a348
    cp tests/attnlib/entry_points.py /tmp/before/tests/attnlib/
    cd /tmp/before && python tests/attnlib/entry_points.py /path/to/tests/attnlib/data/entry_points_before.npz

Only public functions (and the two private ones discovery uses) are called, with
the signatures they had then.
"""
import sys

import numpy as np

from attnlib import attribution, backward, discovery, paths

try:
    from attnlib import methods as first_order  # chapter 17's effect split and attribution patching
except ImportError:  # before they had a module of their own
    first_order = attribution
from attnlib.model import available, load
from attnlib.paths import Edge


def compute(name) -> dict:
    m = load(name)
    L, H = m.n_layers, [w.n_heads for w in m.layers]
    T = min(m.n_ctx, 14)
    rng = np.random.default_rng(sum(map(ord, name)))
    toks = rng.integers(0, m.vocab, (2, T))
    other = rng.integers(0, m.vocab, (2, T))
    if m.bos is not None:
        toks[:, 0] = other[:, 0] = m.bos
    out = {}
    tr = m.trace(toks)
    out["trace.logits"], out["trace.residual"] = tr.logits, tr.residual
    for l in range(L):
        out[f"trace.weights{l}"], out[f"trace.writes{l}"] = tr.attention_weights[l], tr.writes[l]
    ablate = [(L - 1, 0)] + ([(0, H[0] - 1)] if L > 1 else [])
    out["trace.ablate.logits"] = m.trace(toks, ablate=ablate).logits
    out["trace.ablate.clean.logits"] = m.trace(toks, ablate=ablate, clean=tr).logits
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    forced = {(0, 0): np.broadcast_to(uniform, (2, T, T))}
    if L > 1:
        edges = [Edge((0, 0), (1, 0), "k"), Edge((0, H[0] - 1), (L - 1, H[-1] - 1), "qv"), Edge((0, 1 % H[0]), "logits")]
        for how in ("zero", "mean"):
            p = paths.trace(m, toks, edges, how=how, attention=forced)
            out[f"paths.{how}.logits"], out[f"paths.{how}.residual"] = p.logits, p.residual
        out["paths.residual.logits"] = paths.forward(m, toks, paths.residual(m, [(0, 0)]))
        out["path_patch.logits"] = attribution.patch(m, other, toks, edges)
    else:
        out["paths.forced.logits"] = paths.forward(m, toks, attention=forced)
    sites = ["embed", (0, 0), (L - 1, H[-1] - 1, "q"), (L - 1, 0, "k"), (0, H[0] - 1, "v")]
    for i, s in enumerate(sites):
        out[f"patch{i}.logits"] = attribution.patch(m, other, toks, [s])
        out[f"patch{i}.positions.logits"] = attribution.patch(m, other, toks, [s], positions=[1, T - 2])
    direction = rng.standard_normal(toks.shape + (m.vocab,))
    out["attribution_patching"] = first_order.attribution_patching(m, other, toks, sites, direction)
    g = backward.gradients(m, toks, direction)
    out["gradients.stream"] = g.stream
    for l in range(L):
        out[f"gradients.keys{l}"], out[f"gradients.inputs{l}"] = g.keys[l], g.inputs[l]
    seq = toks[0]
    split = first_order.effect_split(m, seq, T - 2, int(seq[-1]), ablate)
    out["effect_split"] = split.values
    out["logit_attribution"] = attribution.logit_attribution(m, seq, T - 2, int(seq[-1])).values
    out["logit_attribution.centred"] = attribution.logit_attribution(m, seq, 3, int(seq[4]), centred=True).values
    out["path_attribution"] = attribution.path_attribution(m, seq, T - 2, int(seq[-1])).values
    out["qk_attribution"] = attribution.qk_attribution(m, seq, L - 1, 0, T - 1, T - 3).values
    out["qk_contrast"] = attribution.qk_contrast(m, seq, L - 1, 0, T - 1, T - 3).values
    if L > 1 and m.vocab < 100:
        d = np.zeros(toks.shape + (m.vocab,))
        d[:, -2, toks[:, -1]] = 1.0
        # the graph between heads (before the input was a node of it, it was the whole graph)
        graph = {"edges": discovery.all_edges(m, embed=False)} if "embed" in str(
            __import__("inspect").signature(discovery.all_edges)) else {}
        fx = discovery.edge_effects(m, toks, other, d, **graph)
        out["edge_effects"] = np.array(list(fx.values()))
        out["eap"] = np.array(list(discovery.eap(m, toks, other, d, **graph).values()))
        kept = discovery.acdc(m, toks, other, d, threshold=0.05, **graph)
        out["acdc"] = np.array([list(fx).index(e) for e in kept])
    return {f"{name}/{k}": _sample(np.asarray(v, dtype=float)) for k, v in out.items()}


def _sample(a, n=256):
    """A large array's entries at ``n`` fixed places (the file stays small; each entry is still compared)."""
    if a.size <= n:
        return a
    return a.ravel()[np.random.default_rng(a.size).choice(a.size, n, replace=False)]


if __name__ == "__main__":
    arrays = {}
    for name in available():
        arrays.update(compute(name))
    np.savez_compressed(sys.argv[1], **arrays)
    print(f"{len(arrays)} arrays from {len(available())} models, attnlib from {attribution.__file__}")
