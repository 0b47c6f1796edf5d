"""What every model class gets for Hugging Face checkpoints: ``from_pretrained``, ``save_pretrained`` and
``check_vocabulary``, through :class:`PretrainedMixin`.

The converters (:mod:`minilm.models.hf`) import the model files, to build and read the models; a model file that
imported them back, even inside a function, would close an import cycle. So the mixin reaches
``minilm.models.hf`` with :func:`importlib.import_module`, by name and only when called: at import time the
dependence stays one-way (hf -> models), and the model files know nothing of checkpoints.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import torch

HF_PACKAGE = "minilm.models.hf"


class PretrainedMixin:
    """``from_pretrained`` / ``save_pretrained`` in the Hugging Face layout, and ``check_vocabulary``, for a model
    class with a ``config`` attribute that a converter of :mod:`minilm.models.hf` knows."""

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        tokenizer=None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = torch.float32,
        *,
        strict: bool = True,
    ):
        """A Hugging Face checkpoint folder (config.json + model.safetensors) of a type this class loads -> a model
        in eval mode. See :func:`minilm.models.hf.from_pretrained`."""
        hf = importlib.import_module(HF_PACKAGE)
        return hf.from_pretrained(path, tokenizer, device, dtype, strict=strict, model_class=cls)

    def save_pretrained(self, path: str | Path, **config_fields) -> Path:
        """Write config.json and model.safetensors as transformers does; return the folder. ``config_fields``: extra
        config.json fields, e.g. ``eos_token_id=50256``. See :func:`minilm.models.hf.save_pretrained`."""
        return importlib.import_module(HF_PACKAGE).save_pretrained(self, path, **config_fields)

    def check_vocabulary(self, tokenizer, folder: str | Path | None = None) -> None:
        """Raise a ValueError unless ``tokenizer`` fits this model (size, padding id, and the folder's vocabulary)."""
        check_vocabulary(self.config, tokenizer, folder)


def _tokenizer_vocab(tokenizer) -> dict[str, int] | None:
    for owner in (tokenizer, getattr(tokenizer, "backend", None)):
        get_vocab = getattr(owner, "get_vocab", None)
        if callable(get_vocab):
            return dict(get_vocab())
    return None


def folder_vocab(path: str | Path) -> dict[str, int] | None:
    """token -> id of the checkpoint folder's own tokenizer (tokenizer.json, vocab.txt or vocab.json); None if none."""
    folder = Path(path)
    if (folder / "tokenizer.json").is_file():
        spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        vocab = (spec.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            vocab = dict(vocab)
            vocab.update({t["content"]: t["id"] for t in spec.get("added_tokens") or []})
            return vocab
    if (folder / "vocab.txt").is_file():  # WordPiece: one token per line, id = line number
        lines = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
        lines = lines[:-1] if lines and lines[-1] == "" else lines
        return {token: i for i, token in enumerate(lines)}
    if (folder / "vocab.json").is_file():  # byte-level BPE
        return json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    return None


def check_vocabulary(config, tokenizer, folder: str | Path | None = None) -> None:
    """Raise a ValueError unless ``tokenizer`` (minilm's or transformers') fits a model of ``config`` (any family).

    Checked: the number of tokens equals the embedding table's rows (``config.vocab_size``); the padding id, when
    the config has one (``pad_id``); and, when ``folder`` holds the checkpoint's own vocabulary (tokenizer.json,
    vocab.txt or vocab.json), that every token has the same id.
    """
    size = len(tokenizer)
    if size != config.vocab_size:
        raise ValueError(
            f"the tokenizer has {size} tokens but the model's vocabulary has {config.vocab_size}: token ids would "
            "index the wrong embeddings; use the tokenizer the checkpoint was trained with (its vocab.txt / "
            "vocab.json + merges.txt)"
        )
    pad = getattr(tokenizer, "pad_id", None)
    pad = getattr(tokenizer, "pad_token_id", None) if pad is None else pad
    model_pad = getattr(config, "pad_id", None)
    if pad is not None and model_pad is not None and pad != model_pad:
        raise ValueError(f"the tokenizer pads with id {pad} but the model's padding id is {model_pad}")
    reference = folder_vocab(folder) if folder is not None else None
    ours = _tokenizer_vocab(tokenizer) if reference is not None else None
    if reference is not None and ours is not None:
        wrong = [token for token, i in reference.items() if ours.get(token) != i]
        if wrong:
            examples = ", ".join(f"{t!r}: {reference[t]} vs {ours.get(t)}" for t in wrong[:3])
            raise ValueError(
                f"the tokenizer's vocabulary is not the checkpoint's: {len(wrong)} of {len(reference)} tokens have "
                f"other ids (checkpoint vs tokenizer: {examples}); build the tokenizer from {folder}'s vocabulary"
            )
