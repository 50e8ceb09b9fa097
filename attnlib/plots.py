"""Figures for the book: every one labelled, with a colourbar where colour means a number.

Colour maps are perceptually uniform and colourblind-safe (viridis for
weights, cividis for signed or secondary quantities). Figures keep a white
face so they stay readable when the book is switched to its dark theme.
Functions draw on a given ``ax`` (or make a figure) and return the Figure.
Notebooks assign it (``fig = plots.attention_heatmap(...)``) so that Jupyter
shows it exactly once.
"""
from __future__ import annotations

import numpy as np


import matplotlib.pyplot as plt

from ._deprecated import renamed_function

FACE = "white"


def _ax(ax, figsize=(4.2, 3.6)):
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, facecolor=FACE, layout="constrained")
    return ax


def _array(x, name, ndim, shape):
    """``x`` as a float array with ``ndim`` axes, else an error naming the expected shape."""
    x = np.asarray(x, dtype=float)
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {shape}, got shape {x.shape}")
    return x


def _signed_image(ax, M, **kwargs):
    """``M`` on a cividis scale symmetric about zero (so 0 is the middle colour)."""
    lim = float(np.abs(M).max()) or 1.0
    return ax.imshow(M, cmap="cividis", vmin=-lim, vmax=lim, **kwargs)


def _ramp(n):
    """``n`` viridis colours, stopping short of the palest yellow (unreadable on white)."""
    return plt.get_cmap("viridis")(np.linspace(0, 0.85, n))


def _token_labels(tokens, n):
    if tokens is None:
        return [str(i) for i in range(n)]
    tokens = [str(t) for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"tokens has {len(tokens)} labels, expected {n} (one per row)")
    return tokens


