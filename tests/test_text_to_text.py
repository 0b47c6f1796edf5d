"""Every task as text to text and multi-task training (T5): each task's form on real examples, STS-B's rounding,
targets that parse back to their labels and score perfectly, unreadable predictions scored as wrong (against
scikit-learn and scipy), mixing rates against hand computation and the sampler's proportions, an in-process
multi-task fine-tune that resumes, a task learned within a mixture, and bad settings as one clear line from the real
CLI."""

import dataclasses
import json
import math
import random
import re
import subprocess
import sys

import pytest
from scipy import stats
from sklearn import metrics as skm

from minilm.data.examples import Answer, ChoiceExample, PairExample, QAExample, SentenceExample, TaggingExample
from minilm.data.tasks import NO_ANSWER_TEXT, TASKS, load_task
from minilm.finetune import main
from minilm.finetune.cli import _options_text
from minilm.finetune.mixing import MIXING, mix, mixing_rates
from minilm.finetune.table import average, glue_table
from minilm.finetune.text_to_text import (
    INVALID_SCORE,
    TextToTextKind,
    from_text,
    score_target,
    to_text,
    use_text_to_text,
)
from minilm.train.config import ConfigError
from minilm.train.registry import get_model

# ---------------------------------------------------------------------------------------------- formats

FIRST_VALIDATION = {  # (source start, target) of each task's first validation example
    "sst2": ("sst2 sentence: the expressive power of the camera", "positive"),
    "cola": ("cola sentence: The sailors rode the breeze clear of the rocks.", "acceptable"),
    "stsb": ("stsb sentence1: A man with a hard hat is dancing. sentence2: A man wearing a hard hat", "5.0"),
    "mrpc": ("mrpc sentence1: Stocks have rallied sharply for more than three months", "equivalent"),
    "rte": ("rte sentence1: Herceptin was already approved to treat the sickest breast cancer", "entailment"),
    "snli": ("snli hypothesis: A man performing in a play looks down at the audiance", "neutral"),
    "wnut17": ("wnut17 sentence: Stabilized approach or not ? That ´ s insane and good .", "O " * 11 + "O"),
    "ud_pos": (
        "ud_pos sentence: The hottest item on Christmas wish lists this year is nuclear weapons .",
        "DET ADJ NOUN ADP PROPN NOUN NOUN DET NOUN AUX ADJ NOUN PUNCT",
    ),
    "squad2": ("question: What company was formed by the merger of Sky Television and British", "BSkyB"),
    "squad2_gen": ("question: What company was formed by the merger of Sky Television and British", "BSkyB"),
    "copa": (
        "copa choice1: The ice cube vanished. choice2: The ice cube stuck to my fingers. premise: I ran the ice cube "
        "under warm water. question: effect",
        "choice1",
    ),
}


def test_every_task_has_a_format_and_the_table_covers_the_registry():
    assert set(FIRST_VALIDATION) == set(TASKS)


@pytest.mark.parametrize("task", list(TASKS))
def test_a_real_example_of_every_task_reads_with_t5s_prefix(task):
    example = to_text(TASKS[task], load_task(task, "validation")[0])
    source, target = FIRST_VALIDATION[task]
    assert example.source.startswith(source) and example.target == target
    if task == "snli":  # T5's MNLI: the hypothesis first, then the premise (text_a)
        premise = load_task(task, "validation")[0].text_a
        assert example.source.endswith(f" premise: {premise}")


def test_squad_without_an_answer_writes_no_answer_as_the_generative_task_does():
    info = TASKS["squad2"]
    unanswerable = next(e for e in load_task("squad2", "validation") if not e.answers)
    assert to_text(info, unanswerable).target == NO_ANSWER_TEXT
    generative = {e.id: e for e in load_task("squad2_gen", "validation")}
    for e in load_task("squad2", "validation")[:20]:  # the same text as squad2_gen's own
        assert (to_text(info, e).source, to_text(info, e).target) == (generative[e.id].source, generative[e.id].target)


