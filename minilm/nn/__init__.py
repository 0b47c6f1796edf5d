"""Transformer building blocks: attention, embeddings, norms, feed-forward, blocks and stacks.

Every model of the course (Transformer, GPT, BERT, RoBERTa, ALBERT, ELECTRA, BART, T5) is composed from these.
Masks are bool with True = may attend, broadcastable to (B, nh, Tq, Tk); see :mod:`minilm.nn.attention`.
"""

from .attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    scaled_dot_product_attention_reference,
)
from .blocks import (
    BlockConfig,
    DecoderBlock,
    EncoderBlock,
    LayerCache,
    TransformerDecoder,
    TransformerEncoder,
    TransformerOutput,
)
from .embeddings import (
    LearnedPositionEmbedding,
    SinusoidalPositionEmbedding,
    TransformerEmbedding,
    sinusoidal_positions,
)
from .feedforward import ACTIVATIONS, FeedForward
from .norms import RMSNorm, make_norm

__all__ = [
    "ACTIVATIONS",
    "BlockConfig",
    "DecoderBlock",
    "EncoderBlock",
    "FeedForward",
    "KVCache",
    "LayerCache",
    "LearnedPositionEmbedding",
    "MultiHeadAttention",
    "RMSNorm",
    "SinusoidalPositionEmbedding",
    "TransformerDecoder",
    "TransformerEmbedding",
    "TransformerEncoder",
    "TransformerOutput",
    "causal_mask",
    "make_norm",
    "padding_mask",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_reference",
    "sinusoidal_positions",
]
