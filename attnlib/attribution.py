"""Attribution: where a logit and an attention score come from, exactly (chapter 16).

The book's models have no LayerNorm and no MLP, so everything a reader of
the residual stream sees is a sum of terms: the token embedding, the
position embedding and each earlier head's write. A logit is linear in the
stream, so it splits exactly over those terms (:func:`logit_attribution`);
with the attention weights frozen at their values for this input, each head's write is
linear in what its values read, so the logit splits further over *paths*
(:func:`path_attribution`, the path expansion of Elhage et al., 2021, made
numeric for one input); and a head's score is bilinear in what its queries
and keys read, so it splits over pairs of a query-side and a key-side term
(:func:`qk_attribution`: ``W^P`` read term by term, as in Ameisen et al.'s
QK attributions, 2025). No gradient and no replacement model is involved:
each :class:`Attribution`'s values add up to the model's own number.

:func:`patch` is the experimental counterpart: run a *corrupt* input with
chosen activations taken from a *clean* one (activation patching), or with
one sender's write replaced in one receiver's input only (path patching,
through :mod:`attnlib.paths`).

Examples
--------
>>> from attnlib.model import load
>>> m = load("induction")
>>> toks = np.array([50, 3, 7, 9, 3, 7])
>>> a = logit_attribution(m, toks, 4, 7)
>>> bool(np.isclose(a.values.sum(), m.forward(toks)[4, 7]))
True
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ._deprecated import renamed_keywords
from .grader import answer_of
from .model import Model
from . import paths, sites

SIDES = "qkv"
"""A head's three inputs, as :func:`patch` names them."""


