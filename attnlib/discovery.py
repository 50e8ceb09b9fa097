"""Circuit discovery: which edges between heads carry a behaviour (chapter 17).

A *circuit* is a set of edges of the model's computational graph: a
sender head's write read by a later head's queries, keys or values, or by
the unembedding (:class:`attnlib.paths.Edge`; :func:`all_edges` lists
them). An edge is *noised* by taking the sender's write, in that one
receiver's input only, from a **corrupt** run instead of the **clean** one
(path patching, :func:`attnlib.attribution.patch`), and its effect is what
that does to a metric ``(direction * logits).sum()``. Three ways to find the
edges that matter:

* :func:`edge_effects`: every edge noised alone, exactly (one forward pass each);
* :func:`eap`: edge attribution patching (Syed et al., 2023): every edge's
  effect to first order, from one backward pass at the clean run;
* :func:`acdc`: automatic circuit discovery (Conmy et al., 2023): from the
  full graph, greedily remove every edge whose removal changes the metric
  by less than a threshold, visiting receivers from the logits back.

Their cost is counted in forward and backward passes over the batch:
``with counting() as cost: ...`` then ``cost.forward``, ``cost.backward``.

Examples
--------
>>> from attnlib.model import load
>>> m = load("induction")
>>> len(all_edges(m))   # the input: 8 x 3 into the heads and the logits; each layer-0 head: 4 x 3 and the logits
81
"""
from __future__ import annotations

import numbers

import numpy as np

from . import attribution, backward
from .model import Cost, Model, counting  # noqa: F401  (discovery.counting: the methods' cost)
from .objectives import Linear, Metric
from .paths import INPUTS, Edge


