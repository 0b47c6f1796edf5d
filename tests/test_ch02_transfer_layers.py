"""experiments/ch02_transfer_layers.py (Radford et al.'s Figure 2, left, in miniature): a row with k blocks
transferred holds exactly the pretrained embeddings and first k blocks, and elsewhere the fresh weights that the
"none" row holds everywhere; and the recorded results, when present, are one row per k within their ranges."""

import json
import sys
from pathlib import Path

import pytest
import torch

from minilm.files import file_sha256
from minilm.finetune.model import from_pretrained
from minilm.models.course import course_checkpoint_folder
from minilm.train.pretrain import main as pretrain_main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.ch02_transfer_layers import transfer  # noqa: E402

N_LAYERS = 3


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory):
    """A pre-LN GPT of 3 blocks after a few steps of pretraining, through the real CLI."""
    root = tmp_path_factory.mktemp("gpt")
    corpus = root / "corpus.txt"
    story = "the film was good and the actors were great . the plot was bad but the music was fun ."
    corpus.write_text("\n\n".join(f"{story} {i}" for i in range(40)))
    argv = [f"corpus={corpus}", "seq_len=32", "vocab_size=300", "sample_tokens=0", "max_steps=3", "batch_size=4"]
    argv += [f"model.n_layers={N_LAYERS}", "model.d_model=32", "model.n_heads=2", "model.max_len=64"]
    argv += ["warmup_steps=1", "progress=false", f"run_dir={root / 'run'}"]
    assert pretrain_main(argv) == 0
    return root / "run"


def _state(checkpoint: Path) -> dict:
    return from_pretrained(str(checkpoint), {}).model.state_dict()


def test_k_blocks_come_from_pretraining_and_the_rest_from_the_fresh_model(pretrained_run, tmp_path):
    pretrained = _state(transfer(pretrained_run, N_LAYERS, tmp_path / "all"))
    fresh = _state(transfer(pretrained_run, None, tmp_path / "none"))
    differs = [name for name in fresh if not torch.equal(fresh[name], pretrained[name])]
    assert differs, "pretraining changed the weights"
    assert any(n.startswith("decoder.final_norm") for n in pretrained)  # a pre-LN GPT: the norm is the top's
    for k in range(N_LAYERS + 1):
        state = _state(transfer(pretrained_run, k, tmp_path / f"k{k}"))
        for name, tensor in state.items():
            block = int(name.split(".")[2]) if name.startswith("decoder.layers.") else None
            from_pretraining = (
                block is not None and block < k
                or name.startswith("embedding.") or name == "lm_head.weight"  # tied to the token embedding
                or (name.startswith("decoder.final_norm") and k == N_LAYERS)
            )  # fmt: skip
            expected = pretrained[name] if from_pretraining else fresh[name]
            assert torch.equal(tensor, expected), (k, name)


def test_a_k_beyond_the_model_is_refused(pretrained_run, tmp_path):
    with pytest.raises(ValueError, match="k=4: the model has 3 blocks"):
        transfer(pretrained_run, N_LAYERS + 1, tmp_path / "k4")


def test_recorded_rows_are_one_per_k_within_range():
    path = ROOT / "experiments" / "results" / "ch02_transfer_layers.json"
    if not path.exists():
        pytest.skip("run experiments/ch02_transfer_layers.py first")
    results = json.loads(path.read_text())["results"]
    n_layers = results["setup"]["n_layers"]
    rows = results["rows"]
    assert [r["blocks_transferred"] for r in rows] == [None, *range(n_layers + 1)]
    for row in rows:
        assert 0.0 <= row["sst2_accuracy"] <= 1.0 and 0.0 <= row["snli_accuracy"] <= 1.0
    weights = course_checkpoint_folder("gpt", ROOT) / "model.safetensors"
    assert results["setup"]["checkpoint_sha256"] == file_sha256(weights), "the course GPT changed: rerun the experiment"
