"""DistilBERT (minilm.models.distilbert): BERT's code with DistilBERT's configuration, its parameter count against the
paper and transformers, Hugging Face checkpoints both ways with transformers as the oracle, and the student's
initialisation from a teacher (one layer out of two)."""

import dataclasses
import json

import pytest
import torch

import minilm.models
from minilm.files import CheckpointError
from minilm.models.bert import Bert, BertConfig, RobertaConfig
from minilm.models.distilbert import (
    DISTILBERT_PRESETS,
    DISTILBERT_SIZES,
    DistilBert,
    DistilBertConfig,
    distilbert_config,
    every_other_layer,
    init_from_teacher,
    student_from_teacher,
)
from minilm.models.hf import distilbert as hf_distilbert

transformers = pytest.importorskip("transformers")

ATOL = 1e-5
V = 99
TINY = DistilBertConfig(vocab_size=V, max_len=24, n_layers=2, n_heads=4, d_model=32, d_ff=37)
TINY_TEACHER = BertConfig(vocab_size=V, max_len=24, n_layers=4, n_heads=4, d_model=32, d_ff=37)


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied parameters once


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (biases and norms too), so that a mis-mapped tensor cannot hide; eval mode."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.2)
    return model.eval()


def _inputs():
    """Right padding in rows 1 and 2."""
    torch.manual_seed(1)
    ids = torch.randint(5, V, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    return ids.masked_fill(mask == 0, 0), mask


def _hf(cls: str, config: DistilBertConfig, **fields):
    hf_config = transformers.DistilBertConfig(**{**hf_distilbert.config_to_hf(config), **fields})
    return _randomise(getattr(transformers, cls)._from_config(hf_config, attn_implementation="eager"))


# --- the configuration -------------------------------------------------------------------------------------------


def test_distilbert_base_has_the_papers_66m_parameters_as_transformers_counts():
    config = distilbert_config("distilbert-base", mlm=False)
    assert (config.n_layers, config.d_model, config.n_heads, config.d_ff) == (6, 768, 12, 3072)
    assert (config.n_segments, config.pooler, config.nsp) == (0, False, False)
    with torch.device("meta"):
        ours = n_parameters(DistilBert(config))
        with_head = n_parameters(DistilBert(dataclasses.replace(config, mlm=True)))
        theirs = transformers.DistilBertModel(transformers.DistilBertConfig())
        theirs_mlm = transformers.DistilBertForMaskedLM(transformers.DistilBertConfig())
    assert ours == n_parameters(theirs) == 66_362_880 and abs(ours - 66e6) / 66e6 < 0.01  # the paper: "66M"
    assert with_head == n_parameters(theirs_mlm) == 66_985_530
    assert DISTILBERT_PRESETS == {"distilbert-base": {}}
    assert DistilBertConfig().n_layers == BertConfig().n_layers // 2  # "reduced by a factor of 2"


def test_the_training_sizes_are_berts_with_half_the_layers():
    for size in ("tiny", "small"):
        ours = distilbert_config(size)
        bert = minilm.models.bert.bert_config(size)
        assert ours.n_layers * 2 == bert.n_layers and (ours.d_model, ours.d_ff) == (bert.d_model, bert.d_ff)
    assert list(DISTILBERT_SIZES) == ["tiny", "small", "distilbert-base"]
    with pytest.raises(ValueError, match="unknown DistilBERT preset 'huge'; choose one of tiny, small"):
        distilbert_config("huge")
    with pytest.raises(ValueError, match="no token-type embeddings, pooler or NSP head"):
        DistilBert(dataclasses.replace(TINY, n_segments=2))


def test_defaults_are_transformers_and_configs_round_trip():
    full = transformers.DistilBertConfig().to_dict()
    assert hf_distilbert.config_from_hf(full) == DistilBertConfig()
    minimal = {k: full[k] for k in ("model_type", *hf_distilbert.REQUIRED)}
    assert hf_distilbert.config_from_hf(minimal) == DistilBertConfig()
    config = dataclasses.replace(TINY, activation="relu", dropout=0.2, attention_dropout=0.0, init_std=0.05, pad_id=3)
    theirs = transformers.DistilBertConfig(**hf_distilbert.config_to_hf(config))
    assert hf_distilbert.config_from_hf(theirs.to_dict()) == config
    assert minilm.models.hf.config_to_hf(config)["model_type"] == "distilbert"


# --- checkpoints, against transformers ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ["DistilBertModel", "DistilBertForMaskedLM"])
def test_minilm_loads_transformers_checkpoints_with_equal_outputs(cls, tmp_path):
    theirs = _hf(cls, TINY)
    theirs.save_pretrained(tmp_path)
    ours = minilm.models.from_pretrained(tmp_path)  # dispatched on model_type
    assert type(ours) is DistilBert and ours.config == dataclasses.replace(TINY, mlm=cls.endswith("MaskedLM"))
    ids, mask = _inputs()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        out = ours.features(ids, mask, output_hidden_states=True)
    real = mask.bool()
    for a, b in zip(out.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(a[real], b[real], atol=ATOL, rtol=0)
    if cls.endswith("MaskedLM"):
        logits = ours.mlm_logits(out.last_hidden_state)
        torch.testing.assert_close(logits[real], expected.logits[real], atol=ATOL, rtol=0)
    else:
        torch.testing.assert_close(out.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
        assert ours.mlm_head is None


@pytest.mark.parametrize("mlm", [False, True])
def test_transformers_loads_what_minilm_saved(mlm, tmp_path):
    ours = _randomise(DistilBert(dataclasses.replace(TINY, mlm=mlm)))
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    architecture = "DistilBertForMaskedLM" if mlm else "DistilBertModel"
    assert saved["model_type"] == "distilbert" and saved["architectures"] == [architecture]
    theirs = getattr(transformers, architecture).from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask)
        hidden = ours.features(ids, mask).last_hidden_state
    if mlm:
        torch.testing.assert_close(ours.mlm_logits(hidden)[real], expected.logits[real], atol=ATOL, rtol=0)
        assert theirs.vocab_projector.weight is theirs.distilbert.embeddings.word_embeddings.weight  # tied
    else:
        torch.testing.assert_close(hidden[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
    assert DistilBert.from_pretrained(tmp_path).config == ours.config  # and back


def test_sinusoidal_positions_load_as_learned_positions_holding_the_table(tmp_path):
    theirs = _hf("DistilBertModel", TINY, sinusoidal_pos_embds=True)
    fresh = transformers.DistilBertModel._from_config(theirs.config)  # _randomise overwrote the table: restore it
    with torch.no_grad():
        theirs.embeddings.position_embeddings.weight.copy_(fresh.embeddings.position_embeddings.weight)
    theirs.save_pretrained(tmp_path / "theirs")
    ours = DistilBert.from_pretrained(tmp_path / "theirs")
    table = theirs.embeddings.position_embeddings.weight
    assert torch.equal(ours.embedding.position.weight, table)
    assert torch.allclose(table[1, 0::2], torch.sin(1 / 10000 ** (torch.arange(0, 32, 2) / 32)))  # sinusoidal
    ids, mask = _inputs()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours.features(ids, mask).last_hidden_state
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()], atol=ATOL, rtol=0)
    ours.save_pretrained(tmp_path / "ours")  # as learned positions: transformers reads back the same table
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["sinusoidal_pos_embds"] is False
    back = transformers.DistilBertModel.from_pretrained(tmp_path / "ours").eval()
    assert torch.equal(back.embeddings.position_embeddings.weight, table)


def test_task_heads_are_ignored_with_a_warning_and_bad_configs_are_named(tmp_path):
    _hf("DistilBertForSequenceClassification", TINY).save_pretrained(tmp_path / "classifier")
    with pytest.warns(UserWarning, match="pre_classifier.*task heads live in minilm.heads"):
        assert DistilBert.from_pretrained(tmp_path / "classifier").mlm_head is None
    DistilBert(TINY).save_pretrained(tmp_path / "ours")
    config = json.loads((tmp_path / "ours" / "config.json").read_text())
    (tmp_path / "ours" / "config.json").write_text(json.dumps({**config, "activation": "tanh"}))
    with pytest.raises(CheckpointError, match="activation 'tanh' is not supported"):
        DistilBert.from_pretrained(tmp_path / "ours")
    with pytest.raises(CheckpointError, match="model_type='distilbert', expected 'bert' or 'roberta'"):
        Bert.from_pretrained(tmp_path / "classifier")
    with pytest.raises(CheckpointError, match="fixes every LayerNorm's eps at 1e-12"):
        DistilBert(dataclasses.replace(TINY, norm_eps=1e-5)).save_pretrained(tmp_path / "eps")


# --- the student, from a teacher ---------------------------------------------------------------------------------


def test_the_student_takes_every_other_layer_of_its_teacher():
    teacher = _randomise(Bert(TINY_TEACHER))
    student = student_from_teacher(teacher)
    assert isinstance(student, DistilBert) and student.config.n_layers == 2 and student.mlm_head is not None
    assert student.config == dataclasses.replace(TINY, max_len=24)
    assert every_other_layer(2, 4) == [0, 2] and every_other_layer(6, 12) == [0, 2, 4, 6, 8, 10]
    for ours, theirs in enumerate([0, 2]):
        for (name, a), b in zip(
            student.encoder.layers[ours].state_dict().items(),
            teacher.encoder.layers[theirs].state_dict().values(),
            strict=True,
        ):
            assert torch.equal(a, b), name
    for part in ("token", "position", "norm"):
        for a, b in zip(
            getattr(student.embedding, part).parameters(), getattr(teacher.embedding, part).parameters(), strict=True
        ):
            assert torch.equal(a, b), part
    assert student.embedding.segment is None  # the teacher's token types are dropped
    assert torch.equal(student.mlm_head.decoder.bias, teacher.mlm_head.decoder.bias)
    assert student.mlm_head.decoder.weight is student.embedding.token.weight  # still tied
    assert not student.training  # as the teacher
    # the extraction script's choice for BERT-base; and a student that is the whole teacher computes the same
    assert student_from_teacher(teacher, layers=[0, 1, 3]).config.n_layers == 3
    whole = student_from_teacher(teacher, layers=[0, 1, 2, 3])
    ids, mask = _inputs()
    segments = torch.zeros_like(ids)
    with torch.no_grad():  # the teacher's sentence-A row, added to every token, is all that differs
        teacher.embedding.segment.weight.zero_()
        expected = teacher(ids, mask, segments)
        torch.testing.assert_close(whole(ids, mask)[mask.bool()], expected[mask.bool()], atol=ATOL, rtol=0)


def test_a_student_that_cannot_hold_the_teachers_weights_is_named():
    teacher = Bert(TINY_TEACHER)
    with pytest.raises(ValueError, match="d_model 64 vs 32; n_heads 8 vs 4"):
        init_from_teacher(DistilBert(dataclasses.replace(TINY, d_model=64, n_heads=8)), teacher)
    with pytest.raises(ValueError, match="max_len 48 vs 24"):
        init_from_teacher(DistilBert(dataclasses.replace(TINY, max_len=48)), teacher)
    with pytest.raises(ValueError, match="a student of 3 layers takes every other layer of a teacher of at least 5"):
        init_from_teacher(DistilBert(dataclasses.replace(TINY, n_layers=3)), teacher)
    with pytest.raises(ValueError, match="must name 2 distinct teacher layers"):
        init_from_teacher(DistilBert(TINY), teacher, layers=[0, 4])
    with pytest.raises(ValueError, match="BERT's positions"):
        student_from_teacher(Bert(dataclasses.replace(RobertaConfig(), **_sizes(TINY_TEACHER))))


def _sizes(config: BertConfig) -> dict:
    return {k: getattr(config, k) for k in ("vocab_size", "max_len", "n_layers", "n_heads", "d_model", "d_ff")}