class Attribution:
    """Named terms whose values add up to one number (a logit, or a scaled score), or to one per position.

    Parameters
    ----------
    names : list of str
        One name per entry of the first axis of ``values``.
    values : (n,) or (n, m) array_like, with the ``over`` axes last
        The terms; a matrix for a query-by-key split (rows: query side).
    key_names : list of str, optional
        For a matrix, one name per column (the key side).
    total : float or array_like, optional
        What the terms add up to (one per entry of the ``over`` axes), computed
        independently and checked, so a wrong split cannot be built silently: to
        ``1e-8`` relative in float64, and to what the terms' dtype holds (about
        ``1e-5`` in float32) otherwise.
    what : str
        What the terms add up to ("logit", "score", ...).
    over : tuple of str, optional
        Names of trailing axes along which there are many splits at once (one
        per ``"position"``, ``"target"``, ``("query", "key")``); :meth:`at`
        picks one.

    Examples
    --------
    >>> a = Attribution(["x", "y"], [2.0, -0.5])
    >>> a.total, a["y"]
    (1.5, -0.5)
    >>> b = Attribution(["x", "y"], [[2.0, 1.0], [-0.5, 0.0]], total=[1.5, 1.0], over=("position",))
    >>> b.total, b.at(1).total
    (array([1.5, 1. ]), 1.0)
    """

    def __init__(self, names, values, key_names=None, total=None, what="logit", over=()):
        # the check's tolerance: what the least precise of the terms and the total holds
        eps = max([np.finfo(a.dtype).eps for a in map(np.asarray, (values, total)) if a.dtype.kind == "f"]
                  or [np.finfo(float).eps])
        values = np.asarray(values, dtype=float)
        names = [str(n) for n in names]
        self.over = tuple(over)
        n_terms = values.ndim - len(self.over)
        if n_terms not in (1, 2) or values.shape[0] != len(names):
            raise ValueError(f"values has shape {values.shape}: expected ({len(names)},) or ({len(names)}, m),"
                             f" one row per name" + (f", then the axes {self.over}" if self.over else ""))
        if n_terms == 2:
            if key_names is None or len(key_names) != values.shape[1]:
                raise ValueError(f"a matrix of values {values.shape} needs key_names, one per column")
            key_names = [str(n) for n in key_names]
        elif key_names is not None:
            raise ValueError("key_names is only for a matrix of values (query side × key side)")
        self.names, self.values, self.key_names, self.what = names, values, key_names, what
        self.values.setflags(write=False)
        if total is not None:
            sums = values.sum(axis=tuple(range(n_terms)))
            # what the terms' dtype holds: a sum of n terms is good to about n ε of their sizes
            scale = np.abs(values).sum(axis=tuple(range(n_terms))) + 1.0
            tol = max(1e-8, 16 * np.prod(values.shape[:n_terms]) * eps)
            bad = np.abs(sums - np.asarray(total, dtype=float)) > tol * scale
            if np.any(bad):
                where = tuple(int(i) for i in np.argwhere(np.atleast_1d(bad))[0]) if self.over else ()
                at = f" at {dict(zip(self.over, where))}" if self.over else ""
                raise ValueError(f"the terms add up to {np.asarray(sums)[where]!r}, not to the {what}"
                                 f" {np.asarray(total, dtype=float)[where]!r}{at}")

    def at(self, *index) -> "Attribution":
        """The split at one entry of the ``over`` axes (one position, one target, one query-key pair)."""
        if len(index) != len(self.over):
            raise ValueError(f"this attribution is over {self.over}: give one index for each, got {index}")
        values = self.values[(Ellipsis,) + tuple(index)]
        return Attribution(self.names, values, self.key_names, what=self.what)

    def _one(self, what):
        if self.over:
            raise ValueError(f"this attribution holds one split per {' and '.join(self.over)}: {what} one of"
                             f" them, .at({', '.join(self.over)})")

    @property
    def total(self):
        """The sum of the terms: the logit or the score (an array of them, over the ``over`` axes)."""
        if self.over:
            return self.values.sum(axis=tuple(range(self.values.ndim - len(self.over))))
        return float(self.values.sum())

    def __getitem__(self, name):
        """A term's value by name; ``(query_name, key_name)`` for a matrix (an array over the ``over`` axes)."""
        pick = (lambda v: v) if self.over else float
        if self.key_names is not None:
            if not (isinstance(name, tuple) and len(name) == 2 and name[0] in self.names
                    and name[1] in self.key_names):
                raise KeyError(f"a query × key attribution is indexed by (query term, key term), got {name!r};"
                               f" the terms are {self.names}")
            return pick(self.values[self.names.index(name[0]), self.key_names.index(name[1])])
        if name not in self.names:
            raise KeyError(f"no term called {name!r}: the terms are {self.names}")
        return pick(self.values[self.names.index(name)])

    def query_side(self) -> "Attribution":
        """A matrix's rows summed: how much each query-side term brings, whatever the key side."""
        self._one("sum")
        return Attribution(self.names, self.values.sum(axis=1), total=self.total, what=self.what)

    def key_side(self) -> "Attribution":
        """A matrix's columns summed: how much each key-side term brings, whatever the query side."""
        self._one("sum")
        return Attribution(self.key_names, self.values.sum(axis=0), total=self.total, what=self.what)

    def terms(self) -> list:
        """``(name, value)`` pairs, largest ``|value|`` first; names ``"query × key"`` for a matrix."""
        self._one("list the terms of")
        if self.key_names is None:
            pairs = list(zip(self.names, self.values))
        else:
            pairs = [(f"{q} × {k}", v) for q, row in zip(self.names, self.values) for k, v in zip(self.key_names, row)]
        return sorted(((n, float(v)) for n, v in pairs), key=lambda p: -abs(p[1]))

    def share(self, name) -> float:
        """A term's value as a fraction of the sum of ``|values|`` (how much of the total movement it is)."""
        self._one("share")
        return self[name] / float(np.abs(self.values).sum())

    def table(self, top: int | None = 10, digits: int = 3) -> str:
        """The terms as aligned text, largest ``|value|`` first, with their sum.

        Examples
        --------
        >>> print(Attribution(["x", "y"], [2.0, -0.5]).table())
        term   value
        x      2.000
        y     -0.500
        total  1.500
        """
        rows = self.terms()
        rest = rows[top:] if top is not None else []
        rows = rows[:top] if top is not None else rows
        if rest:
            rows.append((f"({len(rest)} others)", sum(v for _, v in rest)))
        rows.append(("total", self.total))
        width = max(len("term"), *(len(n) for n, _ in rows))
        cells = [f"{v:.{digits}f}" for _, v in rows]
        vw = max(len("value"), *(len(c) for c in cells))
        return "\n".join([f"{'term':<{width}}  {'value':>{vw}}"]
                         + [f"{n:<{width}}  {c:>{vw}}" for (n, _), c in zip(rows, cells)])

    def plot(self, ax=None, top: int | None = 12, vmax: float | None = None):
        """A bar per term (largest ``|value|`` first), or a heatmap for a query × key matrix.

        ``vmax`` fixes the heatmap's colour scale to ``[-vmax, vmax]`` (to compare two heatmaps).

        Returns
        -------
        matplotlib Axes
        """
        import matplotlib.pyplot as plt

        self._one("plot")
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.2))
        if self.key_names is None:
            rows = self.terms()[:top] if top is not None else self.terms()
            cmap = plt.get_cmap("viridis")
            ax.barh(range(len(rows)), [v for _, v in rows], color=[cmap(0.25 if v < 0 else 0.75) for _, v in rows])
            ax.set_yticks(range(len(rows)), [n for n, _ in rows])
            ax.invert_yaxis()
            ax.axvline(0, color="grey", lw=0.8)
            ax.set_xlabel(f"contribution to the {self.what}")
            ax.set_ylabel("term")
        else:
            lim = vmax if vmax is not None else (float(np.abs(self.values).max()) or 1.0)
            im = ax.imshow(self.values, cmap="cividis", vmin=-lim, vmax=lim)
            ax.set_xticks(range(len(self.key_names)), self.key_names, rotation=90)
            ax.set_yticks(range(len(self.names)), self.names)
            ax.set_xlabel("key-side term")
            ax.set_ylabel("query-side term")
            ax.figure.colorbar(im, ax=ax, label=f"contribution to the {self.what}")
        return ax

    def __repr__(self) -> str:
        shape = "×".join(str(s) for s in self.values.shape[:self.values.ndim - len(self.over)])
        if self.over:
            each = "×".join(str(s) for s in self.values.shape[-len(self.over):])
            return f"Attribution({each} {self.what}s, one per {', '.join(self.over)}, over {shape} terms)"
        return f"Attribution({self.what} {self.total:.4g} over {shape} terms)"


