"""Dynamic int8 quantization and the compression measures (minilm.analysis.compression)."""

import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as QuantizedLinear

from minilm.analysis.compression import (
    QPARAM_BYTES,
    SURVEY_ROWS,
    CompressionRow,
    compression_row,
    linear_weight_bytes,
    model_size_bytes,
    quantize_dynamic,
    time_inference,
)
from minilm.models.bert import Bert, BertConfig

TINY = dict(vocab_size=100, n_layers=2, n_heads=4, d_model=64, d_ff=128, max_len=16, dropout=0.0, attention_dropout=0.0)


@pytest.fixture
def tiny():
    return Bert(BertConfig(**TINY)).eval()


def test_every_linear_but_the_tied_decoder_is_quantized_and_the_original_is_untouched(tiny):
    tiny.train()  # the copy is put in eval mode; the original keeps its mode
    before = {name: t.clone() for name, t in tiny.state_dict().items()}
    q = quantize_dynamic(tiny)
    linears = [name for name, m in tiny.named_modules() if type(m) is nn.Linear]
    assert len(linears) == 2 * 6 + 4  # q k v out fc1 fc2 per layer; pooler, MLM transform and decoder, NSP
    modules = dict(q.named_modules())
    assert [n for n in linears if type(modules[n]) is nn.Linear] == ["mlm_head.decoder"]  # tied: stays float
    assert all(isinstance(modules[n], QuantizedLinear) for n in linears if n != "mlm_head.decoder")
    assert q.mlm_head.decoder.weight is q.embedding.token.weight  # still tied in the copy
    assert q.embedding.token.weight.dtype == torch.float32 and not q.training
    assert tiny.training and all(type(m) is nn.Linear for n, m in tiny.named_modules() if n in linears)
    assert tiny.mlm_head.decoder.weight is tiny.embedding.token.weight
    after = tiny.state_dict()
    assert all(torch.equal(before[name], after[name]) and after[name].dtype == torch.float32 for name in before)


def test_quantized_tiny_bert_agrees_with_the_float_model(tiny):
    ids = torch.randint(1, 100, (4, 16))
    q = quantize_dynamic(tiny)
    with torch.no_grad():
        h, hq = tiny.features(ids).last_hidden_state, q.features(ids).last_hidden_state
        logits, logits_q = tiny.mlm_logits(h), q.mlm_logits(hq)
    # measured 5e-4 to 6e-4 over five seeds: int8 noise on sublayers that add little to the residual at init
    assert (hq - h).norm() / h.norm() < 5e-3
    # measured 95-100 % of the 64 positions over five seeds (untrained logits have near ties)
    assert (logits.argmax(-1) == logits_q.argmax(-1)).float().mean() >= 0.9


def _expected_bytes(c: BertConfig, per_channel: bool) -> tuple[int, int]:
    """(float bytes, int8 bytes) of a BERT with pooler, MLM and NSP heads, by hand."""
    d, f, V = c.d_model, c.d_ff, c.vocab_size
    linears = [(d, d)] * 4 * c.n_layers + [(f, d), (d, f)] * c.n_layers + [(d, d), (d, d), (2, d)]  # (out, in)
    float_rest = (V + c.max_len + c.n_segments) * d + 2 * d + 2 * c.n_layers * 2 * d + 2 * d + V  # embeddings,
    # LayerNorms (embedding, two per layer, MLM head), MLM decoder bias; the decoder weight is the token embedding
    float_linears = sum(o * i + o for o, i in linears)
    # int8 weight, float32 bias, QPARAM_BYTES per scale (per row or per matrix), unused output scale + zero point
    int8_linears = sum(o * i + 4 * o + QPARAM_BYTES * (o if per_channel else 1) + 4 + 8 for o, i in linears)
    return 4 * (float_rest + float_linears), 4 * float_rest + int8_linears


@pytest.mark.parametrize("per_channel", [True, False])
def test_model_size_counts_int8_weights_their_scales_and_a_tied_weight_once(tiny, per_channel):
    q = quantize_dynamic(tiny, per_channel=per_channel)
    float_bytes, int8_bytes = _expected_bytes(tiny.config, per_channel)
    assert model_size_bytes(tiny) == float_bytes == 4 * sum(p.numel() for p in tiny.parameters()) == 333_208
    assert model_size_bytes(q) == int8_bytes == (128_236 if per_channel else 112_060)
    # the Linear weights alone (tied decoder once, float in both): 4 bytes -> 1 byte + the scales
    d, f, V = 64, 128, 100
    n_weights = 2 * (4 * d * d + 2 * d * f) + 2 * d * d + 2 * d
    rows = 2 * (4 * d + f + d) + 2 * d + 2
    scales = QPARAM_BYTES * (rows if per_channel else 15)
    assert linear_weight_bytes(tiny) == 4 * (n_weights + V * d)
    assert linear_weight_bytes(q) == n_weights + scales + 4 * V * d


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")  # inside torch.load of quantized tensors
def test_the_quantized_state_dict_serializes_and_loads(tiny):
    q = quantize_dynamic(tiny)
    buffer = io.BytesIO()
    torch.save(q.state_dict(), buffer)
    n_entries = len(q.state_dict())
    assert model_size_bytes(q) < len(buffer.getvalue()) < model_size_bytes(q) + 1024 * n_entries  # + container
    other = quantize_dynamic(Bert(BertConfig(**TINY)).eval())  # other random weights, same structure
    buffer.seek(0)
    other.load_state_dict(torch.load(buffer, weights_only=True))
    ids = torch.randint(1, 100, (2, 16))
    with torch.no_grad():
        assert torch.equal(other.features(ids).last_hidden_state, q.features(ids).last_hidden_state)


