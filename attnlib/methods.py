"""First-order methods and what they estimate: an effect split, attribution patching (chapter 17).

Chapter 16's attributions (:mod:`attnlib.attribution`) are exact: their terms
add up to the model's own number for this input. What they cannot say is what
*removing* a term would change, because later heads' attention moves with it.
:func:`effect_split` measures an ablation's effect and splits it into what
flows with the attention weights frozen and what flows through where later
heads look; :func:`attribution_patching` estimates every patch's effect at
once from one backward pass (:mod:`attnlib.backward`), and is exact only
where no softmax lies on the way.

Examples
--------
>>> from attnlib.model import load
>>> m = load("induction")
>>> effect_split(m, [50, 3, 7, 9, 3, 7, 9], 4, 7, [(0, 2)]).names
['frozen attention', 'through attention']
"""
from __future__ import annotations

import numbers

import numpy as np

from . import backward, paths, sites
from .attention import attention_weights
from .attribution import Attribution, _index, _run, _sequence, _sites
from .grader import answer_of
from .model import Model


def effect_split(model: Model, tokens, position: int, target: int, ablate, replacement: str = "zero",
                 reference=None) -> Attribution:
    """An ablation's effect on a logit, split into what flows through values and what through attention.

    Ablating the heads in ``ablate`` changes the logit of ``target``
    at ``position`` by ``effect = logit(ablated) - logit(clean)``. The
    removed writes reach the logit two ways: directly and through later
    heads' *values* (what those heads write), and through later heads'
    queries and keys (*where* those heads look). With every head's attention
    weights held at their values in the un-ablated run, only the first way is
    left, and the logit is then linear in the removed writes:

    * ``"frozen attention"``: ``logit(ablated, weights frozen) - logit(clean)``,
      what a path attribution (:func:`~attnlib.attribution.path_attribution`) of the removed heads sees;
    * ``"through attention"``: ``logit(ablated) - logit(ablated, weights frozen)``,
      the rest: what changes once later heads' attention weights move. It
      is not only the change of where they look: a later head's output is
      ``A V``, and ``(A + dA)(V + dV) - A V = A dV + dA V + dA dV``; the frozen
      part keeps ``A dV``, and the interaction ``dA dV`` (moved weights on
      changed values) falls in this part with ``dA V``.

    The two add up to the effect exactly (by construction; the
    :class:`Attribution` checks the sum against the two runs).

    Parameters
    ----------
    model : Model
    tokens : (T,) array_like of int
    position : int
        The position whose next-token logit is read (negative counts from the end).
    target : int
        The token whose logit is read.
    ablate : collection of (layer, head)
        The heads dropped from the residual stream (as ``Model.forward``'s ``ablate``).
    replacement : {"zero", "mean"}
        What takes an ablated head's write's place: zero, or its mean over the
        ``reference`` sequences at each position (mean ablation). Zero is off
        the model's distribution (no head ever writes zero), so some of a zero
        ablation's effect is the model's reaction to an input it never saw;
        the mean keeps what the write has in common across sequences and
        removes only what depends on this one. A single reference sequence
        makes it a resample ablation.
    reference : (n, T) array_like of int, optional
        For ``replacement="mean"``: the sequences to average over.

    Returns
    -------
    Attribution
        ``names`` ``["frozen attention", "through attention"]``; ``values.sum()``
        is the ablation's effect on the logit (``what == "effect"``).

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> toks = [50, 3, 7, 9, 3, 7, 9]
    >>> a = effect_split(m, toks, 4, 7, [(0, 2)])
    >>> a.names, bool(np.isclose(a.total, m.forward(toks, ablate=[(0, 2)])[4, 7] - m.forward(toks)[4, 7]))
    (['frozen attention', 'through attention'], True)
    """
    tokens = _sequence(model, tokens)
    t = _index(position, "position", len(tokens), "the sequence")
    target = _index(target, "target", model.vocab, "the vocabulary")
    heads = sorted(model._ablation(ablate))
    if replacement not in ("zero", "mean"):
        raise ValueError(f"replacement must be 'zero' or 'mean', got {replacement!r}")
    if (replacement == "mean") != (reference is not None):
        raise ValueError("replacement='mean' takes reference sequences to average over (and 'zero' takes none)")
    tr = model.trace(tokens)
    A = tr.attention_weights  # per layer (n_heads, T, T): those of the un-ablated run
    frozen = {(l, i): A[l][i] for l in range(model.n_layers) for i in range(model.layers[l].n_heads)}
    clean = tr.logits[t, target]
    cut = paths.residual(model, heads)  # every reader of the ablated heads
    how = {"how": replacement, "reference": reference}
    ablated = paths.forward(model, tokens, cut, **how)[t, target]
    held = paths.forward(model, tokens, cut, attention=frozen, **how)[t, target]
    return Attribution(["frozen attention", "through attention"], [held - clean, ablated - held],
                       total=ablated - clean, what="effect")


