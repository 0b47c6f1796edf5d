"""The readers: corpora, the sentence splitter and every task split, checked against the real mirror."""

import os
from pathlib import Path

import pytest

from minilm.data import (
    SPLITS,
    TASKS,
    DataError,
    Document,
    PairExample,
    _files,
    load_gutenberg,
    load_task,
    load_tiny_shakespeare,
    load_wikitext,
    split_sentences,
    tasks,
)
from minilm.data.corpora import _gutenberg_paragraphs

needs_mirror = pytest.mark.skipif(
    not Path(os.environ.get("MINILM_DATA_DIR", "/nonexistent")).is_dir(), reason="needs the data mirror"
)

# ---- sentences (no data needed) ---------------------------------------------------------------------------

SENTENCE_CASES = [
    (
        "Mr. and Mrs. Bennet had five daughters. Jane was the eldest.",
        ["Mr. and Mrs. Bennet had five daughters.", "Jane was the eldest."],
    ),
    ("J. K. Rowling wrote it. Dr. Watson agreed.", ["J. K. Rowling wrote it.", "Dr. Watson agreed."]),
    ('"Stop!" he cried. "Why?" She did not answer.', ['"Stop!" he cried.', '"Why?"', "She did not answer."]),
    ("“Is that you?” “Yes.”", ["“Is that you?”", "“Yes.”"]),
    ("She said, ‘I will.’ Then she left.", ["She said, ‘I will.’", "Then she left."]),
    (
        "He paused... then went on. It was late… Nobody came.",
        ["He paused... then went on.", "It was late…", "Nobody came."],
    ),
    ("Wait . . . What? No!", ["Wait . . .", "What?", "No!"]),
    ("Fruit, e.g. Apples, i.e. Food, etc. Are good. Yes.", ["Fruit, e.g. Apples, i.e. Food, etc. Are good.", "Yes."]),
    (
        "He lived in St. Petersburg (near Mt. Ararat). It was cold.",
        ["He lived in St. Petersburg (near Mt. Ararat).", "It was cold."],
    ),
    ("The U.S. Army came. H. G. Wells wrote.", ["The U.S. Army came.", "H. G. Wells wrote."]),
    ("Is it 3.5 or 4? I think 4. 2 more came.", ["Is it 3.5 or 4?", "I think 4.", "2 more came."]),
    ("It was I. Then he\ncame.\n\nThe end", ["It was I.", "Then he came.", "The end"]),
    ("  ", []),
]


@pytest.mark.parametrize(("text", "expected"), SENTENCE_CASES)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_document_text_and_sentences():
    doc = Document("t", ["One. Two!", "Three?"])
    assert doc.text == "One. Two!\n\nThree?"
    assert doc.sentences() == ["One.", "Two!", "Three?"]


def test_gutenberg_markers_variants_and_credits():
    raw = (
        "The Project Gutenberg eBook, X\n\n***START OF THE PROJECT GUTENBERG EBOOK X***\n\n"
        "Produced by Someone\n\nX\n\nFirst  line\nsecond line.\n\n\n\nLast one.\n\n"
        "End of the Project Gutenberg EBook of X\n\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence"
    )
    assert _gutenberg_paragraphs(raw) == ["X", "First line second line.", "Last one."]
    assert _gutenberg_paragraphs("No markers.\n\nAt all.") == ["No markers.", "At all."]


# ---- corpora ---------------------------------------------------------------------------------------------


@needs_mirror
def test_gutenberg():
    books = load_gutenberg()
    assert len(books) == 17
    titles = [b.title for b in books]
    assert {"Pride and Prejudice", "Alice's Adventures in Wonderland", "Moby Dick; Or The Whale"} <= set(titles)
    for book in books:
        assert len(book.paragraphs) > 300, book.title
        assert all(p and p == " ".join(p.split()) for p in book.paragraphs), book.title
        assert "\r" not in book.text and "\ufeff" not in book.text and "*** START" not in book.text
        for p in book.paragraphs[:3] + book.paragraphs[-3:]:
            assert "gutenberg" not in p.lower() and not p.startswith("Produced by"), (book.title, p)
    pride = books[titles.index("Pride and Prejudice")]
    assert any(p.startswith("It is a truth universally acknowledged") for p in pride.paragraphs[:20])
    assert pride.paragraphs[-1].endswith("had been the means of uniting them.")
    assert 4000 < len(pride.sentences()) < 8000


@needs_mirror
def test_gutenberg_titles():
    (book,) = load_gutenberg(["the time machine"])
    assert book.title == "The Time Machine"
    book.paragraphs.clear()  # callers get their own lists
    assert load_gutenberg(["The Time Machine"])[0].paragraphs
    with pytest.raises(KeyError, match="known titles: .*Dracula"):
        load_gutenberg(["Ulysses"])