# --- checking the arguments ---------------------------------------------------

def _sequence(model: Model, tokens) -> np.ndarray:
    tokens = model._tokens(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be one sequence (T,), got shape {tokens.shape}")
    return tokens


def _index(value, name, n, what) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if not -n <= value < n:
        raise ValueError(f"{name} = {value} is out of range: {what} has {n}")
    return int(value) % n


def _head_names(model: Model, below: int) -> list:
    return [f"L{l}H{i}" for l in range(below) for i in range(model.layers[l].n_heads)]


@answer_of("09_attribution")
def _terms(model: Model, tr, below: int) -> np.ndarray:
    """The stream before layer ``below`` as its terms: token, position, each earlier head's write.

    Returns
    -------
    (2 + n_earlier_heads, T, d_model) ndarray
    """
    T = tr.embedding.shape[-2]
    return np.concatenate([(tr.embedding - model.W_pos[:T])[None], model.W_pos[:T][None]]
                          + [tr.writes[l] for l in range(below)])  # (n_terms, T, d_model)


# --- attributions -------------------------------------------------------------

@answer_of("09_attribution")
def logit_attribution(model: Model, tokens, position: int | None = None, target: int | None = None,
                      centred: bool = False) -> Attribution:
    """The logit of ``target`` at ``position`` split over the residual stream's terms.

    The final stream is ``W_E[tokens] + W_pos[:T] + Σ_(l,i) write_(l,i)``, so
    the logit ``x_T W_U[:, target]`` is a sum of one term per summand (direct
    logit attribution): ``"embed"`` (the token), ``"pos"`` (the position) and
    ``"L0H0"``, ``"L0H1"``, ... (each head's write). Every position, or every
    target, comes from one run (TransformerLens's ``cache.logit_attrs``).

    Parameters
    ----------
    model : Model
    tokens : (T,) array_like of int
    position : int, optional
        The position whose next-token logit is split (negative counts from the
        end); None: every position (with ``target=None``, every position but the
        last, each with the token that follows it as its target).
    target : int, optional
        The token whose logit is split; None: every token of the vocabulary
        (at one ``position``), or the next token (with ``position=None``).
    centred : bool
        Split the *centred* logit instead: the logit minus the mean of the
        position's logits over the vocabulary (``W_U``'s columns centred).
        A shift of every logit at once changes no probability, and a term
        that only shifts them all gets 0 here.

    Returns
    -------
    Attribution
        ``values : (2 + n_heads_total,) ndarray``; ``values.sum()`` is the (centred) logit.
        With ``position`` or ``target`` None, one split per position or per target:
        ``values : (2 + n_heads_total, n)`` and ``over == ("position",)`` or ``("target",)``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> logit_attribution(m, [50, 3, 7, 9, 3], -1, 7).names[:4]
    ['embed', 'pos', 'L0H0', 'L0H1']
    >>> every = logit_attribution(m, [50, 3, 7, 9, 3, 7])            # each position's next token
    >>> every.values.shape, every.over
    ((10, 5), ('position',))
    >>> bool(np.isclose(every.at(3).total, logit_attribution(m, [50, 3, 7, 9, 3, 7], 3, 3).total))
    True
    """
    tokens = _sequence(model, tokens)
    tr = model.run(tokens)
    terms = _terms(model, tr, model.n_layers)  # (n_terms, T, d_model)
    names = ["embed", "pos"] + _head_names(model, model.n_layers)
    return _split(model, tokens, tr, terms, names, position, target, centred)


def _split(model, tokens, tr, terms, names, position, target, centred) -> Attribution:
    """``terms`` (n_terms, T, d_model) read by the unembedding at the asked positions and targets."""
    T = len(tokens)
    what = "centred logit" if centred else "logit"
    logits = tr.logits - (tr.logits.mean(axis=-1, keepdims=True) if centred else 0.0)  # (T, vocab)
    if position is not None:
        t = _index(position, "position", T, "the sequence")
        if target is not None:
            u = _unembedding(model, _index(target, "target", model.vocab, "the vocabulary"), centred)  # (d_model,)
            return Attribution(names, terms[:, t] @ u, total=logits[t, target], what=what)
        U = model.W_U - (model.W_U.mean(axis=1, keepdims=True) if centred else 0.0)  # (d_model, vocab)
        return Attribution(names, terms[:, t] @ U, total=logits[t], what=what, over=("target",))
    if target is None:  # each position's next token
        if T < 2:
            raise ValueError("position=None and target=None split each position's next token: give two tokens or more")
        t, targets = np.arange(T - 1), tokens[1:]
    else:
        t, targets = np.arange(T), np.full(T, _index(target, "target", model.vocab, "the vocabulary"))
    U = model.W_U[:, targets] - (model.W_U.mean(axis=1, keepdims=True) if centred else 0.0)  # (d_model, n)
    values = np.einsum("npd,dp->np", terms[:, t], U)  # (n_terms, n)
    return Attribution(names, values, total=logits[t, targets], what=what, over=("position",))


def _unembedding(model: Model, target: int, centred: bool) -> np.ndarray:
    """``W_U``'s column for ``target``, minus the mean column if ``centred``: ``(d_model,)``."""
    u = model.W_U[:, target]
    return u - model.W_U.mean(axis=1) if centred else u


@answer_of("09_attribution")
def _path_terms(model: Model, tr) -> dict:
    """Every path's contribution to the final stream with the attention weights of ``tr`` frozen.

    A path starts at the token embedding or the position embedding and
    passes through a chain of heads in increasing layers, each reading the
    previous one's output through its values (``"embed>L0H1>L1H2"``);
    ``"embed"`` and ``"pos"`` alone are the embeddings themselves. Returns
    name to ``(T, d_model)`` array.
    """
    T = tr.embedding.shape[-2]
    chains = {"embed": tr.embedding - model.W_pos[:T], "pos": model.W_pos[:T]}  # (T, d_model) each
    for l, w in enumerate(model.layers):
        W_V, W_O = w.per_head.W_V, w.per_head.W_O  # (n_heads, d_model, d_head), (n_heads, d_head, d_model)
        new = {}
        for name, x in chains.items():
            # the attention weights mix what the values read
            out = tr.attention_weights[l] @ ((x @ W_V) @ W_O)  # (n_heads, T, d_model)
            for i in range(w.n_heads):
                new[f"{name}>L{l}H{i}"] = out[i]
        chains.update(new)
    return chains


@answer_of("09_attribution")
def path_attribution(model: Model, tokens, position: int | None = None, target: int | None = None,
                     centred: bool = False) -> Attribution:
    """The logit of ``target`` at ``position`` split over paths, the attention weights frozen.

    With each head's attention weights fixed at its value for these tokens, a head's
    write ``A (x W^V) W^O`` is linear in what its values read, so the final
    stream expands into paths, each named by where it starts and the heads
    it passes through: ``"embed"`` and ``"pos"`` (an embedding read by the
    unembedding directly, as in :func:`logit_attribution`), ``"embed>L1H2"``
    (head L1H2 reading the token embedding through its values), and each
    chain through later heads' values (``"pos>L0H1>L1H2"``: the virtual
    head L0H1 > L1H2 reading the position embedding). A head's name alone
    is never a path: the paths that end in a head add up to its whole
    write, :func:`logit_attribution`'s term. The weights themselves still
    depend on the input (that is what :func:`qk_attribution` splits).

    Parameters
    ----------
    model : Model
    tokens : (T,) array_like of int
    position, target : int, optional
        As :func:`logit_attribution`: None for every position (with the next
        token) or every target, from one run.
    centred : bool
        Split the centred logit (as :func:`logit_attribution` does).

    Returns
    -------
    Attribution
        One value per path; ``values.sum()`` is the (centred) logit (one split
        per position or target when either is None, as :func:`logit_attribution`).

    Examples
    --------
    >>> from attnlib.model import load
    >>> a = path_attribution(load("induction"), [50, 3, 7, 9, 3], -1, 7)
    >>> len(a.names), a.names[-1]      # from embed and pos: directly, 4 + 4 heads, 4 x 4 virtual heads
    (50, 'pos>L0H3>L1H3')
    """
    tokens = _sequence(model, tokens)
    tr = model.run(tokens)
    chains = _path_terms(model, tr)
    return _split(model, tokens, tr, np.stack(list(chains.values())), list(chains), position, target, centred)


@answer_of("09_attribution")
def qk_attribution(model: Model, tokens, layer: int, head: int, query: int | None = None,
                   key: int | None = None) -> Attribution:
    """Head ``layer, head``'s score for ``query`` → ``key`` split into query-side × key-side terms.

    The score is ``x_q W^P x_kᵀ / √d_head`` (before the softmax, scaled as
    the model scales it), and both ``x_q`` and ``x_k`` are sums of terms
    (``"embed"``, ``"pos"``, each earlier head's write), so the score is the
    sum of a matrix: entry ``(a, b)`` is ``a_q W^P b_kᵀ / √d_head``. For a
    head with smeared keys the key side of term ``b`` is ``s b_k + (1 − s)
    b_(k−1)``, as the model computes it.

    Parameters
    ----------
    model : Model
    tokens : (T,) array_like of int
    layer, head : int
        The head whose score is split.
    query, key : int, optional
        Positions, ``key <= query`` (the model is causal). None: every query,
        or every key, from one run.

    Returns
    -------
    Attribution
        ``values : (n_terms, n_terms) ndarray``, rows the query side; ``values.sum()`` is the score.
        With ``key`` None: one split per key, ``over == ("key",)``, keys after the query 0;
        with both None: one per query and key, ``over == ("query", "key")``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> a = qk_attribution(load("induction"), [50, 3, 7, 9, 3], 1, 0, 4, 2)
    >>> a.values.shape, a.names[:3]
    ((6, 6), ['embed', 'pos', 'L0H0'])
    >>> every = qk_attribution(load("induction"), [50, 3, 7, 9, 3], 1, 0)
    >>> every.values.shape, every.over, bool(np.allclose(every.at(4, 2).values, a.values))
    ((6, 6, 5, 5), ('query', 'key'), True)
    """
    tokens = _sequence(model, tokens)
    layer = _index(layer, "layer", model.n_layers, "the model's layers")
    w = model.layers[layer]
    head = _index(head, "head", w.n_heads, f"layer {layer}'s heads")
    T = len(tokens)
    names = ["embed", "pos"] + _head_names(model, layer)
    if query is None:
        if key is not None:
            raise ValueError("give a query with a key, or neither (every pair), or a query alone (every key)")
        tr = model.run(tokens)
        return Attribution(names, _qk_all(model, tr, layer, head), key_names=names,
                           total=np.tril(sites.attention_scores(tr.cache[layer, head, "q"], tr.cache[layer, head, "k"],
                                                                w.d_head)), what="score", over=("query", "key"))
    q = _index(query, "query", T, "the sequence")
    if key is None:
        tr = model.run(tokens)
        M = np.zeros((len(names), len(names), T), model.dtype)
        M[..., :q + 1] = np.moveaxis(_qk_matrices(model, tr, layer, head, q, range(q + 1)), 0, -1)
        S = np.zeros(T, model.dtype)
        S[:q + 1] = tr.cache.scores(layer)[head, q, :q + 1]
        return Attribution(names, M, key_names=names, total=S, what="score", over=("key",))
    k = _index(key, "key", T, "the sequence")
    if k > q:
        raise ValueError(f"key = {k} comes after query = {q}: a causal head cannot attend there")
    tr = model.run(tokens)
    values = _qk_matrices(model, tr, layer, head, q, [k])[0]  # (n_terms, n_terms)
    return Attribution(names, values, key_names=names, total=tr.cache.scores(layer)[head, q, k], what="score")


@answer_of("09_attribution")
def _qk_all(model: Model, tr, layer: int, head: int) -> np.ndarray:
    """:func:`_qk_matrices` for every query and key at once, keys after the query 0.

    Returns
    -------
    (n_terms, n_terms, T, T) ndarray
    """
    w = model.layers[layer]
    terms = _terms(model, tr, layer)  # (n_terms, T, d_model)
    Q = terms @ w.per_head.W_Q[head]  # (n_terms, T, d_head)
    K = terms @ w.per_head.W_K[head]
    if model.smear is not None:
        K = sites.smear(K[None], model.smear[layer][head:head + 1])[0]  # the keys the head compares with
    M = np.einsum("aqe,bke->abqk", Q, K) / np.sqrt(w.d_head)  # (n_terms, n_terms, T, T)
    return M * np.tri(terms.shape[1], dtype=bool)


@answer_of("09_attribution")
def qk_contrast(model: Model, tokens, layer: int, head: int, query: int, key: int) -> Attribution:
    """:func:`qk_attribution` at ``key`` minus its mean over the query's other keys: what moves the softmax.

    A term that adds the same amount to every key of a query cannot change
    where the head looks (the softmax ignores a constant); the contrast keeps
    what favours ``key`` over the others (keys ``0 .. query``).

    Returns
    -------
    Attribution
        ``values : (n_terms, n_terms) ndarray``; ``values.sum()`` is the score at
        ``key`` minus the mean score at the other keys.

    Examples
    --------
    >>> from attnlib.model import load
    >>> a = qk_contrast(load("induction"), [50, 3, 7, 9, 3], 1, 0, 4, 2)
    >>> a.values.shape
    (6, 6)
    """
    tokens = _sequence(model, tokens)
    layer = _index(layer, "layer", model.n_layers, "the model's layers")
    head = _index(head, "head", model.layers[layer].n_heads, f"layer {layer}'s heads")
    q = _index(query, "query", len(tokens), "the sequence")
    k = _index(key, "key", len(tokens), "the sequence")
    if k > q or q == 0:
        raise ValueError(f"key = {k} must be at most query = {q}, and the query needs another key (query >= 1)")
    tr = model.trace(tokens)
    M = _qk_matrices(model, tr, layer, head, q, range(q + 1))  # (query + 1, n_terms, n_terms)
    S = tr.cache.scores(layer)[head, q, :q + 1]  # (query + 1,)
    others = np.arange(q + 1) != k
    names = ["embed", "pos"] + _head_names(model, layer)
    return Attribution(names, M[k] - M[others].mean(axis=0), key_names=names, total=S[k] - S[others].mean(),
                       what="score contrast")


@answer_of("09_attribution")
def _qk_matrices(model: Model, tr, layer: int, head: int, q: int, keys) -> np.ndarray:
    """Query-side × key-side terms of head ``layer, head``'s score from ``q`` to each of ``keys``.

    Returns
    -------
    (len(keys), n_terms, n_terms) ndarray
    """
    w = model.layers[layer]
    terms = _terms(model, tr, layer)  # (n_terms, T, d_model)
    keys = np.asarray(list(keys))
    W_Q, W_K = w.per_head.W_Q[head], w.per_head.W_K[head]  # (d_model, d_head) each
    Q = terms[:, q] @ W_Q  # (n_terms, d_head)
    K = terms[:, keys] @ W_K  # (n_terms, n_keys, d_head)
    if model.smear is not None:
        s = model.smear[layer][head]
        K = s * K + (1 - s) * (terms[:, np.maximum(keys - 1, 0)] @ W_K)  # the key the head compares with
    return np.einsum("ae,bke->kab", Q, K) / np.sqrt(w.d_head)  # (n_keys, n_terms, n_terms)


# --- patching -------------------------------------------------------------------

def _sites(model: Model, sites) -> tuple:
    """Split ``sites`` into activation sites (normalised tuples) and path-patching edges."""
    if isinstance(sites, (str, paths.Edge)) or (isinstance(sites, tuple) and sites
                                                 and isinstance(sites[0], numbers.Integral)):
        sites = [sites]
    acts, edges = [], []
    for s in sites:
        if isinstance(s, paths.Edge):
            edges.append(s)
            continue
        if s == "embed":
            acts.append("embed")
            continue
        ok = isinstance(s, tuple) and len(s) in (2, 3) and (len(s) == 2 or s[2] in tuple(SIDES))
        if ok:
            try:
                paths._pair(model, tuple(s[:2]), "site")
            except ValueError:
                ok = False
        if not ok:
            raise ValueError(f"site {s!r} is not 'embed', (layer, head) or (layer, head, 'q' | 'k' | 'v') of this"
                             f" model ({model.n_layers} layers of {[w.n_heads for w in model.layers]} heads),"
                             " nor a paths.Edge")
        acts.append((int(s[0]), int(s[1])) + tuple(s[2:]))
    return acts, edges


def _run(model: Model, tokens, patches=None, positions=None) -> tuple:
    """Run the model with the named activations replaced by ``patches[site]`` at ``positions``.

    Returns the logits and the run's cache (every activation a site can name).
    """
    tr = model.run(tokens, {site: sites.replace(value, positions) for site, value in (patches or {}).items()})
    return tr.logits, tr.cache


@renamed_keywords(clean="source", corrupt="base")
def patch(model: Model, source, base, sites, positions=None) -> np.ndarray:
    """Logits of the ``base`` run with the activations at ``sites`` taken from the ``source`` run.

    Activation patching: each named activation of the base run is
    replaced by its value in the source run (at every position, or at
    ``positions``), and everything downstream is recomputed. Which run plays
    which part is the experiment: *denoising* patches a clean source into a
    corrupt base (is the site sufficient to restore the behaviour?),
    *noising* a corrupt source into a clean base (is it necessary?). The
    keywords ``clean`` and ``corrupt`` are the old names of ``source`` and
    ``base`` (they warn). A site is

    * ``"embed"``: the embedding ``W_E[tokens] + W_pos[:T]``;
    * ``(layer, head)``: the head's write into the stream;
    * ``(layer, head, "q" | "k" | "v")``: the head's queries, keys (as
      compared, after smearing) or values: one of its inputs;
    * a :class:`attnlib.paths.Edge` ``(sender, receiver, via)``: *path
      patching*: the sender's write is replaced by its source value in the
      receiver's inputs ``via`` only (or in what the unembedding reads), as
      :func:`attnlib.paths.trace` removes it. Edges cannot be mixed with other
      sites, and take no ``positions``.

    Parameters
    ----------
    model : Model
    source : (..., T) array_like of int
        The run that gives the activations.
    base : (..., T) array_like of int
        The run that is changed; the same shape as ``source`` (batch rows are paired).
    sites : list
        What to patch (see above).
    positions : sequence of int, optional
        Patch these positions only (default: every position).

    Returns
    -------
    (..., T, vocab) ndarray

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> clean, corrupt = np.array([50, 3, 7, 3, 7]), np.array([50, 3, 7, 9, 8])
    >>> bool(np.allclose(patch(m, clean, corrupt, ["embed"]), m.forward(clean)))
    True
    """
    source, base = model._tokens(source), model._tokens(base)
    if source.shape != base.shape:
        raise ValueError(f"source has shape {source.shape} and base {base.shape}: they must match"
                         " (row i of the source is patched into row i of the base)")
    acts, edges = _sites(model, sites)
    T = source.shape[-1]
    if positions is not None:
        positions = np.asarray(positions)
        if positions.dtype.kind not in "iu" or positions.ndim != 1 or not ((positions >= -T) & (positions < T)).all():
            raise ValueError(f"positions must be a list of integers in -{T} .. {T - 1}, got {positions!r}")
    if edges:
        if acts or positions is not None:
            raise ValueError("path patching (paths.Edge sites) takes neither other sites nor positions")
        return _path_patch(model, source, base, edges)
    _, cache = _run(model, source)
    logits, _ = _run(model, base, {s: cache[s] for s in acts}, positions)
    return logits


def _path_patch(model: Model, clean, corrupt, edges, clean_trace=None) -> np.ndarray:
    """Each edge's sender term, in its receivers' inputs only, replaced by its value in the clean run.

    :func:`attnlib.paths.trace`'s edits (whose edges and checks it uses),
    with the removed term ``this run's write - the clean run's write`` row by
    row: ``paths.trace(..., how="mean", reference=r)`` is the special case
    of one clean sequence ``r`` for every row. ``clean_trace`` (the clean
    run's cached ``Trace``) saves a forward pass when the caller has it.
    """
    cuts = paths._edges(model, edges)
    clean_cache = (clean_trace if clean_trace is not None else model.run(clean)).cache

    def removed(sender, cache):
        return cache[sender] - clean_cache[sender]  # (..., T, d_model)

    return model.run(corrupt, paths.cut_edits(model, cuts, removed), cache=False).logits


# --- a small attribution graph -------------------------------------------------

class Node(NamedTuple):
    """A term at a position: ``term`` (``"embed"``, ``"L0H1"``, ``"score L1H0"``, ...), ``position``, ``level``."""

    term: str
    position: int
    level: float

    def __str__(self) -> str:
        return f"{self.term}@{self.position}"


class Link(NamedTuple):
    """An edge of an attribution graph: ``source`` adds ``value`` (in ``unit``) to ``target``."""

    source: Node
    target: Node
    value: float
    unit: str


def attribution_graph(model: Model, tokens, position: int, target: int, layer: int, head: int, key: int,
                      top: int | None = 3) -> list:
    """The circuit behind one prediction as exact edges, on the centred logit and the score contrast.

    Four hops, each exact for these tokens (attention weights frozen where a
    write is split over what its values read):

    1. the ``top`` largest terms of :func:`logit_attribution` (``centred=True``)
       at ``position`` into the node ``"logit <token>"`` (unit ``"logit"``);
    2. head ``layer, head``'s term of that logit split over what its values
       read: the earlier terms at each position ``j``, weighted by the
       attention it gives ``j`` (``top`` largest; unit ``"logit"``);
    3. the head's score contrast for ``position → key`` (:func:`qk_contrast`:
       the score at ``key`` minus its mean over the query's other keys, what
       moves the softmax), drawn as two nodes: ``"query side L1H0"`` at
       ``position``, fed by the ``top`` largest query-side terms, and
       ``"key side L1H0"`` at ``key``, fed by the key-side terms. Each node's
       inputs add up to the same contrast (unit ``"contrast"``);
    4. the largest key-side term, if it is a layer-0 head's write: its
       key-side contrast split over the positions and terms (``"embed"``,
       ``"pos"``) that head read through its values (``top`` largest; unit
       ``"contrast"``).

    Where ``top`` leaves edges out, one more edge from a node ``"(rest)"``
    carries what they add, so the edges into every node add up to its value
    (``top=None`` keeps every edge and needs none).

    Returns
    -------
    list of Link
    """
    tokens = _sequence(model, tokens)
    t = _index(position, "position", len(tokens), "the sequence")
    k = _index(key, "key", len(tokens), "the sequence")
    layer = _index(layer, "layer", model.n_layers, "the model's layers")
    w = model.layers[layer]
    head = _index(head, "head", w.n_heads, f"layer {layer}'s heads")
    la = logit_attribution(model, tokens, t, target, centred=True)
    qk = qk_contrast(model, tokens, layer, head, t, k)
    tr = model.trace(tokens)
    level = {"embed": 0.0, "pos": 0.0}
    level.update({f"L{l}H{i}": 1.0 + l for l in range(model.n_layers) for i in range(model.layers[l].n_heads)})
    name = f"L{layer}H{head}"
    logit = Node(f"logit {model.token_names[target]}", t, model.n_layers + 1.0)

    def hop(pairs, into):
        """The ``top`` largest ``(source node, value)`` pairs into ``into``, and the rest as one edge."""
        pairs = sorted(pairs, key=lambda p: -abs(p[1]))
        kept, rest = (pairs, []) if top is None else (pairs[:top], pairs[top:])
        out = [Link(n, into, float(v), "logit" if into.level > layer + 0.75 else "contrast") for n, v in kept]
        if rest:
            out.append(Link(Node("(rest)", into.position, kept[-1][0].level), into, float(sum(v for _, v in rest)),
                            out[0].unit))
        return out

    links = hop([(Node(n, t, level[n]), v) for n, v in la.terms()], logit)
    # 2. the head's write, through its values: A[t, j] (term_j W^V W^O) · u for every earlier term at j
    u = _unembedding(model, target, True)
    terms = _terms(model, tr, layer)  # (n_terms, T, d_model)
    ov = (terms @ (w.per_head.W_V[head] @ w.per_head.W_O[head])) @ u  # (n_terms, T)
    ov = tr.attention_weights[layer][head, t][None, :] * ov
    names = ["embed", "pos"] + _head_names(model, layer)
    links += hop([(Node(names[a], j, level[names[a]]), ov[a, j]) for a in range(len(names)) for j in range(t + 1)],
                 Node(name, t, level[name]))
    # 3. the score contrast, one node per side
    side_level = layer + 0.5
    links += hop([(Node(n, t, level[n]), v) for n, v in qk.query_side().terms()],
                 Node(f"query side {name}", t, side_level))
    key_terms = qk.key_side().terms()
    links += hop([(Node(n, k, level[n]), v) for n, v in key_terms], Node(f"key side {name}", k, side_level))
    # 4. the largest key-side term, if a layer-0 head's write: what it read through its values
    best = key_terms[0][0]
    if best.startswith("L0H") and model.smear is None:
        i = int(best[3:])
        v_layer = model.layers[0]
        q_vec = (tr.residual[layer][t] @ w.per_head.W_Q[head]) / np.sqrt(w.d_head)  # (d_head,)
        A0 = tr.attention_weights[0][i, : t + 1]  # (t + 1, T): where L0H<i> looked from each key
        others = np.arange(t + 1) != k
        weight = A0[k] - A0[others].mean(axis=0)  # (T,): each source's weight at the key minus at the others
        parts = terms[:2]  # (2, T, d_model): embed, pos
        via = parts @ (v_layer.per_head.W_V[i] @ v_layer.per_head.W_O[i]) @ w.per_head.W_K[head]  # (2, T, d_head)
        contrib = weight[None, :] * (via @ q_vec)  # (2, T): exact shares of the key-side contrast of L0H<i>
        links += hop([(Node(("embed", "pos")[p], s, 0.0), contrib[p, s]) for p in range(2) for s in range(t + 1)],
                     Node(best, k, 1.0))
    return links


def graph_table(links) -> str:
    """An attribution graph's edges as aligned text: the figure's text alternative.

    Edges are grouped by the node they go into, and each group ends with
    its sum (the node's value: the centred logit, a head's term of it, the
    score contrast, or a key-side term of the contrast).
    """
    rows, order = [], list(dict.fromkeys(e.target for e in links))
    for node in order:
        into = [e for e in links if e.target == node]
        rows += [(str(e.source), str(e.target), f"{e.value:+.2f}", e.unit) for e in into]
        rows.append(("  (sum)", str(node), f"{sum(e.value for e in into):+.2f}", into[0].unit))
    head = ("from", "to", "value", "unit")
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(4)]
    fmt = "  ".join(f"{{:<{w}}}" if c != 2 else f"{{:>{w}}}" for c, w in enumerate(widths))
    return "\n".join(fmt.format(*r).rstrip() for r in [head] + rows)
