"""attnlib: multi-head attention, refactored into patterns and messages.

The modules follow the book's chapters, and none imports a later one:
:data:`ORDER` lists them in that order, with what each holds
(``tests/attnlib/test_module_order.py`` checks every import against it).
Figures (:mod:`.plots`), interactive figures (:mod:`.widgets`), the hand-built
example (:mod:`.example`) and the trained models (:mod:`.model`) are imported
on demand.
"""
from .normalize import causal_mask, softmax
from .attention import attention, attention_pattern, attention_weights
from .heads import merge_heads, split_heads
from .weights import PerHead, Weights, random_weights
from .multihead import multihead_attention
from .lowrank import LowRank
from .circuits import ov_circuit, qk_circuit
from . import cost, forms  # noqa: F401  (attnlib.forms.FORMS, attnlib.cost.* without a second import)

__version__ = "0.1.0"

ORDER = (
    ("_validate", "input validation every public function runs first: clear errors instead of numpy's"),
    ("_deprecated", "old names kept working, with a warning that names the new one"),
    ("normalize", "softmax with a mask, the causal mask"),
    ("attention", "scaled dot-product attention (chapter 1)"),
    ("heads", "split_heads / merge_heads (chapter 2)"),
    ("weights", "Weights, random_weights (chapter 2)"),
    ("multihead", "the Vaswani concat form (chapter 2)"),
    ("lowrank", "LowRank: a product kept as factors"),
    ("circuits", "qk_circuit (W^P), ov_circuit (W^M)"),
    ("forms", "FORMS: one function per step of the refactor (chapters 3-8)"),
    ("cost", "parameter and FLOP counts of each form"),
    ("example", "a hand-built layer whose heads mean something"),
    ("grader", "while the grader judges a cell: the instructor's functions in place, the library's answers withheld"),
    ("checks", "the exercises' checks: what is wrong, never what is right"),
    ("probes", "the exercises' probes: values the grader compares"),
    ("tokenizer", "the BPE tokenizer of the models of text"),
    ("sites", "the named sites of a forward pass, and edits of them"),
    ("model", "trained models and their one forward pass, Model.run (chapters 10-15)"),
    ("tasks", "the synthetic tasks the small models learn"),
    ("metrics", "accuracy, loss and head scores (chapters 10-13)"),
    ("text", "models of text: copying scores, bigrams (chapter 14)"),
    ("paths", "path-specific ablation: an edge cut from one reader (chapters 12-15)"),
    ("incontext", "induction and in-context scores (chapters 12-15)"),
    ("attribution", "exact attributions and activation patching (chapter 16)"),
    ("objectives", "metrics of the logits and their gradients: what a patch is measured by (chapter 17)"),
    ("backward", "the exact gradient of a metric, by hand (chapter 17)"),
    ("methods", "an effect split and attribution patching (chapter 17)"),
    ("discovery", "circuit discovery: edge effects, EAP, ACDC, a planted benchmark (chapter 17)"),
    ("plots", "figures"),
    ("widgets", "interactive figures"),
)
"""Every module, in the order of the book: a module imports only those above it."""

__all__ = [
    "softmax", "causal_mask", "attention", "attention_pattern", "attention_weights",
    "split_heads", "merge_heads", "Weights", "PerHead", "random_weights",
    "multihead_attention", "LowRank", "qk_circuit", "ov_circuit",
]
