"""Small attention-only transformers, trained by this project and read with numpy (chapters 10-14).

A model is token and position embeddings, a stack of causal multi-head
attention layers that *add* to the residual stream, and an unembedding::

    x_0 = W_E[tokens] + W_pos[:T]                       # (T, d_model)
    x_l = x_{l-1} + Σ_i softmax(x W^P_i xᵀ/√d_head) x W^M_i   (layer l, heads i)
    logits = x_L W_U                                    # (T, vocab)

No LayerNorm, no MLP, no biases: every head's contribution is one term of a
sum, which is what makes the model readable head by head. A model may
start every sequence with a BOS token (``card["bos"]``), use fixed
sinusoidal positions (:func:`sinusoidal_positions`, recomputed rather than
stored), give its heads **smeared keys** (Olsson et al., 2022: each key
mixed with the previous position's key, ``k'_j = s k_j + (1 - s) k_{j-1}``
with one learned weight ``s`` per head) and, if trained on text, carry its tokenizer
(:class:`attnlib.tokenizer.BPE`: :meth:`Model.encode`, :meth:`Model.decode`)
and the corpus statistics its card was measured on (``Model.corpus``). The shipped
models live in ``attnlib/models/`` as ``NAME.npz`` (the weights) and
``NAME.json`` (the model card: task, data, training settings, the weights'
SHA-256 and the measured metrics); ``scripts/train_model.py`` made them.

Examples
--------
>>> m = load("copy_back")
>>> m.forward([3, 1, 4, 1, 5, 9]).shape
(6, 20)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import numbers
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._validate import as_float_array, check_finite
from . import sites
from .normalize import causal_mask, softmax_
from .tokenizer import BPE
from .weights import Weights, check_weights

MODELS = Path(__file__).resolve().parent / "models"
"""Where the shipped models are."""


_counters: list = []


@dataclass(eq=False)  # each block its own counter, even while two hold the same counts
class Cost:
    """Passes over the batch run inside a :func:`counting` block."""

    forward: int = 0
    backward: int = 0


@contextlib.contextmanager
def counting():
    """Count the forward passes (:meth:`~attnlib.model.Model.run`) and backward passes (:func:`attnlib.backward.gradients`) in the block.

    Every method of chapter 17 runs the model through these two, so this is
    what each one costs, counted where the work is done. Blocks nest: each
    counts everything inside it.

    Yields
    ------
    Cost

    Examples
    --------
    >>> m = load("induction")
    >>> clean = np.array([[50, 11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16]])
    >>> corrupt = clean.copy(); corrupt[0, 3] = 30       # the first 13 replaced
    >>> d = np.zeros((1, 13, m.vocab)); d[0, 9, 14] = 1.0  # the logit of 14 after the second 13
    >>> from attnlib.discovery import edge_effects
    >>> with counting() as cost:
    ...     _ = edge_effects(m, clean, corrupt, d)
    >>> cost.forward, cost.backward     # the clean and corrupt runs, and one per edge (the input's 25 too)
    (83, 0)
    """
    cost = Cost()
    _counters.append(cost)
    try:
        yield cost
    finally:
        _counters.remove(cost)


def _count(forward: int = 0, backward: int = 0) -> None:
    for c in _counters:
        c.forward += forward
        c.backward += backward


class Trace(NamedTuple):
    """Everything one forward pass computed (:meth:`Model.run`).

    The fields are the values the book reads most; ``cache`` has every site.

    Leading batch axes ``...`` are those of the tokens.
    """

    embedding: np.ndarray  #: (..., T, d_model): ``W_E[tokens] + W_pos[:T]``
    attention_weights: list  #: per layer, (..., n_heads, T, T): each head's softmax(Q Kᵀ / √d_head)
    writes: list  #: per layer, (..., n_heads, T, d_model): each head's term of the sum
    residual: np.ndarray  #: (n_layers + 1, ..., T, d_model): the stream before layer 0, after each layer
    logits: np.ndarray  #: (..., T, vocab)
    cache: sites.Cache | None = None  #: every site's value, by site (:mod:`attnlib.sites`)

    @property
    def patterns(self) -> list:
        """Deprecated name of ``Trace.attention_weights`` (the book's *pattern* is a row of ``X W^P``).

        Issues a ``PendingDeprecationWarning``, as :func:`attnlib.attention_pattern` does.
        """
        warnings.warn("Trace.patterns is the old name of Trace.attention_weights"
                      " (the book's 'pattern' is a row of X W^P); use attention_weights",
                      PendingDeprecationWarning, stacklevel=2)
        return self.attention_weights


def sinusoidal_positions(n_ctx: int, d_model: int, scale: float = 1.0) -> np.ndarray:
    """Fixed position embeddings (Vaswani et al.), each row of norm ``scale``.

    Row ``t`` holds ``sin(t ω_k)`` and ``cos(t ω_k)`` for ``ω_k = 10000^(-2k/d_model)``,
    ``k = 0 .. d_model/2 - 1`` (sines in the first half, cosines in the second),
    divided by ``√(d_model/2)`` and multiplied by ``scale``. Computed in float64
    and rounded to float32, so training and reading get the same numbers.

    Returns
    -------
    (n_ctx, d_model) ndarray of float32

    Examples
    --------
    >>> P = sinusoidal_positions(16, 8, scale=3.0)
    >>> P.shape, np.linalg.norm(P, axis=1).round(4).max()
    ((16, 8), np.float32(3.0))
    """
    if d_model % 2:
        raise ValueError(f"d_model must be even for sines and cosines, got {d_model}")
    t = np.arange(n_ctx)[:, None]  # (n_ctx, 1)
    omega = 10000.0 ** (-2 * np.arange(d_model // 2) / d_model)  # (d_model / 2,)
    P = np.concatenate([np.sin(t * omega), np.cos(t * omega)], axis=1)  # (n_ctx, d_model)
    return (P * (scale / np.sqrt(d_model / 2))).astype(np.float32)


def weights_sha256(arrays: dict) -> str:
    """SHA-256 of named arrays: names, dtypes, shapes and bytes, in name order.

    It identifies the weights whatever file holds them (an ``.npz`` file's
    own bytes carry timestamps, so they cannot).

    Examples
    --------
    >>> weights_sha256({"W": np.zeros(2, np.float32)})[:12]
    '83390bd88b2d'
    """
    h = hashlib.sha256()
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class Model:
    """An attention-only transformer: embeddings, attention layers, unembedding.

    Parameters
    ----------
    W_E : (vocab, d_model) array_like
        Token embeddings, one row per token.
    W_pos : (n_ctx, d_model) array_like
        Position embeddings, one row per position.
    W_U : (d_model, vocab) array_like
        Unembedding: logits are ``x W_U``.
    layers : list of Weights
        One causal multi-head attention layer each (scale ``1/√d_head``).
    card : dict
        The model card (see :func:`load`); ``{}`` for a model built by hand.
    tokenizer : BPE, optional
        For a model of text: turns text into token ids and back.
    corpus : dict of str to ndarray, optional
        For a model of text: the corpus statistics its card is measured on
        (e.g. held-out token ids, training bigram counts), read-only.
    smear : list of (n_heads,) array_like, optional
        Smeared keys, one array per layer: head ``i`` of layer ``l`` uses the
        key ``s k_j + (1 - s) k_{j-1}`` with ``s = smear[l][i]`` in ``[0, 1]``
        (position 0 keeps its own key). None: plain keys (``s = 1``).
    """

    W_E: np.ndarray
    W_pos: np.ndarray
    W_U: np.ndarray
    layers: tuple
    card: dict
    tokenizer: BPE | None = None
    corpus: dict | None = None
    smear: tuple | None = None

    def __post_init__(self):
        arrays = {}
        for name in ("W_E", "W_pos", "W_U"):
            arr = as_float_array(getattr(self, name), name)
            if arr.ndim != 2:
                raise ValueError(f"{name} must be a matrix (2 axes), got shape {arr.shape}")
            check_finite(arr, name)
            arrays[name] = arr
        vocab, d_model = arrays["W_E"].shape
        if arrays["W_pos"].shape[1] != d_model:
            raise ValueError(f"W_pos has shape {arrays['W_pos'].shape}: expected (n_ctx, d_model = {d_model}),"
                             f" d_model being the columns of W_E {arrays['W_E'].shape}")
        if arrays["W_U"].shape != (d_model, vocab):
            raise ValueError(f"W_U has shape {arrays['W_U'].shape}, expected (d_model, vocab) ="
                             f" {(d_model, vocab)} from W_E {arrays['W_E'].shape}")
        layers = tuple(self.layers)
        for l, w in enumerate(layers):
            check_weights(w)
            if w.d_model != d_model:
                raise ValueError(f"layers[{l}] has d_model = {w.d_model}, expected {d_model} (the columns of W_E)")
        if not isinstance(self.card, dict):
            raise TypeError(f"card must be a dict, got {type(self.card).__name__}")
        dtype = np.result_type(*arrays.values(), *(w.dtype for w in layers))
        for name, arr in arrays.items():
            arr = np.array(arr, dtype=dtype)  # a private, read-only copy
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "layers", tuple(w.astype(dtype) for w in layers))
        if self.tokenizer is not None:
            if not isinstance(self.tokenizer, BPE):
                raise TypeError(f"tokenizer must be an attnlib.tokenizer.BPE, got {type(self.tokenizer).__name__}")
            if len(self.tokenizer) != vocab:
                raise ValueError(f"the tokenizer has {len(self.tokenizer)} tokens but W_E has {vocab} rows")
        corpus = {}
        for k, v in (self.corpus or {}).items():
            corpus[k] = np.array(v)
            corpus[k].setflags(write=False)
        object.__setattr__(self, "corpus", corpus)
        if self.smear is not None:
            smear = tuple(np.array(as_float_array(s, f"smear[{l}]"), dtype=dtype) for l, s in enumerate(self.smear))
            if len(smear) != len(layers):
                raise ValueError(f"smear has {len(smear)} entries: expected one per layer ({len(layers)})")
            for l, (s, w) in enumerate(zip(smear, layers)):
                if s.shape != (w.n_heads,):
                    raise ValueError(f"smear[{l}] has shape {s.shape}: expected (n_heads,) = ({w.n_heads},)")
                if not ((s >= 0) & (s <= 1)).all():
                    raise ValueError(f"smear[{l}] must lie in [0, 1] (the weight on a position's own key),"
                                     f" got {s}")
                s.setflags(write=False)
            object.__setattr__(self, "smear", smear)

    # --- sizes ---------------------------------------------------------------
    @property
    def vocab(self) -> int:
        return self.W_E.shape[0]

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]

    @property
    def n_ctx(self) -> int:
        """The longest sequence the model has positions for."""
        return self.W_pos.shape[0]

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def dtype(self) -> np.dtype:
        return self.W_E.dtype

    @property
    def bos(self):
        """The id of the token every sequence starts with, or None."""
        return self.card.get("bos")

    @property
    def token_names(self) -> list:
        """A printable name per token id: its text (newline ``⏎``) for a model of text, else the id; ``BOS``."""
        names = self.tokenizer.token_names if self.tokenizer is not None else [str(i) for i in range(self.vocab)]
        return ["BOS" if i == self.bos else n for i, n in enumerate(names)]

    def encode(self, text: str, bos: bool = True) -> np.ndarray:
        """Token ids of ``text``, after the BOS token (if the model has one and ``bos``).

        Returns
        -------
        (n_tokens,) ndarray of int64
        """
        if self.tokenizer is None:
            raise ValueError(f"model {self.card.get('name', 'unnamed')!r} was not trained on text: it has no tokenizer")
        ids = self.tokenizer.encode(text)
        if bos and self.bos is not None:
            ids = np.concatenate([[self.bos], ids]).astype(np.int64)
        return ids

    def decode(self, ids) -> str:
        """The text of token ids (BOS tokens left out): ``decode(encode(text)) == text``."""
        if self.tokenizer is None:
            raise ValueError(f"model {self.card.get('name', 'unnamed')!r} was not trained on text: it has no tokenizer")
        ids = np.asarray(ids)
        if ids.ndim == 1 and self.bos is not None:
            ids = ids[ids != self.bos]
        return self.tokenizer.decode(ids)

    def __repr__(self) -> str:
        name = self.card.get("name", "unnamed")
        heads = "/".join(str(w.n_heads) for w in self.layers)
        return (f"Model({name!r}: {self.n_layers} layers x {heads} heads, d_model {self.d_model},"
                f" vocab {self.vocab}, n_ctx {self.n_ctx})")

    def astype(self, dtype) -> "Model":
        """The same model in another floating dtype."""
        return Model(self.W_E.astype(dtype), self.W_pos.astype(dtype), self.W_U.astype(dtype),
                     [w.astype(dtype) for w in self.layers], self.card, self.tokenizer, self.corpus,
                     None if self.smear is None else [s.astype(dtype) for s in self.smear])

    def arrays(self) -> dict:
        """Everything a model file stores, by name: ``W_E``, ``L0.W_Q``, ..., ``tokenizer.*``, ``corpus.*``.

        Fixed sinusoidal positions (``card["positions"]``) are left out: :func:`load` recomputes them.
        """
        out = {"W_E": self.W_E, "W_U": self.W_U}
        if self.card.get("positions", {}).get("kind") != "sinusoidal":
            out["W_pos"] = self.W_pos
        for l, w in enumerate(self.layers):
            out.update({f"L{l}.{k}": getattr(w, k) for k in ("W_Q", "W_K", "W_V", "W_O")})
            if self.smear is not None:
                out[f"L{l}.smear"] = self.smear[l]
        if self.tokenizer is not None:
            out.update(self.tokenizer.arrays())
        out.update({f"corpus.{k}": v for k, v in self.corpus.items()})
        return out

    # --- running it ------------------------------------------------------------
    def _tokens(self, tokens) -> np.ndarray:
        arr = np.asarray(tokens)
        if arr.dtype.kind not in "iu" or arr.ndim == 0:
            raise TypeError(f"tokens must be integers with a sequence axis, got dtype {arr.dtype}"
                            f" and shape {arr.shape}")
        T = arr.shape[-1]
        if not 1 <= T <= self.n_ctx:
            raise ValueError(f"tokens has shape {arr.shape}: its last axis (T = {T}) must be between 1"
                             f" and n_ctx = {self.n_ctx}")
        if arr.min() < 0 or arr.max() >= self.vocab:
            raise ValueError(f"tokens must lie in 0 .. vocab - 1 = {self.vocab - 1},"
                             f" got values from {arr.min()} to {arr.max()}")
        return arr

    def _ablation(self, ablate) -> set:
        try:
            pairs = {tuple(p) for p in ablate}
        except TypeError:
            raise TypeError(f"ablate must be a collection of (layer, head) pairs, got {ablate!r}") from None
        for p in pairs:
            ok = (len(p) == 2 and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in p)
                  and 0 <= p[0] < self.n_layers and 0 <= p[1] < self.layers[p[0]].n_heads)
            if not ok:
                raise ValueError(f"ablate names {p!r}, which is not a (layer, head) pair of this model"
                                 f" ({self.n_layers} layers of {[w.n_heads for w in self.layers]} heads)")
        return pairs

    def run(self, tokens, edits=None, cache: bool = True, start_at_layer: int = 0,
            start_from: Trace | None = None) -> Trace:
        """Run the model, applying ``edits`` where their sites are computed: the one forward pass.

        Every other way of running the model (:meth:`trace`, ablation, path
        cuts, patching, the gradients' forward side) is this with edits.

        Parameters
        ----------
        tokens : (..., T) array_like of int
            Token ids in ``0 .. vocab - 1``, ``T <= n_ctx``; leading axes are a batch.
        edits : dict or list of (site, edit), optional
            Sites (:mod:`attnlib.sites`: ``"embed"``, ``(layer, head, "q")``,
            ``(layer, head, "weights")``, ``(layer, head)``, ...) and what to
            do there: a function ``edit(site, value, cache) -> value`` or an
            array to put in. A head's site gets that head's slice.
        cache : bool
            Keep every site's value in ``Trace.cache`` (else only the logits are kept).
        start_at_layer, start_from : int, Trace
            Read the layers before ``start_at_layer`` from ``start_from``, a
            cached run of the same tokens, instead of computing them again
            (TransformerLens's ``start_at_layer``); edits of those layers are refused.

        Returns
        -------
        Trace

        Examples
        --------
        >>> m = load("induction")
        >>> toks = [50, 1, 2, 3, 1, 2]
        >>> tr = m.run(toks)
        >>> tr.cache[1, 0, "weights"].shape, tr.cache[0, 2].shape     # a head's attention weights, its write
        ((6, 6), (6, 64))
        >>> look_back = np.tril(np.ones((6, 6)), -1) - np.tril(np.ones((6, 6)), -2); look_back[0, 0] = 1
        >>> edited = m.run(toks, {(0, 2, "weights"): look_back})      # L0H2 made a previous-token head
        >>> bool(np.array_equal(edited.cache[0, 2, "weights"], look_back))
        True
        """
        tokens = self._tokens(tokens)
        edits = sites.normalise(edits, [w.n_heads for w in self.layers])
        if _counters:
            _count(forward=1)
        T = tokens.shape[-1]
        c = sites.Cache([w.n_heads for w in self.layers], [w.d_head for w in self.layers])
        v = c.values
        by_head = {}  # (layer, name): [(head, edits)]; name "write" for (layer, head)
        for site, fns in edits.items():
            if not isinstance(site, str) and site[1] != "stream":
                by_head.setdefault((site[0], site[2] if len(site) == 3 else "write"), []).append((site[1], fns))

        def at(site, value):
            for edit in edits.get(site, ()):
                value = _edited(site, edit(site, value, c), value)
            return value

        def at_heads(layer, name, Y):  # Y: (..., n_heads, T, ...), every head's value
            todo = by_head.get((layer, name))
            if todo:
                Y = Y.copy()
                for i, fns in todo:
                    site = (layer, i) if name == "write" else (layer, i, name)
                    for edit in fns:
                        Y[..., i, :, :] = _edited(site, edit(site, Y[..., i, :, :], c), Y[..., i, :, :])
            v[(layer, name)] = Y
            return Y

        start = start_at_layer
        if start_from is not None or start:
            start = _start(self, tokens, start, start_from, edits)
            v.update({k: a for k, a in start_from.cache.values.items() if k in sites.EMBEDDINGS or (
                not isinstance(k, str) and (k[0] <= start if k[1] == "stream" else k[0] < start))})
            c.reads.update({k: a for k, a in start_from.cache.reads.items() if k[0] < start})
            x = v[(start, "stream")]
        else:
            v["tok"] = tok = at("tok", self.W_E[tokens])  # (..., T, d_model)
            v["pos"] = pos = at("pos", self.W_pos[:T])  # (T, d_model)
            v["embed"] = x = at("embed", tok + pos)  # (..., T, d_model)
        future = ~causal_mask(T)  # (T, T): the keys after each query
        for l in range(start, self.n_layers):
            w, h, d = self.layers[l], self.layers[l].n_heads, self.layers[l].d_head
            v[(l, "stream")] = x = at((l, "stream"), x)
            QKV = x @ w.W_QKV  # (..., T, 3 * n_heads * d_head): one projection for all heads
            QKV = np.swapaxes(QKV.reshape(*QKV.shape[:-1], 3 * h, d), -3, -2)  # (..., 3 * n_heads, T, d_head)
            for n, read in enumerate(sites.READS):  # a head whose read is edited: its q, k or v follows
                for i, fns in by_head.get((l, read), ()):
                    site, x_i = (l, i, read), x
                    for edit in fns:
                        x_i = _edited(site, edit(site, x_i, c), x_i)
                    c.reads[site] = x_i
                    if x_i is not x:
                        QKV = QKV.copy() if QKV.base is not None else QKV
                        W = w.per_head[n][i]  # (d_model, d_head)
                        QKV[..., n * h + i, :, :] += (x_i - x) @ W  # what the edit changed, through W
            Q = at_heads(l, "q", QKV[..., :h, :, :])  # (..., n_heads, T, d_head)
            K = at_heads(l, "k_raw", QKV[..., h:2 * h, :, :])
            if self.smear is not None:  # each key mixed with the one before it
                K = sites.smear(K, self.smear[l])
            K = at_heads(l, "k", K)
            V = at_heads(l, "v", QKV[..., 2 * h:, :, :])
            S = sites.attention_scores(Q, K, d)  # (..., n_heads, T, T)
            S[..., future] = -np.inf
            if (l, "scores") in by_head:  # (else the cache recomputes them when they are read)
                S = at_heads(l, "scores", S).copy()  # the softmax below works in place
                S[..., future] = -np.inf  # a head never sees the future, whatever the edit
            A = at_heads(l, "weights", softmax_(S))  # (..., n_heads, T, T): the softmax, in place
            out = at_heads(l, "write", (A @ V) @ w.per_head.W_O)  # (..., n_heads, T, d_model): each head's term
            x = x + out.sum(axis=-3)
        v[(self.n_layers, "stream")] = x = at((self.n_layers, "stream"), x)
        v["logits"] = logits = at("logits", x @ self.W_U)  # (..., T, vocab)
        if not cache:
            return Trace(None, [], [], None, logits)
        return Trace(v["embed"], [v[(l, "weights")] for l in range(self.n_layers)],
                     [v[(l, "write")] for l in range(self.n_layers)],
                     np.stack([v[(l, "stream")] for l in range(self.n_layers + 1)]), logits, c)

    def trace(self, tokens, ablate=(), clean: Trace | None = None) -> Trace:
        """Run the model and keep every intermediate: attention weights, each head's write, the stream.

        :meth:`run` with the ablated heads' writes zeroed.

        Parameters
        ----------
        tokens : (..., T) array_like of int
            Token ids in ``0 .. vocab - 1``, ``T <= n_ctx``; leading axes are a batch.
        ablate : collection of (layer, head)
            Heads whose term is dropped from the sum over heads (their writes are zero in the trace).
        clean : Trace, optional
            The trace of the same ``tokens`` with nothing ablated: the layers up to
            the first one with an ablated head are read from it, not computed again
            (TransformerLens's ``start_at_layer``); the result is the same, bit for bit.

        Returns
        -------
        Trace

        >>> m = load("induction")
        >>> toks = [50, 1, 2, 3, 1, 2]
        >>> clean = m.trace(toks)
        >>> bool(np.array_equal(m.trace(toks, ablate=[(1, 0)], clean=clean).logits,
        ...                     m.trace(toks, ablate=[(1, 0)]).logits))
        True
        """
        dropped = self._ablation(ablate)
        edits = {p: sites.zero for p in sorted(dropped)}
        if clean is None:
            return self.run(tokens, edits)
        if not isinstance(clean, Trace) or clean.cache is None:
            raise ValueError("clean must be the Trace of these same tokens with nothing ablated")
        return self.run(tokens, edits, start_at_layer=min((l for l, _ in dropped), default=self.n_layers),
                        start_from=clean)

    def forward(self, tokens, ablate=(), clean: Trace | None = None) -> np.ndarray:
        """Logits for the next token at every position.

        Parameters
        ----------
        tokens : (..., T) array_like of int
        ablate : collection of (layer, head)
            Drop these heads' terms from the sum over heads (zero ablation).
        clean : Trace, optional
            The un-ablated trace of the same tokens, to start from (see :meth:`trace`).

        Returns
        -------
        (..., T, vocab) ndarray
        """
        return self.trace(tokens, ablate, clean).logits

    def attention_weights(self, tokens) -> list:
        """Every head's attention weights: one ``(..., n_heads, T, T)`` array per layer.

        Parameters
        ----------
        tokens : (..., T) array_like of int

        Returns
        -------
        list of (..., n_heads, T, T) ndarray
            Entry ``l`` holds layer ``l``'s ``softmax(Q Kᵀ / √d_head)``, causal.
        """
        return self.trace(tokens).attention_weights

    def patterns(self, tokens) -> list:
        """Deprecated name of ``Model.attention_weights`` (the book's *pattern* is a row of ``X W^P``).

        Issues a ``PendingDeprecationWarning``, as :func:`attnlib.attention_pattern` does.
        """
        warnings.warn("Model.patterns is the old name of Model.attention_weights"
                      " (the book's 'pattern' is a row of X W^P); call attention_weights",
                      PendingDeprecationWarning, stacklevel=2)
        return self.attention_weights(tokens)

    def residual(self, tokens) -> np.ndarray:
        """The residual stream before layer 0 and after each layer.

        Returns
        -------
        (n_layers + 1, ..., T, d_model) ndarray
            Entry 0 is the embedding ``W_E[tokens] + W_pos[:T]``; entry ``l + 1``
            adds layer ``l``'s heads. ``residual[-1] @ W_U`` are the logits.
        """
        return self.trace(tokens).residual

    # --- files -----------------------------------------------------------------
    def save(self, path) -> Path:
        """Write ``path.npz`` (the weights) and ``path.json`` (the card, with the weights' SHA-256)."""
        path = Path(path).with_suffix("")
        arrays = self.arrays()
        card = {**self.card, "sha256": weights_sha256(arrays)}
        save = np.savez_compressed if self.tokenizer is not None else np.savez
        save(path.with_suffix(".npz"), **arrays)
        path.with_suffix(".json").write_text(json.dumps(card, indent=2) + "\n")
        return path.with_suffix(".npz")


def _edited(site, new, old) -> np.ndarray:
    """An edit's result, checked: the old value's shape and dtype."""
    new = np.asarray(new)
    if new.shape != old.shape:
        try:
            new = np.broadcast_to(new, old.shape)
        except ValueError:
            raise ValueError(f"the edit of {sites.site_name(site)} returned shape {new.shape}, expected"
                             f" {old.shape}") from None
    return new.astype(old.dtype, copy=False)


def _start(model, tokens, start, start_from, edits) -> int:
    """Check ``Model.run``'s ``start_at_layer`` and ``start_from``."""
    if not isinstance(start_from, Trace) or start_from.cache is None:
        raise ValueError("start_from must be a cached Trace of the same tokens (Model.run(tokens))")
    if not isinstance(start, numbers.Integral) or not 0 <= start <= model.n_layers:
        raise ValueError(f"start_at_layer must be a layer, 0 .. {model.n_layers}, got {start!r}")
    if start_from.logits.shape[:-1] != tokens.shape or not np.array_equal(
            start_from.embedding, model.W_E[tokens] + model.W_pos[:tokens.shape[-1]]):
        raise ValueError("start_from must be the Trace of these same tokens")
    early = [s for s in edits if isinstance(s, str) or s[0] < start or (s[1] == "stream" and s[0] == start)]
    if early:
        raise ValueError(f"edits of {', '.join(sites.site_name(s) for s in early)} come before start_at_layer ="
                         f" {start}: they would not be applied")
    return int(start)


def available() -> list:
    """Names of the shipped models, for :func:`load`.

    Examples
    --------
    >>> "induction" in available()
    True
    """
    return sorted(p.stem for p in MODELS.glob("*.npz") if p.with_suffix(".json").exists())


def checkpoints(name, dtype=np.float64) -> dict:
    """The weights a shipped model had along its training, by step (its card's ``checkpoints``).

    Stored in float16 (they are read for attention weights and scores, not for the
    last digit); checked against the SHA-256 in the card, as :func:`load` does.

    Returns
    -------
    dict of int to Model
        Step to model, in training order; each card is the final model's
        with ``"step"`` set.
    """
    final = load(name, dtype)
    info = final.card.get("checkpoints")
    if not info:
        raise ValueError(f"model {final.card.get('name', name)!r} was shipped without checkpoints")
    path = Path(name).with_name(info["file"]) if Path(name).suffix == ".npz" else MODELS / info["file"]
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    if info["sha256"] != weights_sha256(arrays):
        raise ValueError(f"the checkpoints in {path} do not match the SHA-256 in the card: retrain with `make model`")
    out = {}
    for step in info["steps"]:
        a = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith(f"step{step}.")}
        layers = [Weights(*(a[f"L{l}.{k}"] for k in ("W_Q", "W_K", "W_V", "W_O")), final.layers[l].n_heads)
                  for l in range(final.n_layers)]
        smear = [a[f"L{l}.smear"] for l in range(final.n_layers)] if "L0.smear" in a else None
        card = {**final.card, "step": step}
        out[step] = Model(a["W_E"], a.get("W_pos", final.W_pos), a["W_U"], layers, card, final.tokenizer,
                          final.corpus, smear).astype(dtype)
    return out


def load(name, dtype=np.float64) -> Model:
    """A shipped model by name (see ``available()``), or a model file by path.

    The weights are checked against the SHA-256 in their card, so a file
    changed after training is refused rather than silently read.

    Parameters
    ----------
    name : str or path
        ``"induction"``, or the path of a ``.npz`` with a ``.json`` card beside it.
    dtype : float32 or float64
        Computing dtype (the files hold float32; float64 makes the book's
        numbers independent of summation order).

    Returns
    -------
    Model
    """
    if not isinstance(name, (str, Path)):
        raise TypeError(f"name must be a model name or a path, got {type(name).__name__}")
    path = Path(name)
    if path.suffix != ".npz":
        if str(name) not in available():
            raise ValueError(f"no model called {name!r}: the shipped models are {available()}")
        path = MODELS / f"{name}.npz"
    card_path = path.with_suffix(".json")
    if not path.exists() or not card_path.exists():
        raise FileNotFoundError(f"a model needs both {path} and its card {card_path}")
    card = json.loads(card_path.read_text())
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    if card.get("sha256") != weights_sha256(arrays):
        raise ValueError(f"the weights in {path} do not match the SHA-256 in {card_path.name}:"
                         " the file was changed after training (retrain it with `make model`)")
    n_heads = card["n_heads"]
    layers = [Weights(*(arrays[f"L{l}.{k}"] for k in ("W_Q", "W_K", "W_V", "W_O")), n_heads)
              for l in range(card["n_layers"])]
    positions = card.get("positions", {"kind": "learned"})
    if positions["kind"] == "sinusoidal":
        W_pos = sinusoidal_positions(card["n_ctx"], card["d_model"], positions["scale"])
    else:
        W_pos = arrays["W_pos"]
    tokenizer = BPE.from_arrays(arrays) if "tokenizer.vocab" in arrays else None
    corpus = {k.removeprefix("corpus."): v for k, v in arrays.items() if k.startswith("corpus.")}
    smear = [arrays[f"L{l}.smear"] for l in range(card["n_layers"])] if "L0.smear" in arrays else None
    return Model(arrays["W_E"], W_pos, arrays["W_U"], layers, card, tokenizer, corpus, smear).astype(dtype)