def attention_heatmap(A, tokens=None, keys=None, ax=None, title=None, colorbar=True,
                      annotate=None):
    """Heatmap of attention weights: row = query, column = key.

    Parameters
    ----------
    A : (T_q, T_k) array_like
        Attention weights (rows sum to one).
    tokens : list of str, optional
        Query labels (and key labels, unless ``keys`` is given).
    keys : list of str, optional
        Key labels when they differ from the queries.
    ax : matplotlib Axes, optional
    title : str, optional
    colorbar : bool
    annotate : bool, optional
        Write each weight in its cell (default: when the matrix is small).

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _heatmap(A, tokens, keys, ax, title, colorbar, annotate).figure


def _heatmap(A, tokens=None, keys=None, ax=None, title=None, colorbar=True, annotate=None):
    A = _array(A, "A", 2, "one (T_q, T_k) matrix of attention weights")
    ax = _ax(ax)
    q_labels = _token_labels(tokens, A.shape[0])
    k_labels = _token_labels(keys if keys is not None else tokens, A.shape[1])
    im = ax.imshow(A, cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal")
    # At most about 12 labels per axis: beyond that they overlap (and are slow to draw).
    rows, cols = range(0, A.shape[0], -(-A.shape[0] // 12)), range(0, A.shape[1], -(-A.shape[1] // 12))
    ax.set_xticks(cols, [k_labels[j] for j in cols], rotation=90 if A.shape[1] > 6 else 0)
    ax.set_yticks(rows, [q_labels[i] for i in rows])
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = A.size <= 64
    if annotate:
        for (i, j), a in np.ndenumerate(A):
            ax.text(j, i, f"{a:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if a > 0.6 else "white")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="attention weight", shrink=0.85)
    return im


def head_attention_weights(A, tokens=None, titles=None, ncols=4, size=2.4):
    """Small multiples: one heatmap of attention weights per head, one shared colourbar.

    Parameters
    ----------
    A : (n_heads, T, T) array_like
    tokens : list of str, optional
    titles : list of str, optional
        Default ``head 0``, ``head 1``, ...

    Returns
    -------
    matplotlib.figure.Figure
    """
    A = _array(A, "A", 3, "(n_heads, T, T)")
    h = A.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 0.8, size * nrows + 0.3),
                             squeeze=False, facecolor=FACE, layout="constrained")
    titles = titles or [f"head {i}" for i in range(h)]
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.set_axis_off()
            continue
        im = _heatmap(A[i], tokens, ax=ax, title=titles[i], colorbar=False, annotate=False)
        if i % ncols:
            ax.set_ylabel("")
        if i < h - ncols:
            ax.set_xlabel("")
    fig.colorbar(im, ax=axes, label="attention weight", shrink=0.8)
    return fig


def matrix_heatmap(W, ax=None, title=None, label="value", row_labels=None, col_labels=None,
                   row_blocks=None, col_blocks=None, ylabel=None, xlabel=None, colorbar=True):
    """A signed matrix (e.g. one ``W^P_i``) on a symmetric cividis scale.

    Parameters
    ----------
    W : (m, n) array_like
    ax : matplotlib Axes, optional
    title, label : str
    row_labels : list of str, optional
        Label the rows (e.g. with tokens) instead of model dimensions.
    col_labels : list of str, optional
        Label the columns (e.g. with the names of model dimensions).
    row_blocks, col_blocks : int, optional
        Draw a white line every ``row_blocks`` rows (``col_blocks`` columns):
        the blocks of a matrix split by head, such as the ``W^O_i`` of ``W^O``.
    ylabel, xlabel : str, optional
        Axis titles (default: model dimension, or token for ``row_labels``).
    colorbar : bool

    Returns
    -------
    matplotlib.figure.Figure
    """
    W = _array(W, "W", 2, "a matrix")
    ax = _ax(ax)
    im = _signed_image(ax, W)
    ax.set_xlabel("column (model dimension)" if xlabel is None else xlabel)
    ax.set_ylabel("row (model dimension)" if ylabel is None else ylabel)
    if row_labels is not None:
        ax.set_yticks(range(W.shape[0]), _token_labels(row_labels, W.shape[0]))
        ax.set_ylabel("token" if ylabel is None else ylabel)
    if col_labels is not None:
        ax.set_xticks(range(W.shape[1]), _token_labels(col_labels, W.shape[1]), rotation=90)
    for blocks, line, size in ((row_blocks, ax.axhline, W.shape[0]), (col_blocks, ax.axvline, W.shape[1])):
        for edge in range(blocks or size, size, blocks or size):
            line(edge - 0.5, color="white", lw=2.5)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label=label, shrink=0.85)
    return ax.figure


def spectrum(values, labels=None, ax=None, title="singular values", rank_line=None, log=True):
    """Singular values (one line per matrix) on a log scale.

    Parameters
    ----------
    values : (k, n) array_like
        ``k`` spectra of ``n`` values each, in decreasing order.
    labels : list of str, optional
    rank_line : int, optional
        Draw a vertical line after this many values (e.g. at ``d_head``).
    log : bool
        A log scale (zeros drawn at 1e-18); ``False`` for a linear one, where
        exact zeros sit on the axis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    values = np.atleast_2d(np.asarray(values, dtype=float))
    ax = _ax(ax, figsize=(5.2, 3.4))
    colours = _ramp(len(values))
    idx = np.arange(1, values.shape[1] + 1)
    # Each line its own marker and dash, later ones hollow and larger: lines that
    # coincide (two equal spectra) still show both.
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    for k, (s, c) in enumerate(zip(values, colours)):
        marker, dash = styles[k % len(styles)]
        style = dict(marker=marker, ls=dash, color=c, label=labels[k] if labels else None,
                     ms=3 + 2.5 * (k > 0), mfc="none" if k > 0 else c, lw=1.2)
        if log:
            ax.semilogy(idx, np.maximum(s, 1e-18), **style)
        else:
            ax.plot(idx, s, **style)
    if rank_line is not None:
        ax.axvline(rank_line + 0.5, color="grey", ls="--", lw=1)
        ax.text(rank_line + 0.7, ax.get_ylim()[1], f"d_head = {rank_line}", va="top", fontsize=8)
    ax.set_xlabel("index (largest first)")
    ax.set_ylabel("singular value (log scale)" if log else "singular value")
    ax.set_title(title)
    if labels:
        ax.legend(fontsize=7, ncol=2)
    return ax.figure


