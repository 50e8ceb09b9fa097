"""Patterns and messages as low-rank matrices: the QK and OV circuits (chapters 5-7, 10-13).

For head ``i``:

* ``W^P_i = W^Q_i (W^K_i)ᵀ`` (``d_model × d_model``): the *pattern* matrix.
  ``x_t W^P_i x_sᵀ`` is how strongly token ``t`` looks for token ``s``.
* ``W^M_i = W^V_i W^O_i`` (``d_model × d_model``): the *message* matrix.
  ``x_s W^M_i`` is what token ``s`` writes into the residual stream when read.

These are TransformerLens's ``QK.AB`` and ``OV.AB``. In the column-vector
convention of Elhage et al. (2021), ``W^P_i`` *is* their ``W_QK`` (a bilinear
form keeps the query on the left) and ``W^M_i`` is the transpose of their
``W_OV`` (a linear map flips).

In a trained model the same matrices are read in token space, between the
embedding and the unembedding (:func:`full_ov_circuit`,
:func:`full_qk_circuit`), summarised by :func:`copying_score`, and compared
across layers by :func:`composition_score`, each against a null: what
random Gaussian heads give (:func:`composition_null`, :func:`copying_null`)
or what the trained heads give with their messages turned at random, their
spectra kept (:func:`rotated_composition_null`, :func:`rotated_copying_null`).
"""
from __future__ import annotations

import numpy as np

from ._validate import as_float_array, check_finite, check_positive_int, check_seed
from .lowrank import LowRank
from .weights import Weights, check_weights, random_weights


def qk_circuit(weights: Weights) -> LowRank:
    """Pattern matrices ``W^P_i = W^Q_i (W^K_i)ᵀ`` for every head, as factors.

    Returns
    -------
    LowRank of shape (n_heads, d_model, d_model), rank at most d_head

    Examples
    --------
    >>> W_P = qk_circuit(random_weights(8, 2, seed=0))
    >>> W_P.shape, W_P.rank_bound
    ((2, 8, 8), 4)
    """
    W_Q, W_K, _, _ = check_weights(weights).per_head
    return LowRank(W_Q, np.swapaxes(W_K, -1, -2))  # (n_heads, d_model, d_head) @ (n_heads, d_head, d_model)


def ov_circuit(weights: Weights) -> LowRank:
    """Message matrices ``W^M_i = W^V_i W^O_i`` for every head, as factors.

    Returns
    -------
    LowRank of shape (n_heads, d_model, d_model), rank at most d_head

    Examples
    --------
    >>> ov_circuit(random_weights(8, 2, seed=0))[1].shape
    (8, 8)
    """
    _, _, W_V, W_O = check_weights(weights).per_head
    return LowRank(W_V, W_O)  # (n_heads, d_model, d_head) @ (n_heads, d_head, d_model)


# --- circuits in token space (chapters 10-13) ---------------------------------

def full_ov_circuit(W_E, weights: Weights, W_U) -> LowRank:
    """What each token, if attended to, writes into each output logit: ``W_E W^M_i W_U``.

    Row ``a`` says how a head that attends to token ``a`` (through its
    embedding alone: the direct path) moves the logit of every token. A head
    that copies has a large positive diagonal. The ``vocab × vocab`` matrix
    has rank at most ``d_head`` and is never formed.

    Parameters
    ----------
    W_E : (vocab_in, d_model) array_like
        Token embeddings (or any rows of them).
    weights : Weights
    W_U : (d_model, vocab_out) array_like
        Unembedding (or any columns of it).

    Returns
    -------
    LowRank of shape (n_heads, vocab_in, vocab_out)

    Examples
    --------
    >>> w = random_weights(8, 2, seed=0)
    >>> full_ov_circuit(np.eye(5, 8), w, np.eye(8, 5)).shape
    (2, 5, 5)
    """
    return _token_matrix(W_E, "W_E", weights) @ ov_circuit(weights) @ _token_matrix(W_U, "W_U", weights, rows=True)