@pytest.mark.parametrize(
    "score, text",
    [(3.75, "3.8"), (2.3, "2.4"), (2.5, "2.4"), (0.5, "0.4"), (1.1, "1.2"), (1.7, "1.6"), (2.29, "2.2"),
     (2.31, "2.4"), (0.0, "0.0"), (5.0, "5.0"), (4.95, "5.0"), (0.09, "0.0"), (3, "3.0"), (2.57, "2.6")],
)  # fmt: skip
def test_stsb_scores_round_to_the_nearest_fifth_ties_to_the_even_step(score, text):
    # a tie lies halfway between two steps (2.3: between 2.2 and 2.4): round(11.5) = 12, the even number of steps;
    # T5's own example is 2.57 -> "2.6"
    assert score_target(score) == text


# ---------------------------------------------------------------------------------------------- round trip


def perfect(metric):
    return 100.0 if metric.startswith("squad") else 1.0


@pytest.mark.parametrize("task", list(TASKS))
def test_targets_parse_back_to_the_labels_and_score_perfectly(task):
    info = TASKS[task]
    examples = load_task(task, "validation")[:200]
    parsed = [from_text(info, to_text(info, e).target, e) for e in examples]
    for e, p in zip(examples, parsed, strict=True):
        if isinstance(e, TaggingExample):
            assert p == e.tags
        elif isinstance(e, QAExample):
            assert p == (e.answers[0].text if e.answers else "")
        elif task == "stsb":
            assert abs(p - e.label) <= 0.1 + 1e-9
        elif hasattr(e, "label"):
            assert p == e.label
    scores = TextToTextKind(info).score(examples, [to_text(info, e).target for e in examples])
    assert list(scores) == list(info.metrics)
    for metric, value in scores.items():
        if task == "stsb":  # the targets are the labels to the nearest 0.2
            assert value > 0.99, (metric, value)
        else:
            assert value == pytest.approx(perfect(metric)), (metric, value)


# ---------------------------------------------------------------------------------------------- unreadable


def score(task, examples, predictions):
    kind = TextToTextKind(TASKS[task])
    return kind.score(examples, predictions)


def test_an_unreadable_class_counts_as_wrong_as_sklearn_scores_it():
    labels = [1, 0, 1, 0, 1, 1, 0, 0]
    written = ["positive", "banana", "", "negative ", "Positive", "positive", "positive", "not_a_label"]
    parsed = [1, -1, -1, 0, -1, 1, 1, -1]  # names are exact (surrounding spaces aside); -1 is no label
    sst2 = [SentenceExample(f"s{i}", y) for i, y in enumerate(labels)]
    assert [from_text(TASKS["sst2"], w, e) for w, e in zip(written, sst2, strict=True)] == parsed
    assert score("sst2", sst2, written)["accuracy"] == pytest.approx(skm.accuracy_score(labels, parsed))
    names = {"positive": "acceptable", "negative ": "unacceptable"}
    cola = [SentenceExample(f"s{i}", y) for i, y in enumerate(labels)]
    mcc = score("cola", cola, [names.get(w, w) for w in written])["matthews"]
    assert mcc == pytest.approx(skm.matthews_corrcoef(labels, parsed))  # -1 as a third class, as sklearn counts it
    names = {"positive": "equivalent", "negative ": "not_equivalent"}
    mrpc = [PairExample("a", "b", y) for y in labels]
    scores = score("mrpc", mrpc, [names.get(w, w) for w in written])
    assert scores["f1"] == pytest.approx(skm.f1_score(labels, parsed, labels=[1], average="micro"))
    assert scores["accuracy"] == pytest.approx(skm.accuracy_score(labels, parsed))
    copa = [ChoiceExample(i, "p", "cause", ["a", "b"], y) for i, y in enumerate(labels)]
    written = ["choice2", "choice1", "choice3", "banana", "", "choice2", "choice2", "choice1"]
    parsed = [1, 0, -1, -1, -1, 1, 1, 0]
    assert [from_text(TASKS["copa"], w, e) for w, e in zip(written, copa, strict=True)] == parsed
    assert score("copa", copa, written)["accuracy"] == pytest.approx(skm.accuracy_score(labels, parsed))


