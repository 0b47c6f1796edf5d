"""Fine-tuning CLI: every task end to end, learning, span and tag alignment, pretrained bodies, the table, errors."""

import dataclasses
import json
import math
import random
import re
import subprocess
import sys

import pytest
import safetensors.torch
import torch

from minilm.data.examples import Answer, ChoiceExample, QAExample, SentenceExample, Seq2SeqExample, TaggingExample
from minilm.data.tasks import TASKS
from minilm.finetune import main
from minilm.finetune.cli import parse_args
from minilm.finetune.config import FinetuneConfig, resolve
from minilm.finetune.kinds import SpanKind, TaggingKind, TaskEncoder, span_text, task_kind, words_from_tokens
from minilm.finetune.model import (
    GPT_DELIM,
    GPT_EXTRACT,
    GPT_START,
    LAYER_CHOICES,
    FinetuneModel,
    LayerSelection,
    encode_layers,
    from_pretrained,
    from_scratch,
    head_width,
)
from minilm.heads import IGNORE_INDEX
from minilm.tokenizers import Tokenizer, train_tokenizer
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError
from minilm.train.pretrain import main as pretrain_main
from minilm.train.trainer import TrainConfig

TINY_MODEL = ["model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.max_len=64", "max_length=64"]
QUICK = ["max_steps=10", "batch_size=8", "warmup_steps=2", "progress=false", "threads=1", "vocab_size=300"]


# text-to-text tasks need an encoder-decoder: a 1+1-layer BART
TINY_SEQ2SEQ = ["--model=bart", "model.n_encoder_layers=1", "model.n_decoder_layers=1", *TINY_MODEL[1:]]


def finetune(run_dir, task, *extra):
    """Fine-tune a 1-layer GPT (BART for text to text) from scratch on 64 examples; returns (exit code, results.json
    or None)."""
    model = TINY_SEQ2SEQ if TASKS[task].example_type is Seq2SeqExample else TINY_MODEL
    argv = [f"--task={task}", "max_train_examples=64", "max_eval_examples=32", *model, *QUICK]
    code = main([*argv, f"run_dir={run_dir}", *extra])
    results = run_dir / "results.json"
    return code, json.loads(results.read_text()) if results.exists() else None


BOUNDS = {
    "accuracy": (0, 1),
    "f1": (0, 1),
    "entity_f1": (0, 1),
    "matthews": (-1, 1),
    "pearson": (-1, 1),
    "spearman": (-1, 1),
    "squad_em": (0, 100),
    "squad_f1": (0, 100),
    "rougeL": (0, 1),
}


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_runs_end_to_end_from_scratch(tmp_path, task):
    code, results = finetune(tmp_path, task)
    assert code == 0
    assert results["task"] == task and results["split"] == "validation" and results["n_examples"] == 32
    assert list(results["metrics"]) == list(TASKS[task].metrics)
    for name, value in results["metrics"].items():
        low, high = BOUNDS[name]
        assert math.isfinite(value) and low <= value <= high, (name, value)
    assert results["pretrained"] == "" and results["step"] == 10
    assert (tmp_path / "tokenizer").is_dir() and ckpt.find_checkpoint(tmp_path).name == "step_00000010"


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


def test_fine_tuning_learns_beyond_the_majority_class(tmp_path, monkeypatch):
    monkeypatch.setitem(TASKS, "sst2", dataclasses.replace(TASKS["sst2"], loader=synthetic_sentiment))
    extra = ["max_train_examples=0", "max_eval_examples=0", "max_steps=40", "lr=3e-3", "batch_size=16", "log_every=1"]
    code, results = finetune(tmp_path, "sst2", *extra)
    assert code == 0
    labels = [e.label for e in synthetic_sentiment("validation")]
    majority = max(labels.count(0), labels.count(1)) / len(labels)
    assert results["metrics"]["accuracy"] >= max(0.9, majority + 0.2)
    entries = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [e["loss"] for e in entries if e["split"] == "train"]
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["Who founded the Normans in Normandy?", "The Normans were founded by Rollo, a Viking leader."] * 20
    return train_tokenizer(texts, "gpt2", vocab_size=300)


def squad_example(answer="Rollo"):
    context = "The Normans were founded by Rollo, a Viking leader. They settled in the north of France."
    answers = [Answer(answer, context.index(answer))] if answer else []
    return QAExample("q1", "Who founded the Normans?", context, answers, "Normans")