def _one_by_one(sites) -> list:
    """``sites`` as a list of single sites, as :func:`~attnlib.attribution.patch` reads one site or a list of them."""
    if isinstance(sites, (str, paths.Edge)) or (isinstance(sites, tuple) and sites
                                                 and isinstance(sites[0], numbers.Integral)):
        return [sites]
    return list(sites)


@answer_of("10_attribution_patching")
def attribution_patching(model: Model, clean, corrupt, sites, direction, positions=None) -> np.ndarray:
    """First-order estimates of what patching each site changes in ``(direction * logits).sum()``.

    Activation patching (:func:`~attnlib.attribution.patch`) runs the corrupt input once per site.
    Attribution patching (Nanda, 2023; Kramár et al., 2024) estimates every
    site's effect at once from one backward pass at the corrupt run: the
    metric's gradient with respect to the site's activation, dotted with
    the patch's change in it, ``g · (a_clean - a_corrupt)``. That is the
    exact derivative of the metric along the straight line from the
    corrupt activation to the clean one, at the corrupt end: exact when the
    metric is linear along it (a write read only by the unembedding), off
    when the line crosses a softmax that saturates. The gradient is exact
    (:func:`attnlib.backward.gradients`), so the only error is the
    linearisation's.

    Parameters
    ----------
    model : Model
    clean, corrupt : (..., T) array_like of int
        The same shape; batch rows are paired.
    sites : list
        As :func:`~attnlib.attribution.patch` takes them: ``"embed"``, ``(layer, head)``,
        ``(layer, head, "q" | "k" | "v")`` or a :class:`attnlib.paths.Edge`
        (the sender's write in the receiver's inputs ``via``); each is
        estimated alone.
    direction : (..., T, vocab) array_like
        The metric's weights on the logits, batch axes included.
    positions : sequence of int, optional
        Patch these positions only (not with edges).

    Returns
    -------
    (n_sites,) ndarray
        The estimate of ``metric(patch(model, clean, corrupt, [site], positions)) - metric(corrupt)``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean, corrupt = np.array([50, 3, 7, 3, 7]), np.array([50, 3, 7, 9, 8])
    >>> d = np.zeros((5, m.vocab)); d[3, 7] = 1.0
    >>> est = attribution_patching(m, clean, corrupt, [(1, 0), (1, 0, "q")], d)
    >>> est.shape
    (2,)
    """
    return _first_order(model, *_patches(model, clean, corrupt, sites, positions), direction)


def _patches(model, clean, corrupt, sites, positions) -> tuple:
    """The runs, the sites one by one (activation sites and edges) and the positions patched, checked.

    Returns ``clean, corrupt, parsed, keep``: ``keep`` a ``(T,)`` mask of the patched positions.
    """
    clean, corrupt = model._tokens(clean), model._tokens(corrupt)
    if clean.shape != corrupt.shape:
        raise ValueError(f"clean has shape {clean.shape} and corrupt {corrupt.shape}: they must match"
                         " (row i of one is patched into row i of the other)")
    parsed = [_sites(model, [s]) for s in _one_by_one(sites)]
    T = clean.shape[-1]
    keep = np.ones(T, bool)
    if positions is not None:
        positions = np.asarray(positions)
        if positions.dtype.kind not in "iu" or positions.ndim != 1 or not ((positions >= -T) & (positions < T)).all():
            raise ValueError(f"positions must be a list of integers in -{T} .. {T - 1}, got {positions!r}")
        if any(edges for _, edges in parsed):
            raise ValueError("path patching (paths.Edge sites) takes no positions")
        keep = np.zeros(T, bool)
        keep[positions] = True
    return clean, corrupt, parsed, keep