def test_an_unreadable_score_is_minus_one_and_scored_as_scipy_does():
    labels = [3.75, 1.0, 4.2, 0.4, 2.6, 5.0]
    written = ["3.8", "3.x", "", "nan", "2.4", " 4.6 "]
    parsed = [3.8, INVALID_SCORE, INVALID_SCORE, INVALID_SCORE, 2.4, 4.6]
    examples = [PairExample("a", "b", y) for y in labels]
    assert [from_text(TASKS["stsb"], w, e) for w, e in zip(written, examples, strict=True)] == parsed
    scores = score("stsb", examples, written)
    assert scores["pearson"] == pytest.approx(stats.pearsonr(parsed, labels)[0])
    assert scores["spearman"] == pytest.approx(stats.spearmanr(parsed, labels)[0])
    assert math.isnan(score("stsb", examples, ["banana"] * 6)["pearson"])  # all unreadable: constant, undefined


def test_tags_of_the_wrong_number_or_kind_are_padded_with_a_wrong_tag():
    gold = [["PRON", "VERB", "PUNCT"], ["DET", "NOUN"], ["NOUN"]]
    examples = [TaggingExample([f"w{i}" for i in range(len(t))], t) for t in gold]
    written = ["PRON VERB", "DET NOUN NOUN VERB", "banana"]  # too few, too many, no tag at all
    parsed = [from_text(TASKS["ud_pos"], w, e) for w, e in zip(written, examples, strict=True)]
    assert parsed == [["PRON", "VERB", "<invalid>"], ["DET", "NOUN"], ["<invalid>"]]
    flat = lambda rows: [t for row in rows for t in row]
    expected = skm.accuracy_score(flat(gold), flat(parsed))
    assert score("ud_pos", examples, written)["accuracy"] == pytest.approx(expected) == pytest.approx(4 / 6)
    assert score("ud_pos", examples, ["", "", ""])["accuracy"] == 0.0


def test_bio_tags_that_cannot_be_read_are_no_entity():
    gold = [["B-person", "I-person", "O", "B-location"], ["O", "B-group"]]
    examples = [TaggingExample([f"w{i}" for i in range(len(t))], t) for t in gold]
    written = ["B-person I-person O", "O B-banana"]  # the location left out; a type that does not exist
    parsed = [from_text(TASKS["wnut17"], w, e) for w, e in zip(written, examples, strict=True)]
    assert parsed == [["B-person", "I-person", "O", "O"], ["O", "O"]]
    # 1 entity predicted, right; 3 in the gold: P = 1, R = 1/3, F1 = 2 * 1/3 / (4/3) = 0.5
    assert score("wnut17", examples, written)["entity_f1"] == pytest.approx(0.5)
    assert score("wnut17", examples, ["", "I-"])["entity_f1"] == 0.0


def test_squad_answers_and_no_answer_are_scored_by_squads_rules():
    examples = [
        QAExample("a", "who?", "the sea was calm", [Answer("the sea", 0)], "t"),
        QAExample("b", "when?", "never", [], "t"),
        QAExample("c", "what?", "calm sea", [Answer("calm", 0)], "t"),
    ]
    scores = score("squad2", examples, ["sea", NO_ANSWER_TEXT, ""])  # articles dropped; "" is no answer: wrong here
    assert scores == {"squad_em": pytest.approx(200 / 3), "squad_f1": pytest.approx(200 / 3)}


# ---------------------------------------------------------------------------------------------- mixing