def full_qk_circuit(W_E, weights: Weights, W_E_key=None) -> LowRank:
    """How much each query token wants each key token: ``W_E W^P_i W_E_keyᵀ`` (unscaled score).

    With ``W_E_key = W_E`` (the default) this is the token part of the
    score ``x_t W^P_i x_sᵀ``; with position embeddings on both sides,
    ``full_qk_circuit(W_pos, w)``, its positional part; with the keys seen
    through an earlier head's message, ``W_E_key = W_E W^M_j``, the key side
    of K-composition.

    Parameters
    ----------
    W_E : (vocab_q, d_model) array_like
        What the queries read (token or position embeddings).
    weights : Weights
    W_E_key : (vocab_k, d_model) array_like or LowRank, optional
        What the keys read; default ``W_E``.

    Returns
    -------
    LowRank of shape (n_heads, vocab_q, vocab_k)
        Entry ``(i, a, b)`` is ``e_a W^P_i e_bᵀ``, before the ``1/√d_head`` scale.

    Examples
    --------
    >>> w = random_weights(8, 2, seed=0)
    >>> full_qk_circuit(np.eye(3, 8), w).shape
    (2, 3, 3)
    """
    W_E = _token_matrix(W_E, "W_E", weights)
    if W_E_key is None:
        W_key = W_E
    elif isinstance(W_E_key, LowRank):
        if W_E_key.ndim != 2 or W_E_key.shape[-1] != weights.d_model:
            raise ValueError(f"W_E_key is a LowRank of shape {W_E_key.shape}, expected (vocab_k, d_model ="
                             f" {weights.d_model})")
        W_key = W_E_key
    else:
        W_key = _token_matrix(W_E_key, "W_E_key", weights)
    return W_E @ qk_circuit(weights) @ W_key.T


def _token_matrix(W, name, weights, rows=False) -> np.ndarray:
    """``W`` as a float matrix whose model-dimension side matches ``weights``."""
    W = as_float_array(W, name)
    axis = 0 if rows else 1
    if W.ndim != 2 or W.shape[axis] != check_weights(weights).d_model:
        want = "(d_model, vocab)" if rows else "(vocab, d_model)"
        raise ValueError(f"{name} has shape {W.shape}, expected {want} with d_model = {weights.d_model}")
    check_finite(W, name)
    return W


def copying_score(circuit) -> np.ndarray:
    """How much a square circuit copies: ``Σ λ / Σ |λ|`` over its eigenvalues.

    1 when every eigenvalue is positive (a token raises its own logit), −1
    when every one is negative, about 0 for a random matrix. The
    eigenvalues come from the small ``B A`` of the factors
    (:meth:`LowRank.eigenvalues`), so a ``50,257 × 50,257`` circuit costs a
    ``d_head × d_head`` eigenproblem.

    Parameters
    ----------
    circuit : LowRank or (..., n, n) array_like
        E.g. :func:`full_ov_circuit` (leading head axes are kept).

    Returns
    -------
    (...) ndarray
        One score per matrix, in ``[-1, 1]``.

    Examples
    --------
    >>> copying_score(LowRank(np.eye(4, 2), 3 * np.eye(2, 4))).round(3)
    np.float64(1.0)
    """
    if isinstance(circuit, LowRank):
        ev = circuit.eigenvalues()  # (..., k), complex in general
    else:
        M = as_float_array(circuit, "circuit", min_ndim=2)
        if M.shape[-1] != M.shape[-2]:
            raise ValueError(f"circuit must be square, got shape {M.shape}")
        check_finite(M, "circuit")
        ev = np.linalg.eigvals(M)
    total = np.abs(ev).sum(axis=-1)
    if np.any(total == 0):
        raise ValueError("the circuit is zero: its copying score is undefined")
    return ev.real.sum(axis=-1) / total


_KINDS = {
    # later head reads the earlier head's message ... through its
    "q": "queries: W^M_e W^P_l",
    "k": "keys: W^P_l (W^M_e)ᵀ",
    "v": "values: W^M_e W^M_l",
}


def _score(kind: str, later: Weights, earlier: Weights, pairs: bool) -> np.ndarray:
    """Composition scores, for every (later, earlier) pair of heads or head by head."""
    P_l, M_l, M_e = qk_circuit(later), ov_circuit(later), ov_circuit(earlier)
    if pairs:  # later heads along axis 0, earlier heads along axis 1
        P_l, M_l = (LowRank(W.A[:, None], W.B[:, None]) for W in (P_l, M_l))
        M_e = LowRank(M_e.A[None], M_e.B[None])
    if kind == "q":
        composed, part = M_e @ P_l, P_l
    elif kind == "k":
        composed, part = P_l @ M_e.T, P_l
    else:
        composed, part = M_e @ M_l, M_l
    return composed.norm() / (part.norm() * M_e.norm())