def all_edges(model: Model, embed: bool = True) -> list:
    """Every edge of the model's graph: the input and each head to each later head's q, k, v, and to the logits.

    The input (``"embed"``: the token and position embeddings together) is a
    sender, as in the graphs of Conmy et al. (ACDC), Syed et al. (EAP) and
    auto-circuit; ``embed=False`` gives the graph between heads only. An edge
    into a head names one of its inputs.

    Returns
    -------
    list of Edge
        In order of sender (the input first), then receiver (``"logits"`` last), then ``q, k, v``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> all_edges(load("induction"))[:2]
    [Edge(sender='embed', receiver=(0, 0), via='q'), Edge(sender='embed', receiver=(0, 0), via='k')]
    >>> len(all_edges(load("induction"))), len(all_edges(load("induction"), embed=False))
    (81, 56)
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be an attnlib Model, got {type(model).__name__}")
    senders = (["embed"] if embed else []) + [(l, h) for l, w in enumerate(model.layers) for h in range(w.n_heads)]
    out = []
    for s in senders:
        first = 0 if s == "embed" else s[0] + 1
        out += [Edge(s, (r, j), c) for r in range(first, model.n_layers)
                for j in range(model.layers[r].n_heads) for c in INPUTS]
        out.append(Edge(s, "logits"))
    return out


def _edges_of(model, edges) -> list:
    """``edges``, or the whole graph (:func:`all_edges`) for None."""
    return all_edges(model) if edges is None else list(edges)


def _layer(sender) -> int:
    """The layer a sender writes from: -1 for the input."""
    return -1 if isinstance(sender, str) else sender[0]


class MeanAblation:
    """Mean ablation as the corruption: a noised edge carries its sender's mean write over ``reference``.

    Pass it as ``corrupt`` to :func:`edge_effects` or :func:`acdc`: each
    noised edge then carries, in its receiver's input, the sender's write
    averaged over the ``reference`` sequences at each position, instead of
    its write in a paired corrupt run (:func:`attnlib.paths.trace` with
    ``how="mean"`` does the same for path cuts). The mean keeps what a write
    has in common across sequences and takes out only what depends on this
    one.

    Parameters
    ----------
    reference : (n, T) array_like of int
        Sequences as long as the clean ones.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean = np.array([[50, 11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16]])
    >>> ref = np.random.default_rng(0).integers(0, 50, (8, 13)); ref[:, 0] = 50
    >>> d = np.zeros((1, 13, m.vocab)); d[0, 9, 14] = 1.0
    >>> fx = edge_effects(m, clean, MeanAblation(ref), d)
    >>> round(fx[Edge((0, 2), (1, 1), "k")], 2) < 0
    True
    """

    def __init__(self, reference):
        self.reference = reference

    def __repr__(self) -> str:
        return f"MeanAblation(<{np.shape(self.reference)} reference>)"


class _Means:
    """A stand-in for the corrupt run's trace: each site's mean over the reference run, as wide as the clean batch."""

    def __init__(self, cache, batch: tuple):
        self._cache, self._batch = cache, batch

    @property
    def cache(self):
        return self

    def __getitem__(self, site) -> np.ndarray:
        mean = self._cache[site].mean(axis=0)  # (T, ...)
        return np.broadcast_to(mean, self._batch + mean.shape)


class _Runs:
    """The clean and corrupt runs of one problem, and the metric of the clean run with edges noised."""

    def __init__(self, model, clean, corrupt, direction, method: str = ""):
        if not isinstance(model, Model):
            raise TypeError(f"model must be an attnlib Model, got {type(model).__name__}")
        self.model = model
        self.clean = model._tokens(clean)
        self.mean = isinstance(corrupt, MeanAblation)
        if self.mean:
            if method:
                raise ValueError(f"{method} needs a paired corrupt run; mean ablation (MeanAblation) is for"
                                 " edge_effects and acdc")
            self.reference = model._tokens(corrupt.reference)
            if self.reference.ndim != 2 or self.reference.shape[1] != self.clean.shape[-1]:
                raise ValueError(f"MeanAblation's reference must be (n, T) sequences with T = {self.clean.shape[-1]}"
                                 f" as the clean ones, got shape {self.reference.shape}")
            self.corrupt = self.clean  # no corrupt tokens: the means stand in for the corrupt run's writes
        else:
            self.corrupt = model._tokens(corrupt)
            if self.clean.shape != self.corrupt.shape:
                raise ValueError(f"clean has shape {self.clean.shape} and corrupt {self.corrupt.shape}: they must"
                                 " match (row i of one is noised from row i of the other)")
        self.direction = backward.check_direction(model, self.clean, direction)
        self.metric = self.direction if isinstance(self.direction, Metric) else Linear(self.direction)

    def traces(self):
        self.clean_trace = self.model.trace(self.clean)
        if self.mean:
            self.corrupt_trace = _Means(self.model.run(self.reference).cache, self.clean.shape[:-1])
        else:
            self.corrupt_trace = self.model.run(self.corrupt)
        self.base = self.metric_of(self.clean_trace.logits)

    def metric_of(self, logits) -> float:
        return self.metric.value(logits)

    def noised(self, edges) -> float:
        """The metric of the clean run with ``edges`` noised from the corrupt run (one forward pass)."""
        logits = attribution._path_patch(self.model, self.corrupt, self.clean, list(edges),
                                         clean_trace=self.corrupt_trace)
        return self.metric_of(logits)


def _write(trace, sender) -> np.ndarray:
    return trace.cache[sender]  # (..., T, d_model): a head's write, or the embedding


def edge_effects(model: Model, clean, corrupt, direction, edges=None) -> dict:
    """Each edge's exact effect on the metric, noised alone from the clean run.

    For each edge of :func:`all_edges`, the sender's write in that
    receiver's input (or in what the unembedding reads) is taken from the
    corrupt run, everything downstream is recomputed, and the change in
    ``(direction * logits).sum()`` from the clean run is recorded.

    Parameters
    ----------
    model : Model
    clean : (..., T) array_like of int
    corrupt : (..., T) array_like of int, or MeanAblation
        The same shape as ``clean``, batch rows paired; or :class:`MeanAblation`.
    direction : (..., T, vocab) array_like, or Metric
        The metric's weights on the logits, or a :class:`attnlib.objectives.Metric`.
    edges : list of Edge, optional
        The graph (default :func:`all_edges`: the input and every head).

    Returns
    -------
    dict of Edge to float
        ``metric(noised) - metric(clean)``; one forward pass per edge.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean = np.array([[50, 11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16]])
    >>> corrupt = clean.copy(); corrupt[0, 3] = 30       # the first 13 replaced
    >>> d = np.zeros((1, 13, m.vocab)); d[0, 9, 14] = 1.0  # the logit of 14 after the second 13
    >>> fx = edge_effects(m, clean, corrupt, d)
    >>> round(fx[Edge((0, 2), (1, 1), "k")], 2), round(fx[Edge((0, 3), (1, 1), "k")], 2)
    (-0.64, 0.0)
    """
    runs = _Runs(model, clean, corrupt, direction)
    runs.traces()
    return {e: runs.noised([e]) - runs.base for e in _edges_of(model, edges)}


def eap(model: Model, clean, corrupt, direction, edges=None) -> dict:
    """Edge attribution patching (Syed et al., 2023): each edge's effect to first order, at the clean run.

    The estimate for an edge is ``g · (w_corrupt - w_clean)``: the gradient
    of the metric with respect to the receiver's input (exact,
    :func:`attnlib.backward.gradients` at the clean run), dotted with the
    change the noise makes to the sender's write. The logits are linear in
    the final stream, so for edges into the logits the estimate *is*
    :func:`edge_effects`' value; into a head's queries or keys it crosses a
    softmax and is only first-order. One forward and one backward pass at the
    clean run, and one forward pass at the corrupt run, for every edge at once.

    Parameters
    ----------
    model : Model
    clean, corrupt : (..., T) array_like of int
    direction : (..., T, vocab) array_like, or Metric
    edges : list of Edge, optional
        The graph (default :func:`all_edges`).

    Returns
    -------
    dict of Edge to float

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean = np.array([[50, 11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16]])
    >>> corrupt = clean.copy(); corrupt[0, 3] = 30       # the first 13 replaced
    >>> d = np.zeros((1, 13, m.vocab)); d[0, 9, 14] = 1.0  # the logit of 14 after the second 13
    >>> est, fx = eap(m, clean, corrupt, d), edge_effects(m, clean, corrupt, d)
    >>> e, k = Edge((1, 1), "logits"), Edge((0, 2), (1, 1), "k")
    >>> bool(np.isclose(est[e], fx[e])), round(est[k], 2), round(fx[k], 2)   # a saturated softmax: far off
    (True, -8.34, -0.64)
    """
    runs = _Runs(model, clean, corrupt, direction, "eap")
    g = backward.gradients(model, runs.clean, runs.direction)
    corrupt_trace = model.run(runs.corrupt)
    out = {}
    for e in _edges_of(model, edges):
        change = _write(corrupt_trace, e.sender) - _write(g.trace, e.sender)  # (..., T, d_model)
        if e.receiver == "logits":
            grad = g.stream[-1]
        else:
            grad = g.inputs[e.receiver[0]][..., INPUTS.index(e.via), e.receiver[1], :, :]
        out[e] = float((grad * change).sum())
    return out


def eap_ig(model: Model, clean, corrupt, direction, steps: int = 5, edges=None) -> dict:
    """EAP with integrated gradients (Hanna et al., 2024): the gradient averaged along the way to the corrupt input.

    EAP takes the gradient at the clean run only, where a saturated softmax
    hides what a larger change would do. EAP-IG moves the *input*
    (the embedding) in ``steps`` equal steps from the clean run's to the
    corrupt run's, takes the gradient with respect to every receiver's input
    at the middle of each step, and averages them (a midpoint Riemann sum of
    the integral); each edge's score is that average dotted with the change
    the noise makes to its sender's write, as :func:`eap` does. For the
    input's own edges the path is a straight line, so their scores add up to
    the whole change ``metric(corrupt) - metric(clean)`` as ``steps`` grows
    (integrated gradients' completeness); for a head's edges the path its
    write takes is curved, and few steps can overshoot.

    Parameters
    ----------
    model : Model
    clean, corrupt : (..., T) array_like of int
    direction : (..., T, vocab) array_like, or Metric
    steps : int
        Points of the integral (one forward and one backward pass each).
    edges : list of Edge, optional
        The graph (default :func:`all_edges`).

    Returns
    -------
    dict of Edge to float

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean = np.array([[50, 11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16]])
    >>> corrupt = clean.copy(); corrupt[0, 3] = 30
    >>> d = np.zeros((1, 13, m.vocab)); d[0, 9, 14] = 1.0
    >>> k = Edge((0, 2), (1, 1), "k")
    >>> [round(eap_ig(m, clean, corrupt, d, steps, edges=[k])[k], 2) for steps in (2, 5, 100)]
    [-0.1, -0.42, -0.58]
    >>> round(eap(m, clean, corrupt, d, edges=[k])[k], 2), round(edge_effects(m, clean, corrupt, d, edges=[k])[k], 2)
    (-8.34, -0.64)
    """
    if not isinstance(steps, numbers.Integral) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a whole number >= 1, got {steps!r}")
    runs = _Runs(model, clean, corrupt, direction, "eap_ig")
    clean_trace, corrupt_trace = model.run(runs.clean), model.run(runs.corrupt)
    start, end = clean_trace.cache["embed"], corrupt_trace.cache["embed"]
    inputs, final = [0.0] * model.n_layers, 0.0  # per layer (..., 3, n_heads, T, d_model); (..., T, d_model)
    for k in range(steps):
        alpha = (k + 0.5) / steps  # the middle of step k
        g = backward.gradients(model, runs.clean, runs.direction,
                               edits={"embed": start + alpha * (end - start)})
        inputs = [a + b / steps for a, b in zip(inputs, g.inputs)]
        final = final + g.stream[-1] / steps
    out = {}
    for e in _edges_of(model, edges):
        change = _write(corrupt_trace, e.sender) - _write(clean_trace, e.sender)  # (..., T, d_model)
        if e.receiver == "logits":
            grad = final
        else:
            grad = inputs[e.receiver[0]][..., INPUTS.index(e.via), e.receiver[1], :, :]
        out[e] = float((grad * change).sum())
    return out


def acdc(model: Model, clean, corrupt, direction, threshold: float, test: str = "abs", edges=None) -> list:
    """Automatic circuit discovery (Conmy et al., 2023) with exact path patching.

    Start from the full graph (``edges``, nothing noised). Visit the
    receivers from the logits back (the logits, then the last layer's heads,
    ...; each head's ``q``, ``k``, ``v`` in turn), and for each incoming edge
    (latest sender first, the input last) noise it on top of the edges
    already removed, and compare the metric with its value before this edge:
    the edge stays removed if the change passes ``test``, else it is put back.
    One forward pass per edge tried.

    The test is ACDC's: ``"signed"`` removes an edge when the metric rises by
    less than ``threshold`` (a fall always passes); that is the paper's
    default (``abs_value_threshold=False``), meant for a metric that grows as
    the circuit gets worse, such as the KL divergence from the clean run
    (:class:`attnlib.objectives.KL`). ``"abs"`` removes it when the metric
    moves by less than ``threshold`` either way (``abs_value_threshold=True``),
    the test for a metric such as a logit, which noise can move up or down.
    Neither bounds the total change: each step is compared with the last.

    Parameters
    ----------
    model : Model
    clean : (..., T) array_like of int
    corrupt : (..., T) array_like of int, or MeanAblation
        Paired with ``clean`` row by row; or :class:`MeanAblation`.
    direction : (..., T, vocab) array_like, or Metric
        The metric: ``(direction * logits).sum()``, or a :class:`attnlib.objectives.Metric`.
    threshold : float
        Non-negative: the smallest change that keeps an edge.
    test : {"abs", "signed"}
    edges : list of Edge, optional
        The graph to start from (default :func:`all_edges`).

    Returns
    -------
    list of Edge
        The kept edges, in the order of ``edges``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean = np.array([[50, 11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16]])
    >>> corrupt = clean.copy(); corrupt[0, 3] = 30       # the first 13 replaced
    >>> d = np.zeros((1, 13, m.vocab)); d[0, 9, 14] = 1.0  # the logit of 14 after the second 13
    >>> for e in acdc(m, clean, corrupt, d, threshold=0.5, edges=all_edges(m, embed=False)):
    ...     print(e)
    Edge(sender=(0, 0), receiver=(1, 1), via='q')
    Edge(sender=(1, 1), receiver='logits', via='qkv')
    """
    if (not isinstance(threshold, numbers.Real) or isinstance(threshold, bool) or not np.isfinite(threshold)
            or threshold < 0):
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
    if test not in ("abs", "signed"):
        raise ValueError(f"test must be 'abs' (|change| < threshold) or 'signed' (change < threshold), got {test!r}")
    runs = _Runs(model, clean, corrupt, direction)
    runs.traces()
    edges = _edges_of(model, edges)
    receivers = ["logits"] + [((l, j), c) for l in reversed(range(model.n_layers))
                              for j in range(model.layers[l].n_heads) for c in INPUTS]
    removed, current = [], runs.base
    for r in receivers:
        incoming = [e for e in edges if (e.receiver == "logits" if r == "logits" else (e.receiver, e.via) == r)]
        for e in sorted(incoming, key=lambda e: (-_layer(e.sender), 0 if isinstance(e.sender, str) else e.sender[1])):
            trial = runs.noised(removed + [e])
            change = trial - current
            if (abs(change) if test == "abs" else change) < threshold:
                removed.append(e)
                current = trial
    gone = set(removed)
    return [e for e in edges if e not in gone]


def faithfulness(model: Model, clean, corrupt, edges, direction, graph=None) -> float:
    """How much of the clean–corrupt gap a circuit keeps: its edges from the clean run, every other edge noised.

    ``(metric(circuit) - metric(corrupt)) / (metric(clean) - metric(corrupt))``:
    the circuit's run is the clean run with every edge of ``graph`` that is not
    in ``edges`` noised from the corrupt run (path patching, one forward pass).
    1 means the circuit alone carries the whole gap; 0 means it carries none.

    Parameters
    ----------
    model : Model
    clean, corrupt : (..., T) array_like of int
    edges : collection of Edge
        The circuit.
    direction : (..., T, vocab) array_like, or Metric
    graph : list of Edge, optional
        Every edge (default :func:`all_edges`).

    Returns
    -------
    float

    Examples
    --------
    >>> m, circuit = planted("k")
    >>> toks = np.array([[0, 3, 1, 4, 6, 3, 1, 4, 6]]); other = toks.copy(); other[0, 5:] = [5, 2, 7, 5]
    >>> d = np.zeros((1, 9, m.vocab)); d[0, 6, 4] = 1.0
    >>> round(faithfulness(m, toks, other, circuit, d, all_edges(m, embed=False)), 6)
    1.0
    """
    runs = _Runs(model, clean, corrupt, direction, "faithfulness")
    runs.traces()
    gap = runs.base - runs.metric_of(runs.corrupt_trace.logits)
    if gap == 0:
        raise ValueError("the clean and corrupt runs give the same metric: there is no gap to keep")
    keep = set(edges)
    noised = [e for e in _edges_of(model, graph) if e not in keep]
    return (runs.noised(noised) - runs.metric_of(runs.corrupt_trace.logits)) / gap


def roc(scores, truth) -> tuple:
    """The ROC curve of ranking edges by ``|score|`` against the true circuit, and its area.

    Every threshold at once: the false and true positive rates of keeping the
    ``k`` edges with the largest ``|score|``, for ``k = 0 .. n``; the area under
    the curve (AUC) is the chance that a true edge outranks a false one (ties
    count half). 0.5 is what a random ranking gives.

    Parameters
    ----------
    scores : dict of Edge to float
    truth : collection of Edge
        The true edges (all among ``scores``' keys).

    Returns
    -------
    fpr, tpr : (n + 1,) ndarray
    auc : float

    Examples
    --------
    >>> e = [Edge((0, 0), "logits"), Edge((0, 1), "logits"), Edge((0, 2), "logits")]
    >>> roc({e[0]: -3.0, e[1]: 0.5, e[2]: 1.0}, [e[0], e[2]])[2]
    1.0
    """
    truth = set(truth)
    missing = truth - set(scores)
    if missing:
        raise ValueError(f"true edges without a score: {sorted(map(str, missing))}")
    is_true = np.array([e in truth for e in scores])
    n_true, n_false = is_true.sum(), (~is_true).sum()
    if not n_true or not n_false:
        raise ValueError("an ROC curve needs at least one true and one false edge")
    magnitude = np.abs(np.array(list(scores.values()), dtype=float))
    order = np.argsort(-magnitude, kind="stable")
    tpr = np.concatenate([[0.0], np.cumsum(is_true[order]) / n_true])
    fpr = np.concatenate([[0.0], np.cumsum(~is_true[order]) / n_false])
    # the AUC by ranks (Mann-Whitney), so that tied scores count half whatever their order
    ranks = np.empty(len(magnitude))
    ranks[np.argsort(magnitude, kind="stable")] = np.arange(1, len(magnitude) + 1)
    for v in np.unique(magnitude):
        tied = magnitude == v
        ranks[tied] = ranks[tied].mean()
    auc = (ranks[is_true].sum() - n_true * (n_true + 1) / 2) / (n_true * n_false)
    return fpr, tpr, float(auc)


def planted(composition: str = "k", vocab: int = 8, n_ctx: int = 16, sharpness: float = 10.0,
            noise: float = 0.0, seed=0, embed: bool = False) -> tuple:
    """A two-layer induction model whose circuit is known by construction, beside distractor heads.

    The stream has orthogonal subspaces: the token (``vocab`` dimensions),
    the position (``n_ctx``), a *link* subspace where the circuit's layer-0
    head writes (``n_ctx``), an *output* subspace (``vocab``) that the
    unembedding reads, and four *distractor* dimensions nothing reads.

    * ``composition="k"``: L0H0 is a previous-token head (it attends from
      position ``p`` to ``p - 1`` and writes that token into the link
      subspace); L1H0's keys read the link subspace and its queries the
      token, so it attends to the token after an earlier occurrence of the current
      one and writes that token into the output subspace (K-composition).
    * ``composition="q"``: L0H0 is a duplicate-token head (it attends to an
      earlier occurrence of the current token and writes *that position* into the
      link subspace); L1H0's queries read the link subspace and look for the
      position after it (Q-composition).

    L0H1 and L1H1 are distractors: they attend and write, but into the
    distractor dimensions, which no later head and not the unembedding read.
    The circuit is exactly two edges: L0H0 into L1H0's keys (or queries), and
    L1H0 into the logits; every other edge of :func:`all_edges` has no effect.

    Parameters
    ----------
    composition : {"k", "q"}
    vocab : int
        Tokens (at least 2); token 0 is meant as a BOS token (``card["bos"]``),
        never repeated: position 0's previous-token head reads its own token.
    n_ctx : int
        The longest sequence.
    sharpness : float
        The score, after the model's ``1/√d_head``, that the circuit's heads
        give a matching key over the others (larger: closer to hard attention).
    noise : float
        The standard deviation of Gaussian noise added to every weight (the
        embeddings, each head's four matrices, the unembedding): with noise,
        every edge has some effect, and a method must rank the planted ones
        above edges that are small but not zero.
    seed : int or None
        For the noise.
    embed : bool
        Include the input's edges in the circuit: into L0H0 the inputs it reads
        (for ``"k"``: queries and keys the position, values the token; for
        ``"q"``: queries and keys both, values the position) and into L1H0 (for
        ``"k"``: queries and values the token; for ``"q"``: keys the position,
        values the token), as :func:`all_edges` has them by default.

    Returns
    -------
    model : Model
    circuit : list of Edge
        The planted edges, in the order of :func:`all_edges`: where the true
        circuit is defined (between heads; with ``embed``, from the input too).

    Examples
    --------
    >>> m, circuit = planted("k")
    >>> circuit
    [Edge(sender=(0, 0), receiver=(1, 0), via='k'), Edge(sender=(1, 0), receiver='logits', via='qkv')]
    >>> toks = np.array([0, 3, 1, 4, 6, 3, 1, 4, 6])   # BOS (token 0), then a span twice
    >>> m.forward(toks)[5:8].argmax(-1)        # after the second 3, 1, 4: what followed them before
    array([1, 4, 6])
    >>> noisy, _ = planted("k", noise=0.01, seed=1)
    >>> noisy.forward(toks)[5:8].argmax(-1)
    array([1, 4, 6])
    """
    from .weights import Weights

    if not isinstance(noise, numbers.Real) or isinstance(noise, bool) or not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number >= 0 (a standard deviation), got {noise!r}")
    if composition not in ("k", "q"):
        raise ValueError(f"composition must be 'k' (a previous-token head read by the keys) or 'q' (a"
                         f" duplicate-token head read by the queries), got {composition!r}")
    for name, v in (("vocab", vocab), ("n_ctx", n_ctx)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
    V, C, D = int(vocab), int(n_ctx), 4
    tok, pos, link, out, dis = (np.arange(V), V + np.arange(C), V + C + np.arange(C),
                                V + 2 * C + np.arange(V), V + 2 * C + V + np.arange(D))
    d_model, d_head = V + 2 * C + V + D, V + C
    b = float(sharpness) * np.sqrt(d_head)  # the model divides scores by √d_head

    def layer():
        return [np.zeros((2, d_model, d_head)) for _ in range(3)] + [np.zeros((2, d_head, d_model))]

    Q0, K0, V0, O0 = layer()
    Q1, K1, V1, O1 = layer()
    if composition == "k":
        Q0[0, pos[1:], np.arange(C - 1)] = b  # position p asks for position p - 1
        Q0[0, pos[0], 0] = b  # position 0 can only look at itself
        K0[0, pos, np.arange(C)] = 1.0
        V0[0, tok, np.arange(V)] = 1.0  # the token there ...
        O0[0, np.arange(V), link[:V]] = 1.0  # ... written into the link subspace
        Q1[0, tok, np.arange(V)] = b  # the current token ...
        K1[0, link[:V], np.arange(V)] = 1.0  # ... against the token before each key
    else:
        Q0[0, tok, np.arange(V)] = b  # the same token ...
        K0[0, tok, np.arange(V)] = 1.0
        Q0[0, pos, V + np.arange(C)] = -b  # ... somewhere else
        K0[0, pos, V + np.arange(C)] = 1.0
        V0[0, pos, np.arange(C)] = 1.0  # where that occurrence is ...
        O0[0, np.arange(C), link] = 1.0  # ... written into the link subspace
        Q1[0, link[:-1], 1 + np.arange(C - 1)] = b  # the position after the earlier occurrence ...
        K1[0, pos, np.arange(C)] = 1.0  # ... against each key's position
    V1[0, tok, np.arange(V)] = 1.0  # L1H0 copies the token it attends to ...
    O1[0, np.arange(V), out] = 5.0  # ... into the output subspace
    for Q, K, Vm, O in ((Q0, K0, V0, O0), (Q1, K1, V1, O1)):  # the distractors: busy, and unread
        Q[1, tok, np.arange(V)] = 1.0
        K[1, tok, np.arange(V)] = 1.0
        Vm[1, tok, np.arange(V)] = 1.0
        O[1, np.arange(D), dis] = 1.0
    layers = [Weights(*(np.concatenate(list(W), axis=1) for W in (Q, K, Vm)), np.concatenate(list(O), axis=0), 2)
              for Q, K, Vm, O in ((Q0, K0, V0, O0), (Q1, K1, V1, O1))]
    W_E = np.zeros((V, d_model))
    W_E[np.arange(V), tok] = 1.0
    W_pos = np.zeros((C, d_model))
    W_pos[np.arange(C), pos] = 1.0
    W_U = np.zeros((d_model, V))
    W_U[out, np.arange(V)] = 1.0
    card = {"name": f"planted_{composition}", "planted": composition, "bos": 0, "sharpness": float(sharpness),
            "noise": float(noise), "seed": seed}
    if noise:
        rng = np.random.default_rng(seed)
        W_E, W_pos, W_U = (W + rng.normal(0, noise, W.shape) for W in (W_E, W_pos, W_U))
        layers = [Weights(*(W + rng.normal(0, noise, W.shape) for W in (w.W_Q, w.W_K, w.W_V, w.W_O)), w.n_heads)
                  for w in layers]
    circuit = [Edge((0, 0), (1, 0), composition), Edge((1, 0), "logits")]
    if embed:
        reads = {"k": ({"q", "k", "v"}, {"q", "v"}), "q": ({"q", "k", "v"}, {"k", "v"})}[composition]
        circuit = [Edge("embed", (0, 0), c) for c in INPUTS if c in reads[0]] + [
            Edge("embed", (1, 0), c) for c in INPUTS if c in reads[1]] + circuit
    return Model(W_E, W_pos, W_U, layers, card), circuit


def score(found, truth) -> tuple:
    """Precision and recall of a set of edges against the true circuit.

    Parameters
    ----------
    found, truth : collection of Edge

    Returns
    -------
    precision : float
        The share of ``found`` that is in ``truth``; 0.0 for an empty ``found``
        (it found nothing right: precision 1 would reward a search for giving
        up). The same rule as exercise 10.5 and scikit-learn's ``zero_division=0``.
    recall : float
        The share of ``truth`` that is in ``found``.

    Examples
    --------
    >>> m, circuit = planted("k")
    >>> score(circuit[:1] + [Edge((0, 1), "logits")], circuit)
    (0.5, 0.5)
    """
    found, truth = set(found), set(truth)
    if not truth:
        raise ValueError("truth is empty: recall needs at least one true edge")
    hits = len(found & truth)
    return (hits / len(found) if found else 0.0), hits / len(truth)