@needs_mirror
def test_wikitext():
    valid, test = load_wikitext("valid"), load_wikitext("test")
    assert (len(valid), len(test)) == (60, 62)
    assert valid[0].title == "Homarus gammarus" and valid[0].paragraphs[1] == "= = Description = ="
    assert valid[0].paragraphs[0].startswith("Homarus gammarus , known as the European lobster")
    assert all(d.title and d.paragraphs and not d.title.startswith("=") for d in valid + test)
    with pytest.raises(ValueError, match="splits: valid, test"):
        load_wikitext("train")


@needs_mirror
def test_tiny_shakespeare():
    doc = load_tiny_shakespeare()
    assert doc.paragraphs[0] == "First Citizen:\nBefore we proceed any further, hear me speak."
    assert len(doc.text) == 1_115_394 - 3  # final newline and two extra blank lines between plays


# ---- tasks -------------------------------------------------------------------------------------------------

COUNTS = {
    "sst2": (60614, 6735, 872),
    "cola": (8551, 527, 516),
    "stsb": (5749, 1500, 1379),
    "mrpc": (3576, 500, 1725),
    "rte": (2127, 363, 277),
    "snli": (8842, 1000, 9824),
    "wnut17": (3394, 1009, 1287),
    "ud_pos": (1854, 148, 2077),
    "squad2": (950, 210, 247),
    "squad2_gen": (950, 210, 247),  # the same questions, text to text
    "copa": (700, 99, 200),
}


def test_task_registry():
    assert set(TASKS) == set(COUNTS)
    assert TASKS["sst2"].labels == ("negative", "positive")
    assert TASKS["rte"].labels == ("entailment", "not_entailment")
    assert TASKS["snli"].labels == ("entailment", "neutral", "contradiction")
    assert len(TASKS["ud_pos"].labels) == 17 and len(TASKS["wnut17"].labels) == 13
    assert TASKS["stsb"].metrics == ("pearson", "spearman") and TASKS["cola"].metrics == ("matthews",)
    assert all(info.splits == SPLITS == ("train", "validation", "test") for info in TASKS.values())
    with pytest.raises(KeyError, match="known tasks: .*copa"):
        load_task("glue")
    with pytest.raises(ValueError, match="splits: train, validation, test"):
        load_task("sst2", "dev")


@needs_mirror
@pytest.mark.parametrize("name", sorted(COUNTS))
def test_task_splits(name):
    info = TASKS[name]
    for split, expected in zip(SPLITS, COUNTS[name], strict=True):
        examples = load_task(name, split)
        assert len(examples) == expected, (name, split)
        assert all(type(e) is info.example_type for e in examples)
        if info.labels and info.example_type is not tasks.TaggingExample:
            assert {e.label for e in examples} == set(range(len(info.labels))), (name, split)
    assert load_task(name) is not load_task(name)  # fresh lists from the cache


@needs_mirror
def test_text_fields_are_clean():
    for name in ("sst2", "cola", "stsb", "mrpc", "rte", "snli"):
        for split in SPLITS:
            for e in load_task(name, split):
                texts = [e.text] if name in ("sst2", "cola") else [e.text_a, e.text_b]
                assert all(t and t == t.strip() and "\t" not in t for t in texts), (name, split, e)


@needs_mirror
def test_stsb_scores():
    scores = [e.label for split in SPLITS for e in load_task("stsb", split)]
    assert all(isinstance(s, float) and 0.0 <= s <= 5.0 for s in scores)
    assert min(scores) == 0.0 and max(scores) == 5.0


@needs_mirror
def test_snli_validation_shares_no_premise_with_train():
    train, validation = load_task("snli", "train"), load_task("snli", "validation")
    assert not {e.text_a for e in train} & {e.text_a for e in validation}


@needs_mirror
def test_wnut17_bio():
    for split in SPLITS:
        for e in load_task("wnut17", split):
            assert len(e.tokens) == len(e.tags) > 0
            for prev, tag in zip(["O"] + e.tags, e.tags, strict=False):
                assert tag in tasks.WNUT17_TAGS
                assert not tag.startswith("I-") or prev[2:] == tag[2:], (prev, tag)


@needs_mirror
def test_ud_pos():
    for split in SPLITS:
        for e in load_task("ud_pos", split):
            assert len(e.tokens) == len(e.tags) > 0 and set(e.tags) <= set(tasks.UPOS_TAGS)
    assert sum(len(e.tokens) for e in load_task("ud_pos", "validation")) == 2046


@needs_mirror
def test_squad2():
    by_split = {split: load_task("squad2", split) for split in SPLITS}
    everything = [e for examples in by_split.values() for e in examples]
    assert len(everything) == 1407 and sum(e.is_impossible for e in everything) == 702
    assert len({e.id for e in everything}) == 1407
    titles = [{e.title for e in examples} for examples in by_split.values()]
    assert titles == [
        {"Normans", "Computational_complexity_theory", "Southern_California"},
        {"Sky_(United_Kingdom)"},
        {"Victoria_(Australia)"},
    ]
    for e in everything:
        for a in e.answers:
            assert e.context[a.start : a.start + len(a.text)] == a.text