def _first_order(model, clean, corrupt, parsed, keep, direction, star=False) -> np.ndarray:
    """Attribution patching's estimates (AtP*'s, with ``star``: the softmax of query and key sites exact)."""
    g = backward.gradients(model, corrupt, direction)
    _, a_clean = _run(model, clean)
    a_corrupt = g.trace.cache  # the run the gradient was taken at
    grad_of = {"q": g.queries, "k": g.keys, "v": g.values}
    out = np.zeros(len(parsed))
    for n, (acts, edges) in enumerate(parsed):
        if acts:
            s = acts[0]
            if s == "embed":
                grad = g.stream[0]  # (..., T, d_model)
            elif len(s) == 2:
                grad = g.write(s[0])  # (..., T, d_model)
            else:
                grad = grad_of[s[2]][s[0]][..., s[1], :, :]  # (..., T, d_head)
            change = a_clean[s] - a_corrupt[s]
            if star and len(s) == 3 and s[2] in "qk":  # the head's softmax recomputed with the patched side
                l, h, side = s
                Q, K = a_corrupt[l, h, "q"], a_corrupt[l, h, "k"]  # (..., T, d_head)
                patched = np.where(keep[:, None], a_clean[s], a_corrupt[s])
                A = attention_weights(patched, K, causal=True) if side == "q" else \
                    attention_weights(Q, patched, causal=True)  # (..., T, T)
                out[n] = (g.weights[l][..., h, :, :] * (A - a_corrupt[l, h, "weights"])).sum()
                continue
        else:
            (sender, receiver, via), = paths._edges(model, edges)
            change = a_clean[sender] - a_corrupt[sender]
            if star and receiver != "logits" and via & {"q", "k"}:  # the receiver's softmax exact, its values not
                out[n] = _exact_softmax(model, g, a_corrupt, receiver, via, change) + sum(
                    (g.inputs[receiver[0]][..., 2, receiver[1], :, :] * change).sum() for c in via if c == "v")
                continue
            if receiver == "logits":
                grad = g.stream[-1]
            else:
                grad = sum(g.inputs[receiver[0]][..., paths.INPUTS.index(c), receiver[1], :, :] for c in sorted(via))
        out[n] = (grad * change)[..., keep, :].sum()
    return out


def _exact_softmax(model, g, base, receiver, via, change) -> float:
    """``g_A · (A' - A)`` for an edge into a head's queries and/or keys: ``A'`` the head's softmax recomputed
    with ``change`` (..., T, d_model) added to what those inputs read."""
    l, h = receiver
    w = model.layers[l].per_head
    Q, K = base[l, h, "q"], base[l, h, "k_raw"]  # (..., T, d_head)
    if "q" in via:
        Q = Q + change @ w.W_Q[h]
    if "k" in via:
        K = K + change @ w.W_K[h]
    if model.smear is not None:
        K = sites.smear(K[..., None, :, :], model.smear[l][h:h + 1])[..., 0, :, :]  # the keys as compared
    A = attention_weights(Q, K, causal=True)  # (..., T, T)
    return float((g.weights[l][..., h, :, :] * (A - base[l, h, "weights"])).sum())


@answer_of("10_attribution_patching")
def atp_star(model: Model, clean, corrupt, sites, direction, positions=None) -> np.ndarray:
    """AtP* (Kramár et al., 2024): attribution patching with each query and key site's softmax exact.

    Attribution patching linearises the metric along the patch; where the
    patch moves a head's queries or keys, the line crosses that head's
    softmax, and a saturated softmax makes the first-order estimate far off
    (its gradient vanishes where the weights are near 0 or 1). AtP* computes
    the head's attention weights exactly with the patched queries (or keys),
    ``A' = softmax(q' kᵀ / √d_head)``, and linearises only what follows:
    ``g_A · (A' - A)``, with ``g_A`` the metric's gradient with respect to
    the head's attention weights at the corrupt run. Every other site is
    estimated as :func:`attribution_patching` does. (Kramár et al.'s
    GradDrop, against cancellation across layers, is not part of this.)

    An edge (:class:`attnlib.paths.Edge`) into a head's queries or keys is
    treated the same way: the head's attention weights are recomputed
    exactly with the sender's change added to what those inputs read.

    Where the metric is linear in the head's attention weights (a head of the
    last layer, read by the unembedding through its values, with a linear
    metric), AtP* is exact for its query and key sites and the edges into
    them; a query or key site of an earlier head is exact for that head's
    softmax only, and the change it makes to later heads is still first order.

    Parameters
    ----------
    model, clean, corrupt, sites, direction, positions
        As :func:`attribution_patching`.

    Returns
    -------
    (n_sites,) ndarray

    Examples
    --------
    >>> from attnlib.attribution import patch
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean, corrupt = np.array([50, 3, 7, 3, 7]), np.array([50, 3, 7, 9, 8])
    >>> d = np.zeros((5, m.vocab)); d[3, 7] = 1.0
    >>> exact = (d * patch(m, clean, corrupt, [(1, 0, "k")])).sum() - (d * m.forward(corrupt)).sum()
    >>> bool(np.isclose(atp_star(m, clean, corrupt, [(1, 0, "k")], d)[0], exact))
    True
    """
    return _first_order(model, *_patches(model, clean, corrupt, sites, positions), direction, star=True)