@pytest.mark.parametrize("pooling", ["last", "first"])
def test_span_answer_maps_to_tokens_and_back(tokenizer, pooling):
    kind = SpanKind(TASKS["squad2"])
    for answer in ("Rollo", "Viking leader", "north of France"):
        (f,) = kind.encode_examples([squad_example(answer)], TaskEncoder(tokenizer, 64, pooling))
        start, end = f.label
        assert span_text(f.aux.context, f.aux.offsets, start, end) == answer
        assert f.aux.answerable[start] and f.aux.answerable[end] and start != f.aux.null
        logits = torch.zeros(1, len(f.input_ids[0]), 2)  # (B, T, 2): peaks at the answer's ends
        logits[0, start, 0] = logits[0, end, 1] = 5.0
        assert kind.predict(logits, [f]) == [answer]
        logits[0, f.aux.null] = 20.0  # the summary position wins: no answer
        assert kind.predict(logits, [f]) == [""]


@pytest.mark.parametrize("pooling", ["last", "first"])
def test_answers_cut_away_or_absent_point_at_the_summary_position(tokenizer, pooling):
    kind = SpanKind(TASKS["squad2"])
    cut, missing = kind.encode_examples(
        [squad_example("north of France"), squad_example(None)], TaskEncoder(tokenizer, 20, pooling)
    )
    for f in (cut, missing):
        null = len(f.input_ids[0]) - 1 if pooling == "last" else 0
        assert f.aux.null == null and f.label == (null, null)
    assert kind.score([squad_example("north of France")], [""]) == {"squad_em": 0.0, "squad_f1": 0.0}


def test_token_labels_align_through_the_real_tokenizer(tokenizer):
    kind = TaggingKind(TASKS["wnut17"])
    words = ["Rollo", "founded", "Normandy-land", "", "!!"]
    tags = ["B-person", "O", "B-location", "O", "O"]
    tag_ids = [TASKS["wnut17"].labels.index(t) for t in tags]
    (f,) = kind.encode_examples([TaggingExample(words, tags)], TaskEncoder(tokenizer, 64, "last"))
    word_ids, n_words = f.aux
    starts = [0, 6, 14, 28, 29]  # each word's first character in "Rollo founded Normandy-land  !!"
    for (s, e), w in zip(tokenizer([" ".join(words)]).offsets[0], word_ids, strict=True):
        assert w is None or starts[w] <= s < e <= starts[w] + len(words[w])  # each token lies inside its word
    labelled = [j for j, y in enumerate(f.label) if y != IGNORE_INDEX]
    assert [word_ids[j] for j in labelled] == [0, 1, 2, 4]  # the first sub-word of each word; "" has no token
    assert [f.label[j] for j in labelled] == [tag_ids[w] for w in (0, 1, 2, 4)]
    assert len(f.input_ids[0]) > len(labelled)  # later sub-words exist, and are ignored
    predictions = [99 if y == IGNORE_INDEX else y for y in f.label]  # whatever the later sub-words predict
    assert words_from_tokens(predictions, word_ids, n_words) == tag_ids
    (short,) = kind.encode_examples([TaggingExample(words, tags)], TaskEncoder(tokenizer, 4, "last"))
    predicted = words_from_tokens([7] * 4, short.aux[0], n_words)
    assert predicted == [7 if w in short.aux[0] else 0 for w in range(n_words)] and 4 not in short.aux[0]


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    corpus = root / "corpus.txt"
    story = "the film was good and the actors were great . the plot was bad but the music was fun ."
    corpus.write_text("\n\n".join(f"{story} {i}" for i in range(40)))
    argv = [f"corpus={corpus}", "seq_len=32", "vocab_size=300", "sample_tokens=0", "max_steps=2", "batch_size=4"]
    argv += [*TINY_MODEL[:-1], "warmup_steps=1", "progress=false", f"run_dir={root / 'run'}"]
    assert pretrain_main(argv) == 0
    return root / "run"


def test_pretrained_body_and_tokenizer_are_loaded(pretrained_run):
    body = from_pretrained(str(pretrained_run), {})
    saved = safetensors.torch.load_file(ckpt.find_checkpoint(pretrained_run) / "model.safetensors")
    for name, tensor in body.model.state_dict().items():
        if name in saved:
            assert torch.equal(tensor, saved[name]), name
    assert body.tokenizer.backend.get_vocab() == Tokenizer.load(pretrained_run / "tokenizer").backend.get_vocab()


