"""Interactive figures: live controls redraw, scrubbers are self-contained and respond."""
import re

import matplotlib

matplotlib.use("agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import attnlib  # noqa: E402
from attnlib import widgets  # noqa: E402
from attnlib.model import load  # noqa: E402


def sampler(means, alpha, rng, wide=None):
    keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)
    if wide is not None:
        keys[wide] *= 1 + np.sqrt(0.5) * rng.standard_normal()
    return keys


@pytest.fixture
def explorers():
    w = attnlib.random_weights(16, 4, seed=0)
    X = np.random.default_rng(0).standard_normal((6, 16))
    keys = np.eye(5)
    return {
        "beta": widgets.beta_explorer(keys, keys[0] + keys[1]),
        "noise": widgets.noise_explorer(np.eye(4), np.eye(4), 30 * (np.eye(4)[0] + np.eye(4)[1]), sampler, 0, 1, trials=30),
        "head": widgets.head_explorer(X, w, list("abcdef")),
        "model": widgets.model_explorer(load("induction"), [50, 1, 2, 3, 1, 2, 3]),
    }


def test_each_value_draws_a_different_picture(explorers):
    for name, e in explorers.items():
        e.update(e.values[0])
        first = e.png()
        e.update(e.values[-1])
        assert e.png() != first, f"{name}: the figure does not change"
        e.update(e.values[0])
        assert e.png() == first, f"{name}: going back does not restore the figure"


def test_live_controls_redraw(explorers):
    counts = {"beta": 1, "noise": 2, "head": 2, "model": 2}  # β; α and wide key; head and causal; layer and head
    for name, e in explorers.items():
        box = e.widget()
        *controls, out = box.children
        assert len(controls) == counts[name], name
        before = e.png()
        last = controls[-1]
        last.value = last.options[-1][1] if isinstance(last.options[-1], tuple) else last.options[-1]
        assert e.png() != before, f"{name}: moving a control does not redraw"


@pytest.mark.slow
def test_scrubber_is_self_contained_and_described(explorers):
    for name, e in explorers.items():
        page = e.scrubber().data
        assert not re.search(r"""(src|href)=["']https?://""", page), f"{name} loads something from the web"
        assert re.search(r'<img alt="[^"]{20,}"', page), f"{name}: the frame has no alt text"
        assert 'class="anim-slider"' in page and 'aria-label=' in page
        assert page.count("data:image/png;base64") >= len(e.values) or "frames[" in page
        assert "fa fa-" not in page, f"{name}: icons need a web font"


def test_explorer_rejects_bad_input():
    with pytest.raises(ValueError, match="alt text"):
        widgets.Explorer(matplotlib.figure.Figure(), lambda v: None, [1, 2], "x", alt="")
    with pytest.raises(ValueError, match="two values"):
        widgets.Explorer(matplotlib.figure.Figure(), lambda v: None, [1], "x", alt="a figure")
    with pytest.raises(ValueError, match=r"\(5, 5\).*\(3,\)"):
        widgets.beta_explorer(np.eye(5), np.ones(3))
    with pytest.raises(ValueError, match="only one head"):
        widgets.model_explorer(load("copy_back"), [1, 2, 3])


def test_model_explorer_shows_each_heads_pattern_and_its_largest_circuit_entries():
    model = load("induction")
    tokens = [50, 3, 7, 9, 3, 7, 9]
    e = widgets.model_explorer(model, tokens, top=5)
    assert e.values == [(l, i) for l in range(2) for i in range(4)]
    pats = model.attention_weights(tokens)
    ov = attnlib.circuits.full_ov_circuit(model.W_E, model.layers[1], model.W_U).full()
    e.update((1, 2))
    pattern_ax, bar_ax = e.fig.axes[:2]  # (the third is the colour bar)
    image, bars = pattern_ax.images[0], bar_ax.patches
    np.testing.assert_array_equal(image.get_array(), pats[1][2])
    np.testing.assert_allclose(sorted(b.get_width() for b in bars), np.sort(ov[2].ravel())[-5:])
    labels = [t.get_text() for t in bar_ax.get_yticklabels()]
    a, b = np.unravel_index(ov[2].argmax(), ov[2].shape)
    assert labels[0] == f"{model.token_names[a]} → {model.token_names[b]}"


@pytest.mark.slow
def test_print_form_is_a_grid_of_frames_and_leaves_the_figure_as_it_was(explorers):
    from PIL import Image
    import io

    for name, e in explorers.items():
        before = e.png()
        grid = e.frames_png()
        assert grid.startswith(b"\x89PNG"), name
        assert e.png() == before, f"{name}: drawing the print form changed the live figure"
        width, height = Image.open(io.BytesIO(grid)).size
        assert width == 6.5 * 200, (name, width)
        one = e.frames_png(max_frames=1)
        assert Image.open(io.BytesIO(one)).size[1] < height, f"{name}: one frame is not smaller than several"
    with pytest.raises(ValueError, match="max_frames"):
        explorers["beta"].frames_png(max_frames=0)


@pytest.mark.slow
def test_the_print_form_is_drawn_on_demand_and_does_not_depend_on_the_live_figure(explorers):
    e = explorers["beta"]
    s = e.scrubber()
    assert callable(s._png), "the print form was drawn before anything asked for it"
    e.update(e.values[-1])  # the reader moved the slider before the print form was asked for
    assert s.png == e.frames_png()
    assert s.png is s.png  # drawn once
    assert s._repr_html_() == s.data and s._repr_png_() is s.png  # the web page's player, the PDF's grid
    with pytest.raises(TypeError, match="png must be"):
        type(s)("<p></p>", png="not bytes")