def linearised_softmax(base, layer: int, head: int):
    """An edit of ``(layer, head, "weights")``: the head's softmax to first order around the ``base`` run.

    The attention weights become ``A0 + J (S - S0)``: ``A0`` and ``S0`` the
    base run's weights and scores, ``J`` the softmax's Jacobian there, row by
    row ``dA = A0 * (dS - sum(A0 * dS))``. Masked keys keep weight zero. With
    the run's scores equal to the base run's it returns ``A0`` unchanged.

    Parameters
    ----------
    base : sites.Cache
        The run the softmax is linearised around (``Model.run(tokens).cache``).
    layer, head : int

    Returns
    -------
    (site, edit)
        For :meth:`attnlib.model.Model.run`'s ``edits``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> tokens = np.array([50, 3, 7, 3, 7])
    >>> base = m.run(tokens).cache
    >>> bool(np.allclose(m.run(tokens, [linearised_softmax(base, 1, 0)]).logits, m.forward(tokens)))
    True
    """
    A0, S0 = base[layer, head, "weights"], base[layer, head, "scores"]  # (..., T, T)
    seen = np.isfinite(S0)

    def edit(site, value, cache):
        dS = np.where(seen, cache[layer, head, "scores"] - np.where(seen, S0, 0.0), 0.0)
        return A0 + A0 * (dS - (A0 * dS).sum(-1, keepdims=True))

    return (layer, head, "weights"), edit


def error_split(model: Model, clean, corrupt, site, direction) -> dict:
    """Where attribution patching's error for one site comes from, softmax by softmax.

    The site's exact effect is ``metric(patch(model, clean, corrupt, [site])) -
    metric(corrupt)`` (denoising) and its estimate is
    :func:`attribution_patching`'s. The estimate linearises every softmax the
    patch reaches, and drops products of changes (a moved attention weight
    times a changed value). Linearising one of those softmaxes at a time,
    around the corrupt run, with the others exact, gives that head's share of
    the error: the patched run's metric with that softmax alone linear,
    minus the exact one. With all of them linear at once, what is left
    between that run and the estimate is the products (``"products"``); what
    the heads' shares do not account for of the rest is their interaction
    (``"interaction"``). By construction::

        exact + sum(shares) + interaction + products == estimate

    Parameters
    ----------
    model : Model
    clean, corrupt : (..., T) array_like of int
        The same shape; batch rows are paired.
    site : str or tuple
        ``"embed"``, ``(layer, head)`` or ``(layer, head, "q" | "k" | "v")``, as
        :func:`~attnlib.attribution.patch` takes it.
    direction : (..., T, vocab) array_like
        The metric's weights on the logits.

    Returns
    -------
    dict
        ``"exact"``, ``"estimate"``, one share per head ``(layer, head)``
        whose softmax the patch reaches (the site's own head for its queries
        or keys, and every head of a later layer), ``"interaction"`` and
        ``"products"``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean, corrupt = np.array([50, 3, 7, 3, 7]), np.array([50, 3, 7, 9, 8])
    >>> d = np.zeros((5, m.vocab)); d[3, 7] = 1.0
    >>> split = error_split(m, clean, corrupt, (0, 2), d)
    >>> sorted(k for k in split if isinstance(k, tuple))
    [(1, 0), (1, 1), (1, 2), (1, 3)]
    >>> parts = sum(v for k, v in split.items() if k not in ("exact", "estimate"))
    >>> bool(np.isclose(split["exact"] + parts, split["estimate"]))
    True
    """
    clean, corrupt, parsed, _ = _patches(model, clean, corrupt, [site], None)
    (acts, edges), = parsed
    if edges or not acts:
        raise ValueError(f"error_split takes one activation site ('embed', (layer, head) or (layer, head, 'q' | 'k'"
                         f" | 'v')), got {site!r}")
    s = acts[0]
    direction = np.asarray(direction)
    source = model.run(clean).cache
    base = model.run(corrupt).cache
    put = (s, source[s])

    def metric(edits) -> float:
        return float((direction * model.run(corrupt, [put, *edits], cache=False).logits).sum())

    first = 0 if s == "embed" else s[0] + (len(s) == 2 or s[2] == "v")  # the first layer whose softmax moves
    heads = [(l, h) for l in range(first, len(model.layers)) for h in range(model.layers[l].n_heads)
             if l > first or s == "embed" or len(s) == 2 or s[2] == "v" or h == s[1]]
    exact = metric([])
    split = {"exact": exact - float((direction * base["logits"]).sum()),
             "estimate": float(attribution_patching(model, clean, corrupt, [site], direction)[0])}
    for lh in heads:
        split[lh] = metric([linearised_softmax(base, *lh)]) - exact
    linear = metric([linearised_softmax(base, *lh) for lh in heads]) - exact
    split["interaction"] = linear - sum(split[lh] for lh in heads)
    split["products"] = split["estimate"] - split["exact"] - linear
    return split
