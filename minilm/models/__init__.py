"""Model families, one file each, composed from :mod:`minilm.nn`; :func:`from_pretrained` loads a Hugging Face
checkpoint of any family minilm converts (:mod:`minilm.models.hf`)."""

from .albert import ALBERT_PRESETS, Albert, AlbertConfig, albert_config
from .bert import BERT_PRESETS, Bert, BertConfig, RobertaConfig
from .gpt import GPT, GPT_PRESETS, GPTConfig, gpt_config
from .hf import from_pretrained
from .transformer import TRANSFORMER_BASE, TRANSFORMER_BIG, Transformer, TransformerConfig

__all__ = [
    "ALBERT_PRESETS",
    "BERT_PRESETS",
    "GPT",
    "GPT_PRESETS",
    "TRANSFORMER_BASE",
    "TRANSFORMER_BIG",
    "Albert",
    "AlbertConfig",
    "Bert",
    "BertConfig",
    "GPTConfig",
    "RobertaConfig",
    "Transformer",
    "TransformerConfig",
    "albert_config",
    "from_pretrained",
    "gpt_config",
]