def head_contributions(parts, tokens=None, token=0, ax=None, dims=12):
    """What each head writes for one token, and that the writes add up.

    Parameters
    ----------
    parts : (n_heads, T, d_model) array_like
        Head ``i``'s contribution to the output.
    token : int
        Which row (token) to show.
    dims : int
        How many model dimensions to draw.

    Returns
    -------
    matplotlib.figure.Figure
    """
    parts = _array(parts, "parts", 3, "(n_heads, T, d_model)")
    h, T, D = parts.shape
    dims = min(dims, D)
    rows = np.vstack([parts[:, token, :dims], parts[:, token, :dims].sum(axis=0)])  # (h + 1, dims)
    ax = _ax(ax, figsize=(6.0, 0.45 * (h + 1) + 1.4))
    im = _signed_image(ax, rows, aspect="auto")
    ax.axhline(h - 0.5, color="white", lw=3)
    ax.set_yticks(range(h + 1), [f"head {i}" for i in range(h)] + ["sum = output"])
    ax.set_xticks(range(dims))
    ax.set_xlabel(f"model dimension (first {dims} of {D})")
    name = tokens[token] if tokens is not None else token
    ax.set_title(f"what each head writes for token {name!r}")
    ax.figure.colorbar(im, ax=ax, label="value", shrink=0.85)
    return ax.figure


def landing_scatter(weights, labels, ax=None, title="where c lands"):
    """Monte Carlo outcomes: weight on v_a against weight on v_b, one cloud per setting.

    Parameters
    ----------
    weights : list of (n_trials, 2) array_like
        For each setting, the coefficients of ``v_a`` and ``v_b`` in ``c``.
    labels : list of str
        One label per setting.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(weights) != len(labels):
        raise ValueError(f"got {len(weights)} settings but {len(labels)} labels")
    ax = _ax(ax, figsize=(4.6, 4.2))
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.8, len(weights)))
    markers = "o^sDv"
    for k, (w, label, colour) in enumerate(zip(weights, labels, colours)):
        w = np.asarray(w, dtype=float)
        ax.scatter(w[:, 0], w[:, 1], s=12, alpha=0.6, color=colour, marker=markers[k % 5], label=label)
    ax.plot([0, 1], [1, 0], color="grey", lw=1, ls=":")
    ax.plot([0.5], [0.5], "k+", ms=14, mew=2, label="½(v_a + v_b)")
    ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03), aspect="equal",
           xlabel="weight on v_a", ylabel="weight on v_b", title=title)
    ax.legend(fontsize=8, loc="upper right")
    return ax.figure


def alpha_vs_beta(weight, ns=(3, 10, 100, 1000), betas=None, ax=None,
                  title="averaging two of n keys"):
    """The weight on each averaged key, ``weight(n, β)``, against β for several n.

    Parameters
    ----------
    weight : callable
        ``weight(n, beta) -> float``, e.g. the exercise's ``averaging_weight``.
    ns : sequence of int
        Numbers of keys, one curve each.
    betas : (k,) array_like, optional
        Default ``linspace(0, 12, 200)``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    betas = np.linspace(0, 12, 200) if betas is None else np.asarray(betas, dtype=float)
    ax = _ax(ax, figsize=(5.5, 3.4))
    colours = _ramp(len(ns))
    for n, colour in zip(ns, colours):
        ax.plot(betas, [weight(n, b) for b in betas], color=colour, label=f"n = {n}")
    ax.axhline(0.5, color="grey", ls="--", lw=1)
    ax.set(xlabel=r"$\beta$", ylabel=r"weight on key a, $\alpha_a$", title=title)
    ax.legend()
    return ax.figure