def test_skip_keeps_named_linears_float_and_bad_input_is_a_clear_error(tiny):
    q = quantize_dynamic(tiny, skip=["encoder.layers.1.ffn.fc2", "nsp_head"])
    assert type(q.encoder.layers[1].ffn.fc2) is nn.Linear and type(q.nsp_head) is nn.Linear
    assert isinstance(q.encoder.layers[0].ffn.fc2, QuantizedLinear)
    with pytest.raises(ValueError, match=r"skip names \['encoder.fc9'\] are not nn.Linear modules"):
        quantize_dynamic(tiny, skip=["encoder.fc9"])
    with pytest.raises(ValueError, match="runs on CPU"):
        quantize_dynamic(Bert(BertConfig(**TINY)).to("meta"))


# --- the real all-MiniLM-L6-v2 ----------------------------------------------------------------------------------

SENTENCES = [
    "The cat sat on the mat, and the dog slept by the door.",
    "A man is eating food.",
    "She said that it would rain tomorrow, but it did not.",
    "Quantization stores each weight in eight bits.",
    "The stock market fell sharply on Monday.",
]


@pytest.fixture(scope="module")
def minilm(all_minilm):
    return all_minilm  # tests/conftest.py: loaded once for the session


def _embed(model, batch):
    """Sentence-transformers' embedding: the mean of the real tokens' final states, unit length."""
    with torch.no_grad():
        hidden = model.features(batch.input_ids, batch.attention_mask).last_hidden_state
    m = batch.attention_mask[..., None].float()
    return F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)


def test_quantized_all_minilm_keeps_its_sentence_embeddings_and_shrinks(minilm):
    model, tokenizer = minilm
    q = quantize_dynamic(model)
    batch = tokenizer(SENTENCES, return_tensors="pt")
    cosines = (_embed(model, batch) * _embed(q, batch)).sum(-1)
    # measured 0.968-0.982 (mean 0.976) with the x86/fbgemm engine, whose int8 kernels quantize the activations
    # to 7 bits (reduce_range) to avoid int16 overflow on CPUs without VNNI; 0.993 and up with qnnpack (8 bits)
    assert cosines.min() > 0.95 and cosines.mean() > 0.97
    float_bytes, int8_bytes = model_size_bytes(model), model_size_bytes(q)
    assert float_bytes == 4 * 22_713_216  # every parameter once, fp32
    assert int8_bytes == 58_898_364  # the 30522 x 384 token embedding (47 MB) stays float
    assert 3.8 < linear_weight_bytes(model) / linear_weight_bytes(q) < 3.9  # 43.1 MB -> 11.1 MB
    for m, size in ((model, float_bytes), (q, int8_bytes)):
        buffer = io.BytesIO()
        torch.save(m.state_dict(), buffer)
        assert size < len(buffer.getvalue()) < 1.002 * size  # measured +0.04 % and +0.14 %


# --- the measures -------------------------------------------------------------------------------------------------


def test_compression_row_arithmetic():
    row = compression_row("int8", 400, 100, 80.0, 76.0, 2.0, 0.5, evaluation="STS-B")
    assert row == CompressionRow("int8", 4.0, 95.0, 4.0, evaluation="STS-B")
    assert compression_row("pruned", 3, 2, 0.5, 0.6).speedup is None
    assert compression_row("pruned", 3, 2, 0.5, 0.6).performance == pytest.approx(120.0)
    with pytest.raises(ValueError, match="size must be positive"):
        compression_row("x", 1, 0, 1.0, 1.0)
    with pytest.raises(ValueError, match="give both base_seconds and seconds"):
        compression_row("x", 1, 1, 1.0, 1.0, base_seconds=1.0)


def test_survey_rows_are_the_survey_numbers():
    rows = {row.paper: row for row in SURVEY_ROWS}
    # the survey's Table 1 as the course's source notes reproduce it (../shared/sources/, "BERT compression")
    assert (rows["Sanh et al. 2019"].compression, rows["Sanh et al. 2019"].performance) == (2.5, 90.0)
    assert rows["Sanh et al. 2019"].speedup == 1.6
    assert (rows["Jiao et al. 2019"].compression, rows["Jiao et al. 2019"].speedup) == (7.5, 9.4)
    assert (rows["Sun et al. 2020"].compression, rows["Sun et al. 2020"].performance) == (4.3, 100.0)
    assert rows["Sun et al. 2020"].speedup == 4.0 and rows["Jiao et al. 2019"].performance == 96.0
    assert (rows["Zafrir et al. 2019"].compression, rows["Zafrir et al. 2019"].performance) == (4.0, 99.0)
    assert rows["Zafrir et al. 2019"].speedup is None
    assert all(row.evaluation and row.method for row in SURVEY_ROWS)


def test_time_inference_runs_warmup_then_repeats_and_checks_its_arguments():
    calls = []
    seconds = time_inference(lambda: calls.append(torch.is_inference_mode_enabled()), repeats=3, warmup=2)
    assert calls == [True] * 5 and seconds >= 0.0
    with pytest.raises(ValueError, match="repeats >= 1"):
        time_inference(lambda: None, repeats=0)
