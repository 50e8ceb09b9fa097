"""The forward pass as ``Model.trace`` computed it before ``Model.run`` (commit ec3a348), kept as a baseline.

`make bench` times ``Model.run`` (which also names and caches every site, and
applies edits) against this loop, which did neither. Nothing else uses it.
"""
import numpy as np

from attnlib.attention import attention_weights


def trace_before(model, tokens):
    """Logits, attention weights, writes and the stream, as the old ``Model.trace(tokens)`` returned them."""
    T = tokens.shape[-1]
    x = model.W_E[tokens] + model.W_pos[:T]  # (..., T, d_model)
    stream, weights, writes = [x], [], []
    for l, w in enumerate(model.layers):
        h, d = w.n_heads, w.d_head
        QKV = x @ w.W_QKV  # (..., T, 3 * n_heads * d_head)
        QKV = np.swapaxes(QKV.reshape(*QKV.shape[:-1], 3 * h, d), -3, -2)  # (..., 3 * n_heads, T, d_head)
        Q, K, V = QKV[..., :h, :, :], QKV[..., h:2 * h, :, :], QKV[..., 2 * h:, :, :]
        if model.smear is not None:
            s = model.smear[l][:, None, None]
            K = s * K + (1 - s) * np.concatenate([K[..., :1, :], K[..., :-1, :]], axis=-2)
        A = attention_weights(Q, K, causal=True)  # (..., n_heads, T, T)
        out = (A @ V) @ w.per_head.W_O  # (..., n_heads, T, d_model)
        x = x + out.sum(axis=-3)
        weights.append(A)
        writes.append(out)
        stream.append(x)
    return x @ model.W_U, weights, writes, np.stack(stream)
