"""The :class:`Tokenizer` wrapper (encode, decode, batch encoding, save/load) and :class:`BatchEncoding`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import tokenizers as hf
from tokenizers import models

from .families import FAMILIES, build_pipeline, finish, get_family, set_templates

CONFIG_FILE = "minilm_tokenizer.json"
TOKENIZER_FILE = "tokenizer.json"


@dataclass
class BatchEncoding:
    """A padded batch; ``model(**batch)`` passes the model inputs (``keys()``), the rest are attributes.

    Tensor fields are lists of lists, or int64 tensors/arrays when ``return_tensors`` was asked for;
    ``word_ids`` (word index per token, None for special/pad tokens), ``sequence_ids`` (0 for A, 1 for B,
    None for special/pad) and ``offsets`` (character span in its own text) always stay lists.
    """

    input_ids: Any
    attention_mask: Any
    token_type_ids: Any
    special_tokens_mask: Any
    word_ids: list[list[int | None]]
    sequence_ids: list[list[int | None]]
    offsets: list[list[tuple[int, int]]]
    MODEL_INPUTS: ClassVar[tuple[str, ...]] = ("input_ids", "attention_mask", "token_type_ids")

    def keys(self) -> tuple[str, ...]:
        return self.MODEL_INPUTS

    def __getitem__(self, key: str) -> Any:
        if key not in {f.name for f in fields(self)}:
            raise KeyError(key)
        return getattr(self, key)

    def __len__(self) -> int:
        return len(self.input_ids)

    def to(self, device) -> BatchEncoding:
        """Move the tensor fields to ``device`` (in place; returns self)."""
        for name in ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask"):
            setattr(self, name, getattr(self, name).to(device))
        return self


class Tokenizer:
    """A ``tokenizers.Tokenizer`` (``.backend``) that knows its family's special tokens and templates."""

    def __init__(self, backend: hf.Tokenizer, family: str):
        self.spec = get_family(family)
        self.family = family
        self.backend = backend
        backend.no_padding()  # padding/truncation are per call (see __call__), never stored state
        backend.no_truncation()
        for role in ("pad", "unk", "bos", "eos", "mask"):
            token = getattr(self.spec, role)
            if token is not None and backend.token_to_id(token) is None:
                raise ValueError(f"this tokenizer has no {role} token {token!r}: is family={family!r} right?")

    # --- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_gpt2_files(cls, vocab_json: str | Path, merges_txt: str | Path) -> Tokenizer:
        """GPT-2's byte-level BPE from its ``vocab.json`` and ``merges.txt``: gives GPT-2's token ids."""
        vocab, merges = _existing(vocab_json), _existing(merges_txt)
        tok = build_pipeline(hf.Tokenizer(models.BPE.from_file(str(vocab), str(merges))), FAMILIES["gpt2"])
        return cls(finish(tok, FAMILIES["gpt2"]), "gpt2")

    @classmethod
    def from_bert_vocab(cls, vocab_txt: str | Path, lowercase: bool = True) -> Tokenizer:
        """BERT's WordPiece from its ``vocab.txt`` (``lowercase=False`` for the cased models)."""
        path = _existing(vocab_txt)
        model = models.WordPiece.from_file(str(path), unk_token="[UNK]", max_input_chars_per_word=100)
        tok = build_pipeline(hf.Tokenizer(model), FAMILIES["bert"], lowercase=lowercase)
        return cls(finish(tok, FAMILIES["bert"]), "bert")

    def save(self, directory: str | Path) -> Path:
        """Write ``tokenizer.json`` and ``minilm_tokenizer.json`` into ``directory`` (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(directory / TOKENIZER_FILE))
        (directory / CONFIG_FILE).write_text(json.dumps({"family": self.family, "format": 1}) + "\n")
        return directory

    @classmethod
    def load(cls, path: str | Path, family: str | None = None) -> Tokenizer:
        """Load a directory written by :meth:`save`, or any ``tokenizer.json`` (file or its folder).

        ``family`` is read from ``minilm_tokenizer.json`` next to the file; pass it for foreign files.
        """
        path = Path(path)
        file = path / TOKENIZER_FILE if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(f"no tokenizer at {file}: pass a directory written by Tokenizer.save")
        config = file.parent / CONFIG_FILE
        if family is None and config.is_file():
            try:
                family = json.loads(config.read_text())["family"]
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{config} is not a minilm tokenizer config ({e}); re-save it") from None
        if family is None:
            raise ValueError(f"{file} has no {CONFIG_FILE} next to it: pass family= ({', '.join(FAMILIES)})")
        try:
            backend = hf.Tokenizer.from_file(str(file))
        except Exception as e:  # the library raises a bare Exception
            raise ValueError(
                f"{file} is not a tokenizer.json the tokenizers library can read ({e}); "
                "write one with Tokenizer.save(directory)"
            ) from None
        return cls(backend, family)

    # --- vocabulary -----------------------------------------------------------------------------------
    def _id(self, token: str | None) -> int | None:
        return None if token is None else self.backend.token_to_id(token)

    # ids of the family's special-token roles (None where the family has none); cls = bos, sep = eos
    vocab_size = property(lambda self: self.backend.get_vocab_size(with_added_tokens=True))
    pad_id = property(lambda self: self._id(self.spec.pad))
    unk_id = property(lambda self: self._id(self.spec.unk))
    bos_id = cls_id = property(lambda self: self._id(self.spec.bos))
    eos_id = sep_id = property(lambda self: self._id(self.spec.eos))
    mask_id = property(lambda self: self._id(self.spec.mask))

    @property
    def special_ids(self) -> list[int]:
        return sorted(self._id(t) for t in self.spec.specials)

    @property
    def sentinel_ids(self) -> list[int]:
        """T5's ``<extra_id_i>`` ids indexed by i (decreasing ids); empty for other families."""
        return [self._id(f"<extra_id_{i}>") for i in range(100)] if self.family == "t5" else []

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        return self.backend.id_to_token(id)

    def with_templates(self, single: str, pair: str, new_tokens: Sequence[str] = ()) -> Tokenizer:
        """A copy of this tokenizer that adds ``new_tokens`` as special tokens (fresh ids at the end, unless it has
        them already) and encodes with the templates ``single`` and ``pair`` (TemplateProcessing syntax:
        ``"<s> $A <e>"``, ``"<s> $A <d> $B:1 <e>:1"``); GPT's fine-tuning inputs are made this way."""
        backend = hf.Tokenizer.from_str(self.backend.to_str())
        backend.add_special_tokens(list(new_tokens))
        unknown = [t for t in (single + " " + pair).split() if not t.startswith("$")]
        unknown = [t for t in unknown if backend.token_to_id(t.split(":")[0]) is None]
        if unknown:
            raise ValueError(f"template tokens {unknown} are not in the vocabulary: pass them as new_tokens")
        return Tokenizer(set_templates(backend, self.spec, single, pair), self.family)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return self.backend.num_special_tokens_to_add(pair)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer(family={self.family!r}, vocab_size={self.vocab_size})"

    # --- encoding -------------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[str]:
        return self.backend.encode(text, add_special_tokens=False).tokens

    def encode(self, text: str, pair: str | None = None, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, pair, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_batch(self, batch, skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in batch]

    def __call__(
        self,
        texts: str | list[str],
        pairs: str | list[str] | None = None,
        *,
        max_length: int | None = None,
        truncation: bool = True,
        padding: bool | str = "longest",
        padding_side: str = "right",
        add_special_tokens: bool = True,
        return_tensors: str | None = None,
    ) -> BatchEncoding:
        """Encode a batch of texts (or of (text, pair) pairs) into a :class:`BatchEncoding`.

        ``truncation`` cuts each sequence to ``max_length`` tokens, special tokens included (no cut
        without ``max_length``); for pairs it is longest-first (one token at a time from the longer side).
        ``padding``: "longest" (or True) in the batch, "max_length", or False; pads with ``pad_id`` on
        ``padding_side`` ("left" for decoder-only generation).  ``return_tensors``: None (lists), "pt"
        (torch) or "np" (numpy); a single ``str`` is a batch of one.
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        if pairs is not None:
            pairs = [pairs] if isinstance(pairs, str) else list(pairs)
            if len(pairs) != len(texts):
                raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs: give one pair per text")
        padding = "longest" if padding is True else padding
        if padding not in ("longest", "max_length", False):
            raise ValueError(f"padding={padding!r}: use 'longest' (or True), 'max_length' or False")
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side={padding_side!r}: use 'right' or 'left'")
        if return_tensors not in (None, "pt", "np"):
            raise ValueError(f"return_tensors={return_tensors!r}: use None, 'pt' or 'np'")
        if padding == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length=...")
        if truncation and max_length is not None:
            need = self.num_special_tokens_to_add(pairs is not None) if add_special_tokens else 0
            need += 1 if pairs is None else 2
            if max_length < need:
                raise ValueError(
                    f"max_length={max_length} is too small: the {self.family} template"
                    f"{' for pairs' if pairs is not None else ''} needs {need} tokens "
                    "(special tokens plus one per text); raise max_length"
                )
        inputs = texts if pairs is None else list(zip(texts, pairs, strict=True))
        backend = self.backend  # per-call settings on the shared backend, reset below (not thread-safe)
        try:
            if truncation and max_length is not None:
                backend.enable_truncation(max_length, strategy="longest_first", direction="right")
            if padding:
                length = max_length if padding == "max_length" else None
                backend.enable_padding(
                    direction=padding_side, pad_id=self.pad_id, pad_token=self.spec.pad, length=length
                )
            encodings = backend.encode_batch(inputs, add_special_tokens=add_special_tokens)
        finally:
            backend.no_truncation()
            backend.no_padding()
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "special_tokens_mask": [e.special_tokens_mask for e in encodings],
        }
        if return_tensors is not None:
            columns = {k: _tensor(v, return_tensors) for k, v in columns.items()}
        return BatchEncoding(
            **columns,
            word_ids=[e.word_ids for e in encodings],
            sequence_ids=[e.sequence_ids for e in encodings],
            offsets=[e.offsets for e in encodings],
        )

    encode_batch = __call__


def _tensor(rows: list[list[int]], kind: str):
    if len({len(r) for r in rows}) > 1:
        raise ValueError("sequences have different lengths: pass padding='longest' to make a tensor")
    width = len(rows[0]) if rows else 0
    if kind == "np":
        import numpy as np

        return np.asarray(rows, dtype=np.int64).reshape(len(rows), width)
    import torch

    return torch.tensor(rows, dtype=torch.long).reshape(len(rows), width)


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: pass the path of the vocabulary/merges file")
    return path