def test_fine_tuning_a_frozen_pretrained_body_trains_only_the_head(tmp_path, pretrained_run, capsys):
    code, results = finetune(tmp_path, "sst2", f"--pretrained={pretrained_run}", "freeze_body=true", "lr=1e-2")
    assert code == 0
    header = re.search(r"with run@2: (\S+) trainable parameters", capsys.readouterr().out)
    assert results["pretrained"] == str(ckpt.find_checkpoint(pretrained_run)) and results["name"] == "run@2"
    before = safetensors.torch.load_file(ckpt.find_checkpoint(pretrained_run) / "model.safetensors")
    after = safetensors.torch.load_file(ckpt.find_checkpoint(tmp_path) / "model.safetensors")
    assert before.keys() <= {k.removeprefix("body.") for k in after}
    # unchanged, but for GPT's start/delimiter/extract tokens: 3 rows appended to the token embedding
    assert all(torch.equal(after[f"body.{k}"][: len(v)], v) for k, v in before.items() if f"body.{k}" in after)
    assert len(after["body.embedding.token.weight"]) == len(before["embedding.token.weight"]) + 3
    head = sum(t.numel() for k, t in after.items() if not k.startswith("body."))
    assert header and header[1] == f"{head:,}", "the head's exact count, not 0.00M"
    pretrained_vocab = Tokenizer.load(pretrained_run / "tokenizer").backend.get_vocab()
    vocab = Tokenizer.load(tmp_path / "tokenizer").backend.get_vocab()
    assert {k: v for k, v in vocab.items() if k not in pretrained_vocab} == {
        GPT_START: len(pretrained_vocab),
        GPT_DELIM: len(pretrained_vocab) + 1,
        GPT_EXTRACT: len(pretrained_vocab) + 2,
    }


