"""Parameter and FLOP counts of each form (chapter 7's cost table).

FLOPs count matrix products only, ``2 · m · k · n`` for an ``(m, k) @ (k, n)``
product: softmax, scaling and the sums over heads are lower order. The
``weights`` column counts the one-off products that build ``W^P_i`` and
``W^M_i``, which a materialised form can cache between calls.
"""
from __future__ import annotations

from ._validate import check_positive_int


def _mm(m, k, n):
    return 2 * m * k * n


def _dims(T, d_model, n_heads, d_head):
    T = check_positive_int(T, "T")
    d_model = check_positive_int(d_model, "d_model")
    n_heads = check_positive_int(n_heads, "n_heads")
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(f"d_model = {d_model} is not divisible by n_heads = {n_heads}; pass d_head")
        d_head = d_model // n_heads
    return T, d_model, n_heads, check_positive_int(d_head, "d_head")


def parameters(form: str, d_model: int, n_heads: int, d_head: int | None = None) -> int:
    """Numbers stored by a form (no biases).

    Examples
    --------
    >>> parameters("concat", 512, 8), parameters("patterns_and_messages", 512, 8)
    (1048576, 4194304)
    """
    _, D, h, d = _dims(1, d_model, n_heads, d_head)
    factors = 4 * D * h * d  # W_Q, W_K, W_V, W_O
    table = {
        "concat": factors,
        "sum_of_heads": factors,
        "values": factors,
        "messages": 2 * D * h * d + h * D * D,  # W_Q, W_K and one W^M_i per head
        "patterns_and_messages": 2 * h * D * D,  # one W^P_i and one W^M_i per head
        "factored": factors,  # the factors of W^P_i and W^M_i are the original weights
    }
    if form not in table:
        raise KeyError(f"unknown form {form!r}; expected one of {sorted(table)}")
    return table[form]


def flops(form: str, T: int, d_model: int, n_heads: int, d_head: int | None = None) -> dict:
    """Matmul FLOPs of one forward pass over ``T`` tokens.

    Returns
    -------
    dict
        ``{"forward": ..., "weights": ...}``: per-call FLOPs, and the one-off
        FLOPs of building ``W^P_i``/``W^M_i`` (0 for forms that do not).

    Examples
    --------
    >>> flops("concat", T=1, d_model=4, n_heads=2)["forward"]  # 4 projections of 2·1·4·4, + 2 heads·2·(2·1·1·2)
    144
    """
    T, D, h, d = _dims(T, d_model, n_heads, d_head)
    qkv = 3 * _mm(T, D, h * d)  # X W_Q, X W_K, X W_V (all heads)
    scores = h * _mm(T, d, T)  # Q_i K_iᵀ
    mix_small = h * _mm(T, T, d)  # A_i V_i, values of size d_head
    out = _mm(T, h * d, D)  # Concat(...) W_O  ==  Σ_i head_i W^O_i
    qk = 2 * _mm(T, D, h * d)
    table = {
        "concat": (qkv + scores + mix_small + out, 0),
        "sum_of_heads": (qkv + scores + mix_small + out, 0),
        # values: X W^V_i W^O_i is T × d_model per head, and A_i mixes all d_model columns
        "values": (qk + scores + _mm(T, D, h * d) + h * _mm(T, d, D) + h * _mm(T, T, D), 0),
        "messages": (qk + scores + h * _mm(T, D, D) + h * _mm(T, T, D), h * _mm(D, d, D)),
        "patterns_and_messages": (
            h * _mm(T, D, D) + h * _mm(T, D, T)  # P_i = X W^P_i, P_i Xᵀ
            + h * _mm(T, D, D) + h * _mm(T, T, D),  # M_i = X W^M_i, A_i M_i
            2 * h * _mm(D, d, D),
        ),
        "factored": (qkv + scores + mix_small + out, 0),
    }
    if form not in table:
        raise KeyError(f"unknown form {form!r}; expected one of {sorted(table)}")
    forward, weights = table[form]
    return {"forward": forward, "weights": weights}


def decode_cost(t: int, d_model: int, n_heads: int, d_head: int | None = None,
                cache: str = "kv") -> dict:
    """Matmul FLOPs and cache size for generating one token with ``t`` in context.

    Parameters
    ----------
    t : int
        Tokens the new token attends to, itself included.
    cache : {"kv", "x"}
        ``"kv"``: keep every head's keys and values (``2 · t · h · d_head``
        numbers) and attend in ``d_head`` dimensions. ``"x"``: keep only the
        residual stream ``X`` (``t · d_model`` numbers, shared by all heads)
        and use the patterns-and-messages form, ``p_t = x_t W^Q_i W^K_iᵀ``,
        logits ``p_t · x_s``, message ``(Σ_s a_s x_s) W^V_i W^O_i``, so each
        head attends in ``d_model`` dimensions.

    Returns
    -------
    dict
        ``{"flops": ..., "cache": ...}`` (cache in numbers, not bytes).

    Examples
    --------
    >>> decode_cost(100, 768, 12)["cache"], decode_cost(100, 768, 12, cache="x")["cache"]
    (153600, 76800)
    """
    t, D, h, d = _dims(t, d_model, n_heads, d_head)
    if cache == "kv":
        flops_ = 3 * _mm(1, D, h * d) + 2 * h * _mm(1, d, t) + _mm(1, h * d, D)
        return {"flops": flops_, "cache": 2 * t * h * d}
    if cache == "x":
        per_head = 2 * _mm(1, D, d) + 2 * _mm(1, D, t) + 2 * _mm(1, D, d)
        return {"flops": h * per_head, "cache": t * D}
    raise ValueError(f"cache must be 'kv' or 'x', got {cache!r}")
