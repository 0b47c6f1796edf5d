"""Tokenizers for the five model families of the course, on top of the Hugging Face ``tokenizers`` library.

Train one on any corpus in seconds, or rebuild the real GPT-2 / BERT tokenizers from their vocabulary files::

    tok = train_tokenizer(lines, "bert", vocab_size=8000)   # WordPiece; also gpt2, roberta, albert, t5
    gpt2 = Tokenizer.from_gpt2_files("gpt2_vocab.json", "gpt2_merges.txt")
    batch = tok(["a text", "another"], pairs=["its pair", "..."], max_length=128, return_tensors="pt")
    model(**batch)  # input_ids, attention_mask, token_type_ids; batch.word_ids etc. as attributes

=======  ==================  ===================================================  ========================
family   model               special tokens (ids)                                  template (A, pair A B)
=======  ==================  ===================================================  ========================
bert     WordPiece, ``##``   [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4             [CLS] A [SEP] B [SEP]
gpt2     byte-level BPE      <|endoftext|> = last id (bos = eos = pad)            A, A B
roberta  byte-level BPE      <s>=0 <pad>=1 </s>=2 <unk>=3, <mask> = last id       <s> A </s></s> B </s>
albert   Unigram, lowercase  <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4             [CLS] A [SEP] B [SEP]
t5       Unigram             <pad>=0 </s>=1 <unk>=2, <extra_id_99>..<extra_id_0>  A </s> B </s>
                             last (``<extra_id_0>`` has the highest id)
=======  ==================  ===================================================  ========================

Segment ids (``token_type_ids``) are 0 for A and 1 for B in bert/albert, all 0 elsewhere.  The Unigram
families collapse whitespace runs like SentencePiece, so only the byte-level BPE families decode back to
exactly the input text.

Training is reproducible: the same texts give the same tokenizer (ids, merges, Unigram's scores) in every process,
so each process of a distributed run can train its own.  Unigram vocabularies are learned by Google's SentencePiece,
ALBERT's and T5's own tool, on the text as the family's normalizer leaves it, then run by ``tokenizers``.

Save format: ``tok.save(directory)`` writes ``directory/tokenizer.json`` (the library's own file, also
readable by ``tokenizers.Tokenizer.from_file`` and ``transformers.PreTrainedTokenizerFast``) and
``directory/minilm_tokenizer.json`` (``{"family": ...}``); ``Tokenizer.load(directory)`` reads both.
"""

from .families import FAMILIES, Family
from .tokenizer import BatchEncoding, Tokenizer
from .training import check_vocab_size, train_tokenizer

__all__ = ["FAMILIES", "Family", "Tokenizer", "BatchEncoding", "check_vocab_size", "train_tokenizer"]