def circuit_heatmap(M, rows=None, cols=None, ax=None, title=None, row_label="source token",
                    col_label="output token", label="logit change", causal=False, ticks=12):
    """A token- or position-space circuit (e.g. ``W_E W^M_i W_U``) on a symmetric cividis scale.

    Parameters
    ----------
    M : (m, n) array_like
    rows, cols : list of str, optional
        Labels of the rows and columns (default: their indices).
    row_label, col_label, label : str
        Axis titles and colourbar title.
    causal : bool
        Blank the entries above the diagonal (keys a query cannot see).
    ticks : int
        At most this many labels per axis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    M = _array(M, "M", 2, "a matrix").copy()
    if causal:
        M[np.triu_indices(M.shape[0], 1, M.shape[1])] = np.nan  # masked: drawn blank
    ax = _ax(ax, figsize=(4.6, 3.9))
    lim = float(np.nanmax(np.abs(M))) or 1.0
    im = ax.imshow(M, cmap="cividis", vmin=-lim, vmax=lim)
    r, c = _token_labels(rows, M.shape[0]), _token_labels(cols, M.shape[1])
    at_r, at_c = range(0, M.shape[0], -(-M.shape[0] // ticks)), range(0, M.shape[1], -(-M.shape[1] // ticks))
    ax.set_yticks(at_r, [r[i] for i in at_r])
    ax.set_xticks(at_c, [c[j] for j in at_c], rotation=90 if M.shape[1] > 6 else 0)
    ax.set(xlabel=col_label, ylabel=row_label)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, label=label, shrink=0.85)
    return ax.figure


def bars(values, labels, ax=None, title=None, xlabel="value", reference=None, reference_label=None,
         highlight=()):
    """Horizontal bars, one per labelled value (path contributions, accuracies, scores).

    Parameters
    ----------
    values : (k,) array_like
    labels : list of str
    reference : float, optional
        Draw a dashed vertical line there (a baseline, chance, a threshold).
    highlight : collection of int
        Bars to draw in the strong colour (the others are pale).

    Returns
    -------
    matplotlib.figure.Figure
    """
    values = _array(values, "values", 1, "(k,)")
    if len(labels) != len(values):
        raise ValueError(f"got {len(values)} values but {len(labels)} labels")
    ax = _ax(ax, figsize=(5.2, 0.3 * len(values) + 1.3))
    strong, pale = plt.get_cmap("viridis")(0.3), plt.get_cmap("viridis")(0.75)
    ax.barh(range(len(values)), values, color=[strong if i in highlight else pale for i in range(len(values))])
    ax.set_yticks(range(len(values)), labels)
    ax.invert_yaxis()  # first label on top
    ax.axvline(0, color="black", lw=0.8)
    if reference is not None:
        ax.axvline(reference, color="grey", ls="--", lw=1)
        if reference_label:  # above the top bar, clear of the bars
            ax.text(reference, -0.7, reference_label, ha="center", va="bottom", fontsize=8, color="dimgrey")
            ax.set_ylim(len(values) - 0.5, -1.1)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return ax.figure


def eigenvalue_plane(ev, labels=None, ax=None, title="eigenvalues"):
    """Eigenvalues in the complex plane: copying circuits sit on the positive real axis.

    Parameters
    ----------
    ev : (n,) array_like of complex, or a list of them
        The eigenvalues of one circuit, or of several (one array each).
    labels : list of str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(ev) and np.ndim(ev[0]) == 0:
        ev = [ev]  # one circuit
    ev = [np.asarray(e, dtype=complex).ravel() for e in ev]
    if labels is not None and len(labels) != len(ev):
        raise ValueError(f"got {len(ev)} sets of eigenvalues but {len(labels)} labels")
    ax = _ax(ax, figsize=(4.4, 3.8))
    for k, (row, colour) in enumerate(zip(ev, _ramp(len(ev)))):
        ax.scatter(row.real, row.imag, s=16, color=colour, marker="os^D"[k % 4],
                   label=labels[k] if labels else None)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    lim = 1.08 * float(max(np.abs(e).max(initial=0.0) for e in ev) or 1.0)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="real part", ylabel="imaginary part",
           title=title)
    if labels:
        ax.legend(fontsize=8)
    return ax.figure


