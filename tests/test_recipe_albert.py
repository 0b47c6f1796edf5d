"""ALBERT's recipe: the model in the registry, mlm+sop's loss, counts and data, the short keys share= /
embedding_size= / ngram= on the command line, pretraining that learns, fine-tuning an ALBERT body, clear errors
through the real CLI."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from minilm.finetune import main as finetune_main
from minilm.models.albert import Albert, AlbertConfig
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import masked_positions, mlm_loss
from minilm.recipes.albert import SentenceOrderConfig, albert_mlm_sop_loss
from minilm.train import registry
from minilm.train.pretrain import main as pretrain_main
from minilm.train.trainer import read_metrics


def test_albert_is_registered_with_its_objectives_and_their_model_settings():
    entry = registry.get_model("albert")
    assert entry.kind == "encoder" and entry.tokenizer_family == "albert" and entry.build is Albert
    trains = sorted(name for name, o in registry.objectives().items() if "albert" in o.models)
    assert trains == ["mlm", "mlm+nsp", "mlm+sop"]
    settings = SentenceOrderConfig()
    assert (settings.format, settings.whole_word, settings.ngram, settings.pair_objective) == (
        "segment_pair",
        True,
        3,
        "sop",
    )
    for objective, heads in [("mlm", (False, False)), ("mlm+nsp", (True, False)), ("mlm+sop", (False, True))]:
        needs = registry.needed_settings(entry, registry.get_objective(objective))
        config = registry.model_config(entry, "tiny", 100, needs)
        assert (config.nsp, config.sop) == heads, objective
    bert_mlm = registry.needed_settings(registry.get_model("bert"), registry.get_objective("mlm"))
    assert bert_mlm == {"mlm": True, "nsp": False, "pooler": False}  # BERT has no SOP head to turn off


def test_mlm_sop_loss_has_named_parts_and_counts():
    torch.manual_seed(0)
    model = Albert(AlbertConfig(vocab_size=50, max_len=16, n_layers=2, n_heads=2, d_model=16, d_ff=32)).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (4, 12), generator=g)
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, 3:5] = ids[:, 3:5]
    batch = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
    batch.update(labels=labels, sentence_order_label=torch.tensor([0, 1, 1, 0]))
    out = albert_mlm_sop_loss(model, batch)
    hidden = model.features(ids, batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    mlm = mlm_loss(model.mlm_logits(hidden, masked_positions(labels)), labels)
    sop = F.cross_entropy(model.sop_logits(hidden), batch["sentence_order_label"])
    torch.testing.assert_close(out.parts["mlm"], mlm)
    torch.testing.assert_close(out.parts["sop"], sop)
    torch.testing.assert_close(out.loss, mlm + sop)
    assert registry.get_objective("mlm+sop").counts(batch) == {"mlm": 8, "sop": 4}


PRETRAIN = ["--model", "albert", "--objective", "mlm+sop", "vocab_size=300", "seq_len=48", "batch_size=16"]
PRETRAIN += ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "lr=3e-3", "warmup_steps=5"]
PRETRAIN += ["log_every=5", "eval_every=0", "progress=false", "threads=1", "sample_tokens=0"]


def test_albert_pretrains_with_mlm_sop_from_the_command_line_and_fine_tunes(tmp_path):
    """A corpus of three novels: the MLM loss falls; the short keys reach the model and the masking."""
    from minilm import data

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for book in data.load_gutenberg()[:3]:
        (corpus / f"{book.title[:20]}.txt").write_text("\n\n".join(book.paragraphs[:150]))
    run_dir = tmp_path / "run"
    args = [f"corpus={corpus}", "max_steps=80", "share=ffn", "embedding_size=8", "ngram=2", f"run_dir={run_dir}"]
    assert pretrain_main([*PRETRAIN, *args]) == 0
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["model"]["share"] == "ffn" and saved["model"]["embedding_size"] == 8
    assert saved["objective"]["ngram"] == 2 and saved["objective"]["whole_word"] is True
    train = [e for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
    assert {"mlm", "sop"} <= train[0].keys()
    first, last = (sum(e["mlm"] for e in part) / 2 for part in (train[:2], train[-2:]))
    assert last < first - 0.3, (first, last)

    tuned = tmp_path / "tuned"
    argv = ["--task", "mrpc", "--pretrained", str(run_dir), "max_train_examples=32", "max_eval_examples=16"]
    argv += ["max_steps=2", "batch_size=8", "max_length=48", "progress=false", "threads=1", f"run_dir={tuned}"]
    assert finetune_main(argv) == 0
    assert json.loads((tuned / "results.json").read_text())["model"] == "albert"


@pytest.mark.parametrize(
    "args, message",
    [
        (["share=some"], "unknown layer sharing share='some'; choose one of none, all, attention, ffn"),
        (["embedding_size=0"], "embedding_size must be >= 1"),
        (["n_heads=5"], "d_model=256 is not divisible by n_heads=5"),
        (["n_groups=3"], "n_groups=3 must divide n_layers=4"),
        (["ngram=0"], "ngram must be a whole number >= 1"),
        (["format=full_sentences"], "objective mlm\\+sop needs sentence pairs"),
        (["--objective", "clm"], "albert trains with objective mlm, mlm\\+nsp, mlm\\+sop"),
    ],
)
def test_bad_albert_settings_are_one_clear_message_from_the_cli(args, message, tmp_path):
    argv = ["--model", "albert", "--objective", "mlm+sop", *args, f"run_dir={tmp_path / 'run'}"]
    done = subprocess.run([sys.executable, "-m", "minilm.train", *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.parametrize("distributed", ["ddp", "fsdp"])
def test_two_processes_train_albert_with_a_shared_sublayer_or_say_why_not(distributed, tmp_path):
    """DDP replicates blocks that share their attention; FSDP, which shards block by block, refuses them clearly."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m"]
    argv = ["minilm.train", "--model", "albert", "--objective", "mlm", "corpus=tinyshakespeare", "vocab_size=400"]
    argv += ["seq_len=32", "n_layers=2", "d_model=32", "n_heads=2", "batch_size=8", "max_steps=3", "eval_every=0"]
    argv += ["progress=false", "sample_tokens=0", "share=attention", f"distributed={distributed}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [*launcher, *argv, f"run_dir={run_dir}"], env=env, capture_output=True, text=True, timeout=300
    )
    if distributed == "ddp":
        assert done.returncode == 0, done.stderr[-3000:]
        assert [e["step"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"][-1] == 3
    else:
        assert done.returncode != 0
        assert "error: distributed=fsdp shards block by block, but these blocks share a sublayer" in done.stderr
