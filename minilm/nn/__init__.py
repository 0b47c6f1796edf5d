"""Transformer building blocks: attention, embeddings, norms, feed-forward, blocks and stacks.

Every model of the course (Transformer, GPT, BERT, RoBERTa, ALBERT, ELECTRA, BART, T5) is composed from these.
Masks are bool with True = may attend, broadcastable to (B, nh, Tq, Tk); see :mod:`minilm.nn.attention`.
"""

from .attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    check_heads,
    padding_mask,
    scaled_dot_product_attention,
    scaled_dot_product_attention_reference,
)
from .blocks import (
    SHARING,
    BlockConfig,
    DecoderBlock,
    EncoderBlock,
    LayerCache,
    TransformerDecoder,
    TransformerEncoder,
    TransformerOutput,
    check_sharing,
)
from .char_cnn import CharCNN, Highway, batch_to_char_ids, word_to_char_ids
from .embeddings import (
    LearnedPositionEmbedding,
    SinusoidalPositionEmbedding,
    TransformerEmbedding,
    sinusoidal_positions,
)
from .feedforward import ACTIVATIONS, FeedForward
from .inputs import check_token_ids, shift_right
from .linear_cross_entropy import linear_cross_entropy
from .lstm import LSTMLayer, lstm_reference, reverse_padded
from .norms import RMSNorm, make_norm
from .relative_position import RelativePositionBias, relative_position_bucket
from .scalar_mix import ScalarMix

__all__ = [
    "ACTIVATIONS",
    "SHARING",
    "BlockConfig",
    "CharCNN",
    "DecoderBlock",
    "EncoderBlock",
    "FeedForward",
    "Highway",
    "KVCache",
    "LSTMLayer",
    "LayerCache",
    "LearnedPositionEmbedding",
    "MultiHeadAttention",
    "RMSNorm",
    "RelativePositionBias",
    "ScalarMix",
    "SinusoidalPositionEmbedding",
    "TransformerDecoder",
    "TransformerEmbedding",
    "TransformerEncoder",
    "TransformerOutput",
    "batch_to_char_ids",
    "causal_mask",
    "check_heads",
    "check_sharing",
    "check_token_ids",
    "linear_cross_entropy",
    "lstm_reference",
    "make_norm",
    "padding_mask",
    "relative_position_bucket",
    "reverse_padded",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_reference",
    "shift_right",
    "sinusoidal_positions",
    "word_to_char_ids",
]
