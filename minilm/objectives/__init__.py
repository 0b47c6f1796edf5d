"""Pretraining objectives as pure functions: corrupt a batch, compute a loss. No model knowledge."""

from .causal_lm import causal_lm_loss, language_model_blocks

__all__ = ["causal_lm_loss", "language_model_blocks"]