# The old names, from before the book kept "pattern" for the rows of X W^P and "weights" for the
# parameters: the same functions, warning (as attnlib.attention_pattern does), so old notebooks keep running.
_PARAMETERS_ONLY = "'weights' alone means the parameters"
weights_heatmap = renamed_function(attention_heatmap, "attnlib.plots.weights_heatmap", _PARAMETERS_ONLY)
head_weights = renamed_function(head_attention_weights, "attnlib.plots.head_weights", _PARAMETERS_ONLY)
pattern_heatmap = renamed_function(attention_heatmap, "attnlib.plots.pattern_heatmap", "a pattern is a row of X W^P")
head_patterns = renamed_function(head_attention_weights, "attnlib.plots.head_patterns", "a pattern is a row of X W^P")


def model_overview(tokens=("the", "cat", "sat"), predictions=("cat", "sat", "on"), ax=None):
    """The model around one attention layer: tokens in, a next-token prediction out.

    One column per token, bottom to top: the token; its embedding (word plus
    position) starts its residual stream; the attention layer's heads read
    the residual streams of the tokens it may see and each adds its term; the
    unembedding turns the last residual stream into output logits, whose
    largest names the predicted next token.

    Parameters
    ----------
    tokens : sequence of str
        The input tokens, one column each (three or four fit).
    predictions : sequence of str
        The next token each column predicts (written at the top).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = model_overview(("the", "cat"), ("cat", "sat"))
    >>> len(fig.axes[0].patches) > 0
    True
    """
    tokens, predictions = [str(t) for t in tokens], [str(p) for p in predictions]
    if len(tokens) != len(predictions) or not tokens:
        raise ValueError(f"tokens has {len(tokens)} entries and predictions {len(predictions)}:"
                         " give one prediction per token (at least one)")
    from matplotlib.patches import FancyBboxPatch

    n = len(tokens)
    ax = _ax(ax, figsize=(2.3 * n + 2.6, 6.4))
    ax.set_xlim(-2.9, 2.3 * (n - 1) + 1.2)
    ax.set_ylim(-0.6, 8.1)
    ax.set_axis_off()
    viridis = plt.get_cmap("viridis")

    def pale(v, amount):  # a viridis colour mixed with white: fills that black text reads on
        return tuple(amount + (1 - amount) * np.array(viridis(v)[:3]))

    light, mid, dark, stream = pale(0.9, 0.7), pale(0.55, 0.6), viridis(0.15), viridis(0.35)

    def box(x, y, w, h, text, face="white", size=9, weight="normal"):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04",
                                    facecolor=face, edgecolor=dark, lw=1.2))
        ax.text(x, y, text, ha="center", va="center", fontsize=size, color="black", weight=weight)

    def arrow(x0, y0, x1, y1, colour=dark):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.3, shrinkA=0, shrinkB=0))

    xs = [2.3 * k for k in range(n)]
    band = (xs[0] - 1.0, xs[-1] + 1.0)
    for t, (x, token, nxt) in enumerate(zip(xs, tokens, predictions), start=1):
        box(x, 0.0, 1.5, 0.6, f"“{token}”", face=light, weight="bold")
        arrow(x, 0.32, x, 0.78)
        box(x, 1.25, 1.8, 0.8, f"embedding\n{token} + position {t}", face=light, size=8)
        ax.plot([x, x], [1.67, 5.55], color=stream, lw=7, solid_capstyle="butt", zorder=0)
        ax.add_patch(plt.Circle((x, 4.2), 0.2, facecolor="white", edgecolor=dark, lw=1.2, zorder=3))
        ax.text(x, 4.2, "+", ha="center", va="center", fontsize=11, color="black", zorder=4)
        arrow(x + 0.45, 3.62, x + 0.2, 4.05)  # the layer's output, added into the stream
        arrow(x - 0.02, 2.45, x - 0.02, 2.82)  # the stream, read by the heads
        box(x, 6.0, 1.5, 0.75, "unembedding\n$W_U$", face=light, size=8)
        arrow(x, 6.4, x, 6.95)
        box(x, 7.35, 1.6, 0.6, f"next: “{nxt}”", face="white", size=9, weight="bold")
    ax.add_patch(FancyBboxPatch((band[0], 2.85), band[1] - band[0], 0.75, boxstyle="round,pad=0.04",
                                facecolor=mid, edgecolor=dark, lw=1.2, zorder=2))
    ax.text((band[0] + band[1]) / 2, 3.22, "attention layer: heads 0, 1, …, each reads the streams"
            " and adds a term", ha="center", va="center", fontsize=8.5, color="black", zorder=3)
    lx = band[0] - 0.15
    notes = [(0.0, "tokens"), (1.25, "token and\nposition\nembeddings"), (2.4, "residual\nstream $x_t$\n"
             "($d_\\mathrm{model}$\nnumbers)"), (3.22, "every head\nreads it and\nwrites into it"),
             (4.85, "(more layers\nin a deep\nmodel)"), (6.0, "output logits\n$x_t W_U$"),
             (7.35, "prediction")]
    for y, text in notes:
        ax.text(lx, y, text, ha="right", va="center", fontsize=8, color="black")
    return ax.figure