def composition_score(kind: str, later: Weights, earlier: Weights) -> np.ndarray:
    """How strongly each later head reads what each earlier head writes (Elhage et al.).

    An earlier head ``e`` writes ``y W^M_e`` into the stream; a later head
    ``l`` reads it in its queries (``(y W^M_e) W^P_l x_sᵀ``), its keys
    (``x_t W^P_l (y W^M_e)ᵀ``) or its values (``y W^M_e W^M_l``). The score
    is the Frobenius norm of that composed matrix relative to the norms of
    its two parts,

        ``‖W^M_e W^P_l‖ / (‖W^M_e‖ ‖W^P_l‖)`` (Q),
        ``‖W^P_l (W^M_e)ᵀ‖ / (‖W^P_l‖ ‖W^M_e‖)`` (K),
        ``‖W^M_e W^M_l‖ / (‖W^M_e‖ ‖W^M_l‖)`` (V),

    which is the circuits paper's ``‖W_QKᵀ W_OV‖``, ``‖W_QK W_OV‖`` and
    ``‖W_OV W_OV‖`` rewritten for row vectors (``W_QK = W^P``,
    ``W_OV = (W^M)ᵀ``). Compare it with :func:`composition_baseline`.

    Parameters
    ----------
    kind : {"q", "k", "v"}
    later, earlier : Weights
        Two layers of one model (same ``d_model``).

    Returns
    -------
    (later.n_heads, earlier.n_heads) ndarray
        Entry ``[l, e]`` for later head ``l`` and earlier head ``e``.

    Examples
    --------
    >>> w0, w1 = random_weights(16, 2, seed=0), random_weights(16, 4, seed=1)
    >>> composition_score("k", w1, w0).shape
    (4, 2)
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)} (what the later head reads with), got {kind!r}")
    check_weights(later), check_weights(earlier)
    if later.d_model != earlier.d_model:
        raise ValueError(f"later has d_model = {later.d_model} but earlier has {earlier.d_model}: not one model")
    return _score(kind, later, earlier, pairs=True)


def composition_baseline(kind: str, d_model: int, d_head: int, samples: int = 200, seed=0) -> float:
    """The mean :func:`composition_score` of random heads of the same shape.

    Random Gaussian ``W^Q, W^K, W^V, W^O`` factors (``d_model × d_head``)
    compose only by chance: their score is what "no composition" looks like
    at this size. It is about ``1 / √d_model`` whatever ``d_head`` is (0.125
    at ``d_model = 64``, 0.088 at 128): the composed matrix's entries are
    sums of products of directions that random heads place independently in
    ``d_model`` dimensions, and two random unit vectors there have an inner
    product of about ``1 / √d_model``; a head's width changes how many such
    terms there are, in the numerator and the denominator alike.

    Returns
    -------
    float

    Examples
    --------
    Times ``√d_model``, about 1 at a narrow head and at a wide one:

    >>> [float(round(composition_baseline("k", 64, d, samples=50) * 8, 1)) for d in (4, 32)]
    [1.0, 1.0]
    """
    rng = np.random.default_rng(check_seed(seed))
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    samples = check_positive_int(samples, "samples")
    # `samples` independent heads per layer, compared head i with head i
    later = random_weights(d_model, samples, seed=rng, d_head=d_head)
    earlier = random_weights(d_model, samples, seed=rng, d_head=d_head)
    return float(_score(kind, later, earlier, pairs=False).mean())


# --- nulls: what random weights give (compare a score with these, not with 0) ---

def composition_null(kind: str, d_model: int, d_head: int, samples: int = 200, seed=0) -> np.ndarray:
    """:func:`composition_score` of ``samples`` pairs of random heads: the score's spread by chance.

    The same random heads as :func:`composition_baseline` (whose value is
    this sample's mean, for the same ``samples`` and ``seed``). A pair of
    trained heads composes *above chance* only if its score is above most of
    this sample (e.g. its 95th percentile), not merely above its mean.
    Gaussian heads have nearly flat spectra: :func:`rotated_composition_null`
    keeps the trained heads' singular values, and is usually wider.

    Returns
    -------
    (samples,) ndarray

    Examples
    --------
    >>> null = composition_null("k", 64, 16, samples=50)
    >>> null.shape, bool(np.isclose(null.mean(), composition_baseline("k", 64, 16, samples=50)))
    ((50,), True)
    """
    rng = np.random.default_rng(check_seed(seed))
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    samples = check_positive_int(samples, "samples")
    later = random_weights(d_model, samples, seed=rng, d_head=d_head)  # drawn as composition_baseline does
    earlier = random_weights(d_model, samples, seed=rng, d_head=d_head)
    return _score(kind, later, earlier, pairs=False)


def copying_null(model, n: int = 200, seed=0, layer: int = 0, tokens=None) -> np.ndarray:
    """Copying scores of random OV circuits read through the model's own ``W_E`` and ``W_U``.

    A head's copying score (:func:`copying_score` of ``W_E W^M W_U``) is
    not about 0 by default when the embeddings themselves correlate (``W_U``
    close to ``W_Eᵀ`` makes even a random ``W^M`` lean one way). This draws
    ``n`` heads with random ``W_V``, ``W_O`` of the layer's ``d_head``
    (:func:`~attnlib.weights.random_weights`) and scores each through the
    model's embeddings: a trained head copies *above chance* only if its
    score is above most of this sample. :func:`rotated_copying_null` keeps
    each trained head's singular values instead.

    Parameters
    ----------
    model : Model
        Anything with ``W_E`` (vocab, d_model), ``W_U`` (d_model, vocab) and ``layers``.
    n : int
        Number of random heads.
    seed : int or numpy.random.Generator
    layer : int
        Whose ``d_head`` the random heads take.
    tokens : (k,) array_like of int, optional
        The tokens the circuit is read over; default every token but the
        model's BOS and its tokenizer's unknown token (``text.text_tokens``
        for a model of text).

    Returns
    -------
    (n,) ndarray
        In ``[-1, 1]``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> null = copying_null(load("copy_back"), n=100)
    >>> null.shape, bool(abs(null.mean()) < 0.2)
    ((100,), True)
    """
    n = check_positive_int(n, "n")
    if not 0 <= layer < len(model.layers):
        raise ValueError(f"layer must be in 0 .. {len(model.layers) - 1}, got {layer}")
    ids = _copy_tokens(model, tokens)
    w = random_weights(model.W_E.shape[1], n, seed=check_seed(seed), d_head=model.layers[layer].d_head)
    return copying_score(full_ov_circuit(model.W_E[ids], w, model.W_U[:, ids]))


# --- spectrum-preserving nulls: a trained head's message, turned at random ---------

def random_orthogonal(d: int, seed=0) -> np.ndarray:
    """A random ``d × d`` rotation (orthogonal matrix), uniform over all of them (Haar).

    The Q factor of a Gaussian matrix's QR decomposition, its columns' signs
    fixed by ``R``'s diagonal (without that fix the draw is not uniform).

    Parameters
    ----------
    d : int
    seed : int or numpy.random.Generator

    Returns
    -------
    (d, d) ndarray
        ``Q`` with ``Q Qᵀ = I``.

    Examples
    --------
    >>> Q = random_orthogonal(5, seed=0)
    >>> bool(np.allclose(Q @ Q.T, np.eye(5)))
    True
    """
    d = check_positive_int(d, "d")
    rng = np.random.default_rng(check_seed(seed))
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.sign(np.diag(R))  # (d, d)


def rotated_weights(weights: Weights, seed=0) -> Weights:
    """The same heads with every message matrix turned on both sides: ``W^M_i → U W^M_i V``.

    ``U`` and ``V`` are random rotations of the model space
    (:func:`random_orthogonal`, one pair shared by the layer's heads):
    ``W_V → U W_V`` and ``W_O → W_O V``. Each ``W^M_i`` keeps its singular
    values (its spectrum: how much it writes, and in how many directions)
    but reads and writes directions chosen at random. The pattern matrices
    are unchanged. This is the spectrum-preserving null's draw
    (:func:`rotated_composition_null`, :func:`rotated_copying_null`).

    Parameters
    ----------
    weights : Weights
    seed : int or numpy.random.Generator
        ``U`` is drawn first, then ``V``.

    Returns
    -------
    Weights

    Examples
    --------
    >>> w = random_weights(8, 2, seed=0)
    >>> s = lambda w: np.linalg.svd(ov_circuit(w).full(), compute_uv=False)
    >>> bool(np.allclose(s(rotated_weights(w, seed=1)), s(w)))
    True
    """
    w = check_weights(weights)
    rng = np.random.default_rng(check_seed(seed))
    U, V = random_orthogonal(w.d_model, rng), random_orthogonal(w.d_model, rng)  # (d_model, d_model) each
    return Weights(w.W_Q, w.W_K, U @ w.W_V, w.W_O @ V, w.n_heads)


def rotated_composition_null(kind: str, later: Weights, earlier: Weights, samples: int = 200,
                             seed=0) -> np.ndarray:
    """:func:`composition_score` with the earlier heads' messages turned at random: a null that keeps spectra.

    :func:`composition_null` draws both heads Gaussian, and a Gaussian head's
    singular values are nearly flat. A trained head's are not: a message
    that writes a few strong directions composes more, by chance, with
    whatever reads them. This null keeps the later head as it is and each
    earlier head's ``W^M`` up to a random rotation on both sides
    (:func:`rotated_weights`): its spectrum kept, its directions random. It
    is usually wider than the Gaussian null, and it is specific to each
    pair of heads.

    Parameters
    ----------
    kind : {"q", "k", "v"}
    later, earlier : Weights
        Two layers of one model (same ``d_model``).
    samples : int
        Number of random rotations.
    seed : int or numpy.random.Generator

    Returns
    -------
    (samples, later.n_heads, earlier.n_heads) ndarray
        ``[s, l, e]``: later head ``l`` against earlier head ``e`` turned by
        the ``s``-th rotation; compare ``composition_score(kind, later,
        earlier)[l, e]`` with a quantile over ``s``.

    Examples
    --------
    >>> w0, w1 = random_weights(16, 2, seed=0), random_weights(16, 4, seed=1)
    >>> rotated_composition_null("k", w1, w0, samples=10).shape
    (10, 4, 2)
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    check_weights(later), check_weights(earlier)
    if later.d_model != earlier.d_model:
        raise ValueError(f"later has d_model = {later.d_model} but earlier has {earlier.d_model}: not one model")
    samples = check_positive_int(samples, "samples")
    rng = np.random.default_rng(check_seed(seed))
    return np.stack([_score(kind, later, rotated_weights(earlier, rng), pairs=True) for _ in range(samples)])


def _copy_tokens(model, tokens) -> np.ndarray:
    """The token ids a copying null reads its circuits over (default: all but BOS and unknown)."""
    vocab = model.W_E.shape[0]
    if tokens is None:
        tok = getattr(model, "tokenizer", None)
        skip = {getattr(model, "bos", None), getattr(tok, "unk", None) if tok is not None else None}
        tokens = [i for i in range(vocab) if i not in skip]
    ids = np.asarray(tokens)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) < 2 or ids.min() < 0 or ids.max() >= vocab:
        raise ValueError(f"tokens must be at least 2 token ids in 0 .. {vocab - 1}, got {tokens!r}")
    return ids


def rotated_copying_null(model, layer: int = 0, n: int = 200, seed=0, tokens=None) -> np.ndarray:
    """Copying scores of each head of a layer with its ``W^M`` turned at random (spectrum kept).

    The spectrum-preserving counterpart of :func:`copying_null`: head
    ``i``'s message ``U W^M_i V`` (:func:`rotated_weights`) keeps its
    singular values, so a head that writes a few strong directions is
    compared with heads that write as strongly, in random directions,
    read through the model's own ``W_E`` and ``W_U``. The eigenvalues come
    from ``W_O V (W_U W_E) U W_V`` (``d_head × d_head`` per head), the small
    side of the full circuit ``W_E U W_V W_O V W_U``.

    Parameters
    ----------
    model : Model
        Anything with ``W_E`` (vocab, d_model), ``W_U`` (d_model, vocab) and ``layers``.
    layer : int
    n : int
        Number of random rotations.
    seed : int or numpy.random.Generator
    tokens : (k,) array_like of int, optional
        As :func:`copying_null` (default: every token but BOS and unknown).

    Returns
    -------
    (n, n_heads) ndarray
        ``[s, i]``: head ``i``'s copying score under the ``s``-th rotation, in ``[-1, 1]``.

    Examples
    --------
    >>> from attnlib.model import load
    >>> rotated_copying_null(load("copy_back"), n=20).shape
    (20, 1)
    """
    n = check_positive_int(n, "n")
    if not 0 <= layer < len(model.layers):
        raise ValueError(f"layer must be in 0 .. {len(model.layers) - 1}, got {layer}")
    ids = _copy_tokens(model, tokens)
    w = check_weights(model.layers[layer])
    _, _, W_V, W_O = w.per_head  # (n_heads, d_model, d_head), (n_heads, d_head, d_model)
    G = model.W_U[:, ids] @ model.W_E[ids]  # (d_model, d_model): unembedding, then embedding
    rng = np.random.default_rng(check_seed(seed))
    out = np.empty((n, w.n_heads))
    for s in range(n):
        U, V = random_orthogonal(w.d_model, rng), random_orthogonal(w.d_model, rng)
        small = W_O @ (V @ G @ U) @ W_V  # (n_heads, d_head, d_head): B A of the rotated full circuit
        out[s] = copying_score(small)
    return out
