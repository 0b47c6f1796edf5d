"""The five tokenizer families: special tokens, their ids and roles, templates, and how to build each."""

from __future__ import annotations

from dataclasses import dataclass

import tokenizers as hf
from tokenizers import decoders, normalizers, pre_tokenizers, processors


@dataclass(frozen=True)
class Family:
    """How one model family tokenises: the kind of model, its special tokens and their roles."""

    name: str
    model: str  # "wordpiece" | "bpe" (byte-level) | "unigram"
    used_by: str
    head: tuple[str, ...]  # special tokens at ids 0, 1, ...
    tail: tuple[str, ...] = ()  # special tokens after the learned vocabulary, in id order
    pad: str | None = None
    unk: str | None = None
    bos: str | None = None  # also the "cls" token
    eos: str | None = None  # also the "sep" token
    mask: str | None = None
    single: str = "$A"  # TemplateProcessing templates; segment ids are 0 unless marked ":1"
    pair: str = "$A $B"
    lowercase: bool = False

    @property
    def specials(self) -> tuple[str, ...]:
        return self.head + self.tail


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("bert", "wordpiece", "BERT, DistilBERT, MiniLM", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
               pad="[PAD]", unk="[UNK]", bos="[CLS]", eos="[SEP]", mask="[MASK]",
               single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", lowercase=True),
        Family("gpt2", "bpe", "GPT-2", (), ("<|endoftext|>",),
               pad="<|endoftext|>", bos="<|endoftext|>", eos="<|endoftext|>"),
        Family("roberta", "bpe", "RoBERTa, BART", ("<s>", "<pad>", "</s>", "<unk>"), ("<mask>",),
               pad="<pad>", unk="<unk>", bos="<s>", eos="</s>", mask="<mask>",
               single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>"),
        Family("albert", "unigram", "ALBERT", ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"),
               pad="<pad>", unk="<unk>", bos="[CLS]", eos="[SEP]", mask="[MASK]",
               single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", lowercase=True),
        Family("t5", "unigram", "T5", ("<pad>", "</s>", "<unk>"),
               tuple(f"<extra_id_{i}>" for i in reversed(range(100))),
               pad="<pad>", unk="<unk>", eos="</s>", single="$A </s>", pair="$A </s> $B </s>"),
    ]
}  # fmt: skip


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"unknown tokenizer family {name!r}: choose one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


def build_pipeline(tok: hf.Tokenizer, fam: Family, lowercase: bool | None = None) -> hf.Tokenizer:
    """Set the normalizer, pre-tokenizer and decoder of ``fam``'s kind of model on ``tok``."""
    lowercase = fam.lowercase if lowercase is None else lowercase
    if fam.model == "wordpiece":
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)  # strips accents iff lowercase
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##")
    elif fam.model == "bpe":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    else:  # SentencePiece-like: NFKC (or NFKD without accents, lowercased), whitespace runs -> one space
        first = [normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()] if lowercase else []
        tok.normalizer = normalizers.Sequence(
            (first or [normalizers.NFKC()]) + [normalizers.Replace(hf.Regex(r"\s+"), " "), normalizers.Strip()]
        )
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return tok


def finish(tok: hf.Tokenizer, fam: Family) -> hf.Tokenizer:
    """Register the special tokens (``tail`` ones get fresh ids at the end) and the template."""
    tok.add_special_tokens(list(fam.specials))
    return set_templates(tok, fam, fam.single, fam.pair)


def set_templates(tok: hf.Tokenizer, fam: Family, single: str, pair: str) -> hf.Tokenizer:
    """Make ``single`` and ``pair`` (TemplateProcessing syntax) ``tok``'s templates; their special tokens must
    be in ``tok`` already. Byte-level BPE keeps its offset trimming in front."""
    steps = [processors.ByteLevel(trim_offsets=True)] if fam.model == "bpe" else []
    used = sorted({t.split(":")[0] for t in (single + " " + pair).split() if not t.startswith("$")})
    specials = [(t, tok.token_to_id(t)) for t in used]
    steps.append(processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials))
    tok.post_processor = steps[0] if len(steps) == 1 else processors.Sequence(steps)
    return tok