def test_mixing_rates_against_hand_computation():
    sizes = [100, 10, 1000]
    assert mixing_rates(sizes, "proportional") == pytest.approx([100 / 1110, 10 / 1110, 1000 / 1110])
    assert mixing_rates(sizes, "proportional", limit=200) == pytest.approx([100 / 310, 10 / 310, 200 / 310])
    assert mixing_rates(sizes, "equal") == pytest.approx([1 / 3] * 3)
    capped = [100 / 310, 10 / 310, 200 / 310]
    for limit in (200, 2**21):
        proportional = mixing_rates(sizes, "proportional", limit=limit)
        assert mixing_rates(sizes, "temperature", limit=limit, temperature=1.0) == pytest.approx(proportional)
    root = [r**0.5 for r in capped]
    scaled = [r / sum(root) for r in root]
    assert mixing_rates(sizes, "temperature", limit=200, temperature=2.0) == pytest.approx(scaled)
    assert mixing_rates(sizes, "temperature", temperature=1e6) == pytest.approx([1 / 3] * 3, abs=1e-5)
    rates = [mixing_rates(sizes, "temperature", temperature=t)[1] for t in (1, 2, 8, 64)]
    assert rates == sorted(rates) and sum(mixing_rates(sizes, "temperature", temperature=8)) == pytest.approx(1)
    bad = [dict(strategy="bogus"), dict(strategy="proportional", limit=0), dict(strategy="temperature", temperature=0)]
    for settings in bad:
        with pytest.raises(ConfigError):
            mixing_rates(sizes, **settings)


def test_the_sampler_draws_tasks_at_their_rates_and_cycles_each_task():
    datasets = [[("a", i) for i in range(7)], [("b", i) for i in range(3)], [("c", i) for i in range(50)]]
    rates = [0.5, 0.3, 0.2]
    stream = mix(datasets, rates, 30_000, seed=1)
    counts = [sum(1 for task, _ in stream if task == name) for name in "abc"]
    assert stats.chisquare(counts, [r * len(stream) for r in rates]).pvalue > 0.001, counts
    b = [i for task, i in stream if task == "b"]
    for start in range(0, 30, 3):  # every pass over a task shows each of its examples once
        assert sorted(b[start : start + 3]) == [0, 1, 2]
    assert b[:3] != b[3:6] or b[3:6] != b[6:9]  # passes are reshuffled
    assert mix(datasets, rates, 500, seed=1) == stream[:500]  # the same seed, the same stream, at any length
    assert mix(datasets, rates, 500, seed=2) != stream[:500]


# ---------------------------------------------------------------------------------------------- end to end

TINY_BART = ["--model", "bart", "--size", "tiny", "model.n_encoder_layers=1", "model.n_decoder_layers=1"]
TINY_BART += ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.max_len=64", "max_length=64"]
QUICK = ["max_train_examples=16", "max_eval_examples=8", "batch_size=8", "warmup_steps=1", "max_target_length=8"]
QUICK += ["vocab_size=300", "progress=false", "threads=1"]


def test_multi_task_fine_tuning_scores_each_task_and_resumes(tmp_path, capsys):
    tasks = ["sst2", "stsb", "squad2"]
    argv = [*TINY_BART, "--task", ",".join(tasks), *QUICK, "mixing=temperature", f"run_dir={tmp_path}"]
    assert main([*argv, "max_steps=4"]) == 0
    out = capsys.readouterr().out
    assert "sst2+stsb+squad2 (text-to-text, mixing=temperature: sst2 0.333, stsb 0.333, squad2 0.333" in out
    assert "\nstsb validation (8 examples): pearson " in out and "average of 3 tasks" in out
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["task"] == "sst2,stsb,squad2" and results["tasks"] == tasks and results["split"] == "validation"
    assert results["n_examples"] == dict.fromkeys(tasks, 8) and results["step"] == 4
    assert {t: list(m) for t, m in results["metrics"].items()} == {t: list(TASKS[t].metrics) for t in tasks}
    assert results["mixing"] == {"strategy": "temperature", "rates": dict.fromkeys(tasks, pytest.approx(1 / 3))}
    mean = average(results["metrics"])
    assert math.isnan(results["average"]) if math.isnan(mean) else results["average"] == pytest.approx(mean)
    assert results["name"] == "bart-tiny (scratch), multi-task (temperature)"
    table = glue_table([results]).splitlines()
    assert table[0] == "| model | split | SST-2 acc | STS-B Pearson/Spearman | SQuAD 2.0 EM/F1 |"
    assert main(["--resume", str(tmp_path), "max_steps=6"]) == 0
    resumed = json.loads((tmp_path / "results.json").read_text())
    assert resumed["step"] == 6 and resumed["tasks"] == tasks and set(resumed["metrics"]) == set(tasks)