def _label_box(text: str, ax, style: str = "normal") -> tuple:
    """The width and height, in pixels, of a value's label at fontsize 9 with its box (measured, and a margin)."""
    renderer = ax.figure.canvas.get_renderer()
    t = ax.text(0, 0, text, fontsize=9, style=style, bbox=dict(boxstyle="round,pad=0.12"))
    t.update_bbox_position_size(renderer)
    box = t.get_bbox_patch().get_window_extent(renderer)
    t.remove()
    return box.width + 3, box.height + 2


def _clear(at, w, h, boxes, placed) -> bool:
    """Whether a label of ``w`` by ``h`` pixels centred ``at`` meets none of ``boxes`` (node extents) and
    none of ``placed`` ((x0, y0, x1, y1) of the labels drawn so far)."""
    x0, y0, x1, y1 = at[0] - w / 2, at[1] - h / 2, at[0] + w / 2, at[1] + h / 2
    if any(x0 < b.x1 and b.x0 < x1 and y0 < b.y1 and b.y0 < y1 for b in boxes):
        return False
    return not any(x0 < c and a < x1 and y0 < d and b < y1 for a, b, c, d in placed)


def plot_graph(links, ax=None, token_names=None, tokens=None):
    """Draw an attribution graph: positions across, levels up; edge width by ``|value|`` within its unit.

    Each node has a column of its own; each edge takes the straightest arc
    that passes no other node's box, and its value is written on it where the
    label meets no box and no other label. A node's ``"(rest)"`` edge (the
    sum of the edges left out) is written beside the node, ``rest +0.41``
    (:func:`~attnlib.attribution.graph_table` lists every edge). A legend
    below says what colour and line style mean.

    Parameters
    ----------
    links : list of attnlib.attribution.Link
    ax : matplotlib Axes, optional
    token_names : list of str, optional
        With ``tokens``: each embedding node is labelled with the token at its position.
    tokens : (T,) array_like of int, optional
        The sequence the graph was made from.

    Returns
    -------
    matplotlib Axes
    """
    if (token_names is None) != (tokens is None):
        raise ValueError("plot_graph labels an embedding node with the token at its position: give both"
                         " token_names and tokens (the sequence), or neither")
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 7.5), layout="constrained")
    drawn = [e for e in links if e.source.term != "(rest)"]
    rest = [e for e in links if e.source.term == "(rest)" and e.target in {n for d in drawn for n in (d.source, d.target)}]
    nodes = sorted({n for e in drawn for n in (e.source, e.target)}, key=lambda n: (n.position, n.level, n.term))
    xy = {n: (2.2 * j, 2.0 * n.level) for j, n in enumerate(nodes)}  # one column per node
    cmap = plt.get_cmap("viridis")
    biggest = {u: max(abs(e.value) for e in drawn if e.unit == u) or 1.0 for u in {e.unit for e in drawn}}
    xs = [x for x, _ in xy.values()]
    ys = [y for _, y in xy.values()]
    ax.set_xlim(min(xs) - 1.3, max(xs) + 1.3)
    ax.set_ylim(min(ys) - 1.8, max(ys) + 0.6)  # room for a row's nodes stepped down (below)
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=cmap(0.85), lw=3, label="adds to its target"),
               Line2D([], [], color=cmap(0.3), lw=3, label="takes from it"),
               Line2D([], [], color="grey", lw=1.5, label="in logits"),
               Line2D([], [], color="grey", lw=1.5, ls=(0, (4, 1.5)), label="in score-contrast units")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=4, fontsize=9, frameon=False)
    ax.set_xticks([])
    levels = sorted({n.level for n in nodes})
    top_level = max(n.level for n in nodes if n.term.startswith("logit")) if any(
        n.term.startswith("logit") for n in nodes) else None
    ax.set_yticks([2.0 * v for v in levels],
                  ["embedding" if v == 0 else "logit" if v == top_level else
                   f"layer {int(v - 0.5)} score" if v % 1 else f"layer {int(v) - 1}" for v in levels])
    ax.set_xlabel("nodes by position, left to right (each label ends with its position)")
    ax.figure.draw_without_rendering()  # the layout settled: pixel positions below stay true
    # the nodes first: their boxes (in pixels) are what the edges and their labels keep clear of
    boxes = {}
    for n, (x, y) in xy.items():
        label = n.term
        if n.term == "embed" and tokens is not None:
            label = f"embed\n{token_names[int(np.asarray(tokens)[n.position])]!r}"
        boxes[n] = ax.text(x, y, f"{label}\n@{n.position}", ha="center", va="center", fontsize=10, zorder=4,
                           color="black", bbox=dict(boxstyle="round,pad=0.3", fc=cmap(0.6), ec="black", lw=0.5))
    renderer = ax.figure.canvas.get_renderer()

    def box_of(n):  # the box drawn around the label, not only its text, in pixels
        boxes[n].update_bbox_position_size(renderer)
        return boxes[n].get_bbox_patch().get_window_extent(renderer).expanded(1.06, 1.1)

    extent = {n: box_of(n) for n in nodes}
    for a, b in zip(nodes, nodes[1:]):  # a node whose box would touch its neighbour's on the same row steps
        if a.level == b.level and xy[a][1] == 2.0 * a.level and extent[a].overlaps(extent[b]):  # down
            xy[b] = (xy[b][0], 2.0 * b.level - 0.9)
            boxes[b].set_position(xy[b])
            extent[b] = box_of(b)
    if not any(xy[n][1] != 2.0 * n.level for n in nodes):  # no row stepped down: no room kept for one
        ax.set_ylim(min(ys) - 0.9, max(ys) + 0.6)
        extent = {n: box_of(n) for n in nodes}
    to_px, to_data = ax.transData.transform, ax.transData.inverted().transform
    along = np.linspace(0, 1, 41)[:, None]

    def curve(p0, p1, bend):  # arc3's quadratic Bezier, in pixels: (41, 2)
        control = (p0 + p1) / 2 + bend * np.array([(p1 - p0)[1], -(p1 - p0)[0]])
        return (1 - along) ** 2 * p0 + 2 * (1 - along) * along * control + along ** 2 * p1

    def hits(points, box):
        return bool(np.any((points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                           & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)))

    placed = []  # the label boxes drawn so far, in pixels: (x0, y0, x1, y1)
    for e in sorted(drawn, key=lambda e: -abs(e.value)):  # the largest edges choose first
        p0, p1 = to_px([xy[e.source], xy[e.target]])
        others = [b for n, b in extent.items() if n not in (e.source, e.target)]
        # the straightest bend whose curve keeps clear of every other node's box
        sign = -1.0 if p1[0] > p0[0] else 1.0  # rise, then cross
        steps = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.42, 0.5, 0.58, 0.65, 0.72, 0.8, 0.9, 1.0)
        bends = [0.0] + [sign * b for b in steps] + [-sign * b for b in steps]
        bend = min(bends, key=lambda b: sum(hits(curve(p0, p1, b)[2:-2], box) for box in others))
        colour = cmap(0.85 if e.value >= 0 else 0.3)  # both readable on white and on black
        ax.annotate("", xy[e.target], xy[e.source], zorder=1,
                    arrowprops=dict(arrowstyle="-|>", color=colour, lw=0.8 + 3 * abs(e.value) / biggest[e.unit],
                                    linestyle="-" if e.unit == "logit" else (0, (4, 1.5)),
                                    patchA=boxes[e.source].get_bbox_patch(),
                                    patchB=boxes[e.target].get_bbox_patch(), shrinkA=2, shrinkB=3,
                                    connectionstyle=f"arc3,rad={bend}"))
        # the value on its curve, at the first point along it where its box meets no node and no label
        points = curve(p0, p1, bend)
        text = f"{e.value:+.2f}"
        w, h = _label_box(text, ax)

        order = sorted(range(5, 37), key=lambda i: abs(i - 20))  # from the middle of the curve outwards,
        spots = [points[i] for i in order] + [points[i] + (0, dy) for dy in (h, -h)  # then just beside it
                                               for i in order]
        at = next((p for p in spots if _clear(p, w, h, extent.values(), placed)), points[20])
        placed.append((at[0] - w / 2, at[1] - h / 2, at[0] + w / 2, at[1] + h / 2))
        ax.text(*to_data(at), text, fontsize=9, ha="center", va="center", zorder=3, color="black",
                bbox=dict(boxstyle="round,pad=0.12", fc="white", ec=colour, lw=0.6))
    for e in rest:  # beside its node: below it, else above, else to a side, where it meets no box and no label
        text = f"rest {e.value:+.2f}"
        w, h = _label_box(text, ax, "italic")
        b = extent[e.target]
        spots = [((b.x0 + b.x1) / 2, b.y0 - h / 2 - 1), ((b.x0 + b.x1) / 2, b.y1 + h / 2 + 1),
                 (b.x1 + w / 2 + 1, (b.y0 + b.y1) / 2), (b.x0 - w / 2 - 1, (b.y0 + b.y1) / 2)]
        inside = ax.get_window_extent(renderer)
        spots = [p for p in spots if inside.x0 + w / 2 < p[0] < inside.x1 - w / 2
                 and inside.y0 + h / 2 < p[1] < inside.y1 - h / 2] or spots
        at = next((np.array(p) for p in spots if _clear(p, w, h, extent.values(), placed)), np.array(spots[0]))
        placed.append((at[0] - w / 2, at[1] - h / 2, at[0] + w / 2, at[1] + h / 2))
        ax.text(*to_data(at), text, fontsize=9, ha="center", va="center", zorder=3, color="black", style="italic",
                bbox=dict(boxstyle="round,pad=0.12", fc="white", ec="grey", lw=0.6, ls=":"))
    return ax
