"""Model families, one file each, composed from :mod:`minilm.nn`; :func:`from_pretrained` loads a Hugging Face
checkpoint of any family minilm converts (:mod:`minilm.models.hf`)."""

from .bert import BERT_PRESETS, Bert, BertConfig, RobertaConfig
from .gpt import GPT, GPT_PRESETS, GPTConfig, gpt_config
from .hf import from_pretrained
from .transformer import TRANSFORMER_BASE, TRANSFORMER_BIG, Transformer, TransformerConfig

__all__ = [
    "BERT_PRESETS",
    "GPT",
    "GPT_PRESETS",
    "TRANSFORMER_BASE",
    "TRANSFORMER_BIG",
    "Bert",
    "BertConfig",
    "GPTConfig",
    "RobertaConfig",
    "Transformer",
    "TransformerConfig",
    "from_pretrained",
    "gpt_config",
]