def synthetic_sentiment(split):
    """Filler words around one cue word that decides the label: a task a model learns or fails visibly."""
    rng = random.Random(split)
    filler = "the a film plot actor scene was is quite very rather and but it".split()
    cues = (("awful", "bad", "dull", "boring"), ("great", "good", "superb", "fun"))
    examples = []
    for _ in range(400 if split == "train" else 100):
        label = rng.randrange(2)
        words = rng.choices(filler, k=rng.randint(3, 8))
        words.insert(rng.randrange(len(words) + 1), rng.choice(cues[label]))
        examples.append(SentenceExample(" ".join(words), label))
    return examples


def test_a_task_learned_in_a_mixture_writes_its_labels(tmp_path, monkeypatch):
    """SST-2's cue words mixed with CoLA: the model writes "negative"/"positive" and gets them right."""
    monkeypatch.setitem(TASKS, "sst2", dataclasses.replace(TASKS["sst2"], loader=synthetic_sentiment))
    argv = ["--task=sst2,cola", "--model=bart", "model.n_encoder_layers=1", "model.n_decoder_layers=1"]
    argv += ["model.d_model=64", "model.n_heads=4", "model.d_ff=128", "model.max_len=64", "max_length=48"]
    argv += ["max_steps=300", "batch_size=16", "lr=3e-3", "warmup_steps=10", "vocab_size=300", "progress=false"]
    argv += ["threads=1", "max_target_length=16", "max_train_examples=400", "max_eval_examples=100"]
    assert main([*argv, f"run_dir={tmp_path}"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    labels = [e.label for e in synthetic_sentiment("validation")]
    majority = max(labels.count(0), labels.count(1)) / len(labels)
    assert results["metrics"]["sst2"]["accuracy"] >= max(0.75, majority + 0.2), results["metrics"]


def test_one_task_as_text_to_text_keeps_the_single_task_results(tmp_path):
    argv = [*TINY_BART, "--task", "copa", *QUICK, "text_to_text=true", "max_steps=2", f"run_dir={tmp_path}"]
    assert main(argv) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results) == ["task", "split", "metrics", "n_examples", "name", "model", "pretrained", "step", "config"]
    assert results["task"] == "copa" and list(results["metrics"]) == ["accuracy"] and results["n_examples"] == 8
    assert results["config"]["job"]["text_to_text"] == "true" and results["name"] == "bart-tiny (scratch)"


def test_text_to_text_is_chosen_by_the_setting_the_registry_and_the_number_of_tasks():
    bart, bert = get_model("bart"), get_model("bert")
    assert not bart.text_to_text and not use_text_to_text("auto", bart)  # BART's own way: heads
    assert use_text_to_text("true", bart) and use_text_to_text("auto", bart, n_tasks=2)
    assert not use_text_to_text("false", bart) and not use_text_to_text("auto", bert)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "sst2,nope"], r"^error: unknown task 'nope'"),
        (["--task", "sst2,stsb", "--model", "bart", "mixing=bogus"], r"^error: mixing='bogus' is not one of"),
        (
            ["--task", "sst2,stsb", "--model", "bert"],
            r"^error: multi-task training .* needs an encoder-decoder model "
            r"\(bart.*\); bert is an encoder$",
        ),  # fmt: skip
        (["--task", "sst2", "--model", "gpt", "text_to_text=true"], r"needs an encoder-decoder .*; gpt is a decoder$"),
        (["--task", "sst2,rte", "--model", "bart", "text_to_text=false"], r"drop text_to_text=false$"),
    ],
)
def test_bad_settings_are_one_clear_line_from_the_cli(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "minilm.finetune", *argv, f"run_dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_help_lists_each_tasks_text_form_and_the_mixing_strategies():
    text = _options_text()
    assert "    sst2       sst2 sentence: <sentence> -> negative | positive" in text
    assert "snli hypothesis: <sentence2> premise: <sentence1> -> entailment | neutral | contradiction" in text
    for strategy in MIXING:
        assert f"    {strategy} " in text