@needs_mirror
def test_generative_squad2_reads_the_question_then_the_context_and_writes_the_first_answer():
    for split in SPLITS:
        for qa, gen in zip(load_task("squad2", split), load_task("squad2_gen", split), strict=True):
            assert gen.id == qa.id and gen.source == f"question: {qa.question} context: {qa.context}"
            assert gen.references == tuple(a.text for a in qa.answers)
            assert gen.target == (qa.answers[0].text if qa.answers else tasks.NO_ANSWER_TEXT)


@needs_mirror
def test_copa_mirrors_stay_with_their_originals():
    for split in SPLITS:
        items = {e.id: e for e in load_task("copa", split)}
        originals = [i for i in items if i <= 1000]
        assert len(originals) * 2 == len(items) + (split == "validation")
        for i in originals:
            if i == 381:  # its mirror 1381 is a contradictory copy of it, dropped
                assert 1381 not in items
                continue
            original, mirror = items[i], items[i + 1000]
            assert len(original.choices) == 2 and set(original.choices) == set(mirror.choices)
            assert original.choices[original.label] != mirror.choices[mirror.label]  # the other answer wins
            assert original.question in ("cause", "effect") and original.premise != mirror.premise


# ---- malformed files name the file and line -------------------------------------------------------------


@pytest.fixture
def fake_file(tmp_path, monkeypatch):
    """Serve ``text`` in place of every fetched file; clear the task caches before and after."""
    for info in TASKS.values():
        info.loader.cache_clear()
    path = tmp_path / "fake"
    monkeypatch.setattr(_files, "fetch", lambda dataset, filename: path)
    yield lambda text: path.write_text(text, encoding="utf-8")
    for info in TASKS.values():
        info.loader.cache_clear()


def test_bad_label_names_file_and_line(fake_file):
    fake_file("0\ta\tb\tentailment\n1\ta\tb\tmaybe\n")
    with pytest.raises(DataError, match=r"rte/val.tsv, line 2: label 'maybe'"):
        load_task("rte", "validation")


def test_wrong_column_count_names_file_and_line(fake_file):
    fake_file("sentence\tlabel\nfine\t1\nno label here\n")
    with pytest.raises(DataError, match=r"sst2/dev.tsv, line 3: expected 2 tab-separated fields, got 1"):
        load_task("sst2", "validation")


def test_stsb_extra_columns_and_bad_score(fake_file):
    fake_file("g\tf\ty\t1\t4.5\tA b.\tC d.\tsrc1\tsrc2\n")
    assert load_task("stsb", "test") == [PairExample("A b.", "C d.", 4.5)]
    tasks.load_stsb.cache_clear()
    fake_file("g\tf\ty\t1\t4.5\tA.\tB.\ng\tf\ty\t2\tfive\tA.\tB.\n")
    with pytest.raises(DataError, match=r"stsb/sts-test.csv, line 2: score 'five'"):
        load_task("stsb", "test")


def test_conllu_skips_multiword_tokens_and_empty_nodes(fake_file):
    fake_file(
        "# newdoc id = d1\n# text = Don't go\n1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tDo\tdo\tAUX\t_\t_\t0\troot\t_\t_\n2\tn't\tnot\tPART\t_\t_\t1\tadvmod\t_\t_\n"
        "2.1\tgo\tgo\t_\t_\t_\t_\t_\t_\t_\n3\tgo\tgo\tVERB\t_\t_\t1\txcomp\t_\t_\n\n"
        "# newdoc id = d2\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n\n"
    )
    (only,) = load_task("ud_pos", "test")[:1]
    assert only.tokens == ["Do", "n't", "go"] and only.tags == ["AUX", "PART", "VERB"]
    assert [len(doc) for doc in tasks._ud_documents("en_ewt-ud-test.conllu")] == [1, 1]
    fake_file("1\tHi\thi\tHELLO\t_\t_\t0\troot\t_\t_\n")
    tasks.load_ud_pos.cache_clear()
    with pytest.raises(DataError, match=r"ud-ewt/en_ewt-ud-test.conllu, line 1: 'HELLO' is not a UPOS tag"):
        load_task("ud_pos", "test")


def test_word_sense_sentences_hold_their_word_once():
    from minilm.data.senses import WORD_SENSES

    for word, senses in WORD_SENSES.items():
        assert len(senses) == 2 and all(len(texts) == 10 for texts in senses.values())
        for text in (t for texts in senses.values() for t in texts):
            assert text.split().count(word) == 1, text  # the probe takes the word's one position
