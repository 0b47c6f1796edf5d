"""minilm: a small, complete library of pretrained language models, and the course built on it.

Importing the package is cheap on purpose: subpackages (``minilm.nn``, ``minilm.data``, ``minilm.tokenizers``)
are imported on first use, so ``import minilm`` does not pull in torch or tokenizers.
"""

import importlib

__version__ = "0.1.0"
__all__ = ["data", "nn", "tokenizers", "utils"]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f"minilm.{name}")
    raise AttributeError(f"module 'minilm' has no attribute {name!r}")