def test_resume_continues_the_run(tmp_path):
    assert finetune(tmp_path, "rte", "max_steps=4")[0] == 0
    assert main(["--resume", str(tmp_path), "max_steps=6"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["step"] == 6 and results["task"] == "rte"


def test_fine_tuning_with_lamb_is_recorded_and_resumes_only_as_lamb(tmp_path, capsys):
    code, results = finetune(tmp_path, "rte", "optimizer=lamb", "max_steps=2")
    assert code == 0 and results["config"]["train"]["optimizer"] == "lamb"
    assert main(["--resume", str(tmp_path), "optimizer=adamw", "max_steps=3"]) == 2
    assert f"error: --resume {tmp_path} was trained with optimizer=lamb" in capsys.readouterr().err
    assert main(["--resume", str(tmp_path), "max_steps=3"]) == 0
    assert json.loads((tmp_path / "results.json").read_text())["config"]["train"]["optimizer"] == "lamb"


def test_settings_resolve_from_defaults_toml_and_command_line(tmp_path):
    toml = tmp_path / "job.toml"
    toml.write_text('[job]\ntask = "rte"\nmax_length = 96\n[train]\nlr = 1e-3\nmax_steps = 50\n[model]\nn_layers = 2\n')
    job, train, model = resolve(parse_args(["--config", str(toml), "lr=2e-4", "--task", "mrpc", "model.d_model=64"]))
    assert (job.task, job.max_length, job.pooling) == ("mrpc", 96, "auto")
    assert (train.lr, train.max_steps, train.schedule) == (2e-4, 50, "linear")
    assert model == {"n_layers": 2, "d_model": "64"} and train.run_dir.startswith("runs/finetune-mrpc-gpt-")


def test_eval_split_test_scores_the_test_split(tmp_path):
    code, results = finetune(tmp_path, "copa", "eval_split=test", "max_steps=2")
    assert code == 0 and results["split"] == "test" and results["n_examples"] == 32


def write_results(run_dir, name, task, metrics, split="validation"):
    run_dir.mkdir(parents=True)
    results = {"task": task, "split": split, "metrics": metrics, "n_examples": 10, "name": name}
    (run_dir / "results.json").write_text(json.dumps(results))


def test_glue_table(tmp_path, capsys):
    write_results(tmp_path / "runs" / "a", "gpt-tiny (scratch)", "mrpc", {"f1": 0.8123, "accuracy": 0.7})
    write_results(tmp_path / "runs" / "b", "gpt-tiny (scratch)", "stsb", {"pearson": 0.5, "spearman": 0.25})
    write_results(tmp_path / "runs" / "c", "pre@400", "squad2", {"squad_em": 51.23, "squad_f1": 55.0})
    write_results(tmp_path / "cola", "pre@400", "cola", {"matthews": 0.1})
    assert main(["table", str(tmp_path / "runs"), str(tmp_path / "cola")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| model | split | CoLA MCC | STS-B Pearson/Spearman | MRPC F1/acc | SQuAD 2.0 EM/F1 |"
    assert lines[2] == "| gpt-tiny (scratch) | validation | - | 50.0/25.0 | 81.2/70.0 | - |"
    assert lines[3] == "| pre@400 | validation | 10.0 | - | - | 51.2/55.0 |"
    assert main(["table", str(tmp_path / "nothing")]) == 2


def test_help_documents_every_option():
    done = subprocess.run([sys.executable, "-m", "minilm.finetune", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for cls in (FinetuneConfig, TrainConfig):
        for field in dataclasses.fields(cls):
            assert f"{field.name}=" in done.stdout, field.name
    assert "TOML file under [job], [train] and [model])" in done.stdout  # no [objective]: a run brings its own
    for choice in LAYER_CHOICES:
        assert f"    {choice} " in done.stdout
    for words in ("bert: sizes tiny, small", "kind encoder", "sst2     sequence", "weighted_all"):
        assert words in done.stdout


def test_bad_input_gives_one_clear_message(tmp_path, monkeypatch, capsys):
    assert main(["--task", "sst-2", f"run_dir={tmp_path}"]) == 2
    assert "unknown task 'sst-2'; did you mean 'sst2'?" in capsys.readouterr().err
    assert main(["lrr=1e-3", f"run_dir={tmp_path}"]) == 2
    assert "unknown key 'lrr'; did you mean 'lr'?" in capsys.readouterr().err
    assert main(["model.n_layer=1", f"run_dir={tmp_path}"]) == 2
    assert "unknown model key 'n_layer'" in capsys.readouterr().err
    assert main(["objective.format=segment_pair", f"run_dir={tmp_path}"]) == 2
    assert "unknown section(s) objective: use [job], [train], [model]" in capsys.readouterr().err
    assert main(["format=segment_pair", f"run_dir={tmp_path}"]) == 2  # a pretraining objective's setting
    assert "unknown key 'format'" in capsys.readouterr().err
    bad = lambda split: [SentenceExample("fine", 1), SentenceExample("odd", 5)]
    monkeypatch.setitem(TASKS, "sst2", dataclasses.replace(TASKS["sst2"], loader=bad))
    assert finetune(tmp_path, "sst2")[0] == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "label 5 is not in the task's label set {0: 'negative', 1: 'positive'}" in err
    empty = lambda split: [SentenceExample("fine", 1), SentenceExample("", 0)]
    monkeypatch.setitem(TASKS, "sst2", dataclasses.replace(TASKS["sst2"], loader=empty))
    assert finetune(tmp_path, "sst2")[0] == 2
    assert "train example 1: the text '' tokenises to nothing" in capsys.readouterr().err
    assert finetune(tmp_path, "rte", "--pretrained", str(tmp_path / "missing"))[0] == 1
    assert "no checkpoint at" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- features=


FEATURE_TEXTS = ["the film was good and fun", "the plot was dull", "a great actor in a bad scene"] * 5
TINY_BODIES = {  # 4 layers each; ELMo's features() returns hidden_states even when not asked
    "gpt": {"n_layers": 4, "d_model": 16, "n_heads": 2, "max_len": 32},
    "bert": {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_ff": 32, "max_len": 32},
    "elmo": {"n_layers": 4, "filters": ((1, 8), (2, 8)), "hidden_size": 8, "projection_dim": 8},
    "bart": {"n_encoder_layers": 2, "n_decoder_layers": 4, "d_model": 16, "n_heads": 2, "d_ff": 32, "max_len": 32},
}


def tiny_body(name, **overrides):
    body = from_scratch(name, "tiny", {**TINY_BODIES[name], **overrides}, FEATURE_TEXTS, 300, None)
    body.model.eval()
    return body


def sst2_batch(tokenizer, kind):
    examples = [SentenceExample(t, i % 2) for i, t in enumerate(FEATURE_TEXTS[:4])]
    return kind.collate(kind.encode_examples(examples, TaskEncoder(tokenizer, 32, "mean")))


def expected_features(features, hidden_states, mix):
    h = hidden_states
    if features == "weighted_all":
        s = torch.softmax(mix.weights.detach(), 0)
        return mix.gamma.detach() * sum(s[j] * h[j + 1] for j in range(len(h) - 1))
    return {
        "last": h[-1],
        "second_to_last": h[-2],
        "sum_last_four": h[-4] + h[-3] + h[-2] + h[-1],
        "concat_last_four": torch.cat(h[-4:], dim=-1),
        "embeddings": h[0],
    }[features]


@pytest.mark.parametrize("name", list(TINY_BODIES))
def test_features_feed_the_head_the_chosen_layers_at_their_width(name):
    torch.manual_seed(0)
    body = tiny_body(name)
    kind = task_kind(TASKS["sst2"])
    batch = sst2_batch(body.tokenizer, kind)
    hidden_states = encode_layers(body.model, batch)  # through features(..., output_hidden_states=True)
    assert len(hidden_states) == 5 == body.n_layers + 1  # the layer count the config gives
    last = body.model.features(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    assert torch.equal(hidden_states[-1], last)
    for i in range(4):  # distinct layers: reading a wrong one would show
        assert not torch.allclose(hidden_states[i], hidden_states[i + 1])
    C = hidden_states[0].size(-1)
    assert C == body.hidden_size  # the width the config gives (ELMo: 2 * projection_dim)
    for features in LAYER_CHOICES:
        width = head_width(body, features)
        assert width == (4 * C if features == "concat_last_four" else C)
        model = FinetuneModel(body, kind.head(width, "mean"), kind, freeze_body=True, layers=features).eval()
        if model.layers is not None and model.layers.mix is not None:
            with torch.no_grad():  # away from the equal mix, so that the weights matter
                model.layers.mix.weights.copy_(torch.tensor([2.0, -1.0, 0.5, 0.0]))
                model.layers.mix.gamma.fill_(1.5)
        seen = []
        model.head.register_forward_pre_hook(lambda module, args, seen=seen: seen.append(args[0]))
        with torch.no_grad():
            logits, _ = model(batch)
        mix = model.layers.mix if model.layers is not None else None
        assert seen[0].shape == (*batch["input_ids"].shape, width) and logits.shape == (4, 2)
        torch.testing.assert_close(seen[0], expected_features(features, hidden_states, mix), msg=features)


@pytest.mark.parametrize("name", list(TINY_BODIES))
def test_every_registered_model_takes_the_one_features_signature(name):
    body = tiny_body(name)
    batch = sst2_batch(body.tokenizer, task_kind(TASKS["sst2"]))
    ids, mask = batch["input_ids"], batch["attention_mask"]
    types = torch.zeros_like(ids)
    types[:, 3:] = 1  # a second segment from the fourth token on
    out = body.model.features(ids, mask, types, True)  # (input_ids, attention_mask, token_type_ids, hidden_states)
    assert len(out.hidden_states) == body.n_layers + 1 and out.last_hidden_state.shape == (*ids.shape, body.hidden_size)
    without = body.model.features(ids, mask, None, True).last_hidden_state
    if body.entry.kind == "encoder":  # BERT's segment embeddings read them
        assert not torch.allclose(out.last_hidden_state, without)
    else:  # GPT and ELMo have none: token types are accepted and ignored
        torch.testing.assert_close(out.last_hidden_state, without, rtol=0, atol=0)


def test_the_head_and_layer_sizes_come_from_the_config_without_running_the_body(monkeypatch):
    body = tiny_body("elmo")
    monkeypatch.setattr(body.model, "features", lambda *args, **kwargs: pytest.fail("the body was run"))
    assert (body.hidden_size, body.n_layers) == (2 * 8, 4)  # ELMo's layers are [forward; backward]
    kind = task_kind(TASKS["sst2"])
    model = FinetuneModel(body, kind.head(head_width(body, "concat_last_four"), "mean"), kind, True, "concat_last_four")
    assert model.layers.n_layers == 4 and model.head.classifier.in_features == 4 * 16


def test_counts_are_the_units_each_loss_part_averages_over(tokenizer):
    sequence, tagging = task_kind(TASKS["sst2"]), task_kind(TASKS["wnut17"])
    encoder = TaskEncoder(tokenizer, 64, "last")
    two = [SentenceExample("a b", 1), SentenceExample("c", 0)]
    sentences = sequence.collate(sequence.encode_examples(two, encoder))
    assert sequence.counts(sentences) == 2  # examples
    words = [TaggingExample(["Rollo", "founded", "Normandy-land"], ["B-person", "O", "B-location"])] * 2
    tags = tagging.collate(tagging.encode_examples(words, encoder))
    assert int(tagging.counts(tags)) == 6 < tags["labels"].numel()  # the first sub-word of each word, not padding
    span, choice = task_kind(TASKS["squad2"]), task_kind(TASKS["copa"])
    questions = span.collate(span.encode_examples([squad_example(), squad_example(None)], encoder))
    assert span.counts(questions) == 2
    copa = [ChoiceExample(1, "it rained", "effect", ["the film", "the plot"], 0)] * 3
    options = choice.collate(choice.encode_examples(copa, encoder))
    assert choice.counts(options) == 3 and options["input_ids"].size(0) == 6  # examples, not their options


def test_feature_based_training_keeps_the_body_and_learns_the_layer_mix():
    torch.manual_seed(0)
    body = tiny_body("bert", dropout=0.1)
    kind = task_kind(TASKS["sst2"])
    batch = sst2_batch(body.tokenizer, kind)
    before = {k: v.clone() for k, v in body.model.state_dict().items()}
    model = FinetuneModel(body, kind.head(head_width(body, "weighted_all"), "mean"), kind, True, "weighted_all")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert {"layers.mix.weights", "layers.mix.gamma"} <= trainable and not any(n.startswith("body.") for n in trainable)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model.train()
    assert not body.model.training  # frozen: no dropout either
    for _ in range(5):
        optimizer.zero_grad()
        model(batch)[1].loss.backward()
        optimizer.step()
    assert all(torch.equal(v, before[k]) for k, v in body.model.state_dict().items())
    assert not torch.equal(model.layers.mix.weights.detach(), torch.zeros(4)) and model.layers.mix.gamma.item() != 1.0
    body.model.requires_grad_(True)
    full = FinetuneModel(body, kind.head(head_width(body, "sum_last_four"), "mean"), kind, False, "sum_last_four")
    full(batch)[1].loss.backward()  # without freeze_body the chosen layers fine-tune the body
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in body.model.parameters())


def test_a_body_too_shallow_for_the_features_is_a_config_error(tmp_path, capsys):
    body = tiny_body("gpt", n_layers=2)
    kind = task_kind(TASKS["sst2"])
    for features in ("sum_last_four", "concat_last_four"):
        with pytest.raises(ConfigError, match=f"features={features} needs a body of at least 4 layers, this one has 2"):
            FinetuneModel(body, kind.head(head_width(body, features), "mean"), kind, True, features)
    FinetuneModel(body, kind.head(16, "mean"), kind, True, "second_to_last")  # 2 layers are enough for that
    with pytest.raises(ConfigError, match="needs a body of at least 2 layers, this one has 1"):
        LayerSelection("second_to_last", 1)
    with pytest.raises(ConfigError, match="features='sum_last_3' is not one of last, second_to_last"):
        LayerSelection("sum_last_3", 4)
    assert finetune(tmp_path, "sst2", "features=concat_last_four")[0] == 2  # TINY_MODEL has 1 layer
    assert "features=concat_last_four needs a body of at least 4 layers, this one has 1" in capsys.readouterr().err
    assert main(["features=last4", f"run_dir={tmp_path}"]) == 2
    assert "features='last4' is not one of last" in capsys.readouterr().err


def test_feature_based_concat_last_four_runs_end_to_end(tmp_path):
    extra = ["features=concat_last_four", "freeze_body=true", "model.n_layers=4", "max_steps=4", "max_eval_examples=16"]
    code, results = finetune(tmp_path, "wnut17", *extra)
    assert code == 0 and results["n_examples"] == 16 and 0 <= results["metrics"]["entity_f1"] <= 1
    assert results["config"]["job"]["features"] == "concat_last_four" and results["config"]["job"]["freeze_body"]
    weights = safetensors.torch.load_file(ckpt.find_checkpoint(tmp_path) / "model.safetensors")
    assert weights["head.classifier.weight"].shape[-1] == 4 * 32