def test_every_option_of_every_control_shows_as_selected(explorers):
    # A selection widget treats the value None as "nothing selected": the noise
    # explorer's "wide key: none" (value None) could never be shown as chosen.
    for name, e in explorers.items():
        for control in e.widget().children[:-1]:
            for index, (label, _) in enumerate(control.options):
                control.index = index
                assert control.index == index, f"{name}: choosing {control.description} = {label} selects nothing"
            control.index = 0
            assert control.index == 0, f"{name}: the first {control.description} ({control.options[0][0]}) selects nothing"


def test_the_noise_explorer_starts_with_no_wide_key_chosen_and_can_go_back_to_it(explorers):
    e = explorers["noise"]
    alpha, wide = e.widget().children[:2]
    assert wide.description == "wide key"
    assert wide.index == 0 and wide.label == "none", "the 'wide key' toggle starts with nothing selected"
    first = e.png()
    wide.index = 1
    assert e.png() != first
    wide.index = 0
    assert wide.label == "none" and e.png() == first, "choosing 'none' again does not show all keys round"


def test_head_explorer_without_the_mask_has_one_control_and_names_the_heads():
    from attnlib import example

    ex = example.sentence()
    e = widgets.head_explorer(ex.X, ex.weights, ex.tokens, causal=(False,), head_names=ex.heads)
    assert e.values == [(0, False), (1, False)]
    *controls, out = e.widget().children
    assert len(controls) == 1
    before = e.png()
    controls[0].value = 1  # the second head
    assert e.png() != before
    assert e.fig.axes[0].get_title() == "head 1: next token"
    assert "chooses the head" in e.alt and "masked" not in e.alt
    with pytest.raises(ValueError, match="head_names has 1 names, expected n_heads = 2"):
        widgets.head_explorer(ex.X, ex.weights, causal=(False,), head_names=["one"])


@pytest.mark.slow
def test_message_explorer_shows_the_pattern_the_messages_read_and_the_term_written():
    from attnlib import example

    ex = example.sentence()
    e = widgets.message_explorer(ex.X, ex.weights, ex.tokens, ex.features, head_names=ex.heads)
    assert e.values == [(i, t) for i in range(2) for t in range(6)]
    assert [name for name, _ in e.controls] == ["head", "token"]
    W_P, W_M = (c.full() for c in (attnlib.qk_circuit(ex.weights), attnlib.ov_circuit(ex.weights)))
    A = attnlib.attention_weights(ex.X @ ex.weights.W_Q_heads, ex.X @ ex.weights.W_K_heads)  # (2, T, T)
    ax_p, ax_m, ax_s = e.fig.axes[:3]
    for i, t in [(0, 2), (1, 4), (0, 0)]:
        e.update((i, t))
        assert np.allclose(ax_p.images[0].get_array()[:, 0], ex.X[t] @ W_P[i])  # the pattern p_t
        assert np.allclose(ax_m.images[0].get_array(), (ex.X @ W_M[i]).T)  # every message, one column each
        before, term, after = np.asarray(ax_s.images[0].get_array()).T
        assert np.array_equal(before, ex.X[t])
        assert np.allclose(term, A[i, t] @ ex.X @ W_M[i]) and np.allclose(after, before + term)
        outlined = [s for s, box in enumerate(ax_m.patches) if box.get_visible()]
        assert outlined == list(np.flatnonzero(A[i, t] > 0.1))
        assert [lab.get_text().split("\n")[1] for lab in ax_m.get_xticklabels()] == [f"{a:.2f}" for a in A[i, t]]
        assert ex.tokens[t] in e.fig._suptitle.get_text()
    # head 0 at "sat": it reads "cat" and writes prev:cat, new in "sat"'s residual stream
    e.update((0, 2))
    term = ax_s.images[0].get_array()[:, 1]
    assert [s for s, box in enumerate(ax_m.patches) if box.get_visible()] == [1]
    assert term[ex.features.index("prev:cat")] > 0.9 and ex.X[2, ex.features.index("prev:cat")] == 0
    html = e.scrubber()._repr_html_()
    assert html.count('aria-label="head and token"') == 1 and "“sat”" in html
    # the print form shows each head at "sat", in the middle, where each reads another token
    assert [e.values[i] for i in e.printed] == [(0, 2), (1, 2)]
    with pytest.raises(ValueError, match="printed"):
        widgets.Explorer(e.fig, lambda v: None, [0, 1], "x", alt="a figure", printed=[2])
    assert re.search(r'<img alt="[^"]{20,}"', html) and "fa fa-" not in html
    assert not re.search(r"""(src|href)=["']https?://""", html)  # self-contained: works offline
    head, token, _ = e.widget().children  # live controls: the head and the token
    before = e.png()
    token.index = 3
    assert e.png() != before and e.fig._suptitle.get_text().endswith("“on”")
    with pytest.raises(ValueError, match="features has 3 names"):
        widgets.message_explorer(ex.X, ex.weights, ex.tokens, ["a", "b", "c"])
    with pytest.raises(ValueError, match="tokens has 2 names"):
        widgets.message_explorer(ex.X, ex.weights, ["a", "b"], ex.features)
