"""Model families, one file each, composed from :mod:`minilm.nn`."""

from .transformer import TRANSFORMER_BASE, TRANSFORMER_BIG, Transformer, TransformerConfig

__all__ = ["TRANSFORMER_BASE", "TRANSFORMER_BIG", "Transformer", "TransformerConfig"]
