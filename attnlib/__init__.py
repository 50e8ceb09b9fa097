"""attnlib: multi-head attention, refactored into patterns and messages.

The modules follow the book's chapters, and none imports a later one:

======================  ==========================================
:mod:`.normalize`       softmax with a mask, the causal mask
:mod:`.attention`       scaled dot-product attention (chapter 1)
:mod:`.heads`           split_heads / merge_heads (chapter 2)
:mod:`.weights`         Weights, random_weights (chapter 2)
:mod:`.multihead`       the Vaswani concat form (chapter 2)
:mod:`.lowrank`         LowRank: a product kept as factors
:mod:`.circuits`        qk_circuit (W^P), ov_circuit (W^M)
:mod:`.forms`           FORMS: one function per step of the refactor
:mod:`.cost`            parameter and FLOP counts of each form
:mod:`.example`         a hand-built layer whose heads mean something (on demand)
:mod:`.plots`           figures (imported on demand)
:mod:`.widgets`         ipywidgets controls (imported on demand)
======================  ==========================================
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

__all__ = [
    "softmax", "causal_mask", "attention", "attention_pattern", "attention_weights",
    "split_heads", "merge_heads", "Weights", "PerHead", "random_weights",
    "multihead_attention", "LowRank", "qk_circuit", "ov_circuit",
]
