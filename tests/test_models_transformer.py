"""The Transformer of Chapter 0: parameter counts from the papers, tied embeddings, cached decoding, learning."""

import pytest
import torch
import torch.nn.functional as F

import minilm.nn as mnn
from minilm.data.toy import BOS, EOS, PAD, exact_match, sequence_task_batch
from minilm.models import TRANSFORMER_BASE, TRANSFORMER_BIG, Transformer, TransformerConfig
from minilm.utils import count_parameters

TINY = TransformerConfig(
    vocab_size=13, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=16
)


def test_transformer_base_and_big_parameter_counts():
    with torch.device("meta"):
        base, big = Transformer(TRANSFORMER_BASE), Transformer(TRANSFORMER_BIG)
    d, ff, v = 512, 2048, 37000
    encoder_layer = 4 * (d * d + d) + (d * ff + ff) + (ff * d + d) + 2 * 2 * d
    decoder_layer = encoder_layer + 4 * (d * d + d) + 2 * d
    assert count_parameters(base) == 6 * encoder_layer + 6 * decoder_layer + v * d == 63_082_496  # paper: 65M
    assert 205e6 < count_parameters(big) < 215e6  # paper: 213M


def test_bert_sized_stacks_match_transformers_bert_model():
    transformers = pytest.importorskip("transformers")

    def bert_from_blocks(d_model, n_layers, n_heads):  # as in Chapter 0, section 8
        block = mnn.BlockConfig(d_model=d_model, n_heads=n_heads, d_ff=4 * d_model, activation="gelu")
        return torch.nn.ModuleDict(
            {
                "embeddings": mnn.TransformerEmbedding(30522, d_model, 512, n_segments=2, norm=True),
                "encoder": mnn.TransformerEncoder(block, n_layers),
                "pooler": torch.nn.Linear(d_model, d_model),
            }
        )

    for d_model, n_layers, n_heads, paper in [(768, 12, 12, 110e6), (1024, 24, 16, 340e6)]:
        config = transformers.BertConfig(
            hidden_size=d_model, num_hidden_layers=n_layers, num_attention_heads=n_heads, intermediate_size=4 * d_model
        )
        with torch.device("meta"):
            ours = count_parameters(bert_from_blocks(d_model, n_layers, n_heads))
            theirs = count_parameters(transformers.BertModel(config))
        assert ours == theirs
        assert abs(ours - paper) / paper < 0.02


def test_embeddings_are_shared_by_encoder_decoder_and_output():
    model = Transformer(TINY)
    assert model.lm_head.weight is model.embedding.token.weight
    # Initialised so that sqrt(d) * embedding has unit scale, like the positional encodings added to it.
    assert abs((model.embedding.token.weight * TINY.d_model**0.5).std().item() - 1.0) < 0.15


def test_padding_in_the_source_changes_nothing():
    model = Transformer(TINY).eval()
    src, tgt = sequence_task_batch(4, generator=torch.Generator().manual_seed(0))
    longer = F.pad(src, (0, 5), value=PAD)
    assert torch.allclose(model(src, tgt[:, :-1]), model(longer, tgt[:, :-1]), atol=1e-5)


def test_cached_greedy_decoding_equals_recomputing_everything():
    model = Transformer(TINY).eval()
    src, _ = sequence_task_batch(3, generator=torch.Generator().manual_seed(1))
    generated = model.generate(src, BOS, EOS, max_new_tokens=8)
    # Without a cache: run the decoder on the whole prefix each step and take the last position.
    tokens = torch.full((3, 1), BOS)
    for _ in range(generated.size(1)):
        tokens = torch.cat([tokens, model(src, tokens)[:, -1:].argmax(-1)], dim=1)
    for row, out in zip(tokens[:, 1:], generated, strict=True):
        eos = (out == EOS).nonzero()
        n = int(eos[0]) + 1 if len(eos) else len(out)
        assert torch.equal(out[:n], row[:n])
        assert (out[n:] == PAD).all()


def test_a_tiny_transformer_learns_to_copy():
    torch.manual_seed(0)
    model = Transformer(TINY)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(150):
        src, tgt = sequence_task_batch(32, task="copy", max_len=6, generator=data)
        loss = F.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
    src, tgt = sequence_task_batch(200, task="copy", max_len=6, generator=torch.Generator().manual_seed(9))
    assert exact_match(model.eval().generate(src, BOS, EOS, 8), tgt).float().mean() > 0.5


def test_toy_tasks():
    src, tgt = sequence_task_batch(5, task="reverse", generator=torch.Generator().manual_seed(3))
    for s, t in zip(src, tgt, strict=True):
        n = int((s != PAD).sum())
        assert t[0] == BOS and t[n + 1] == EOS
        assert torch.equal(t[1 : n + 1], s[:n].flip(0))
    assert exact_match(tgt[:, 1:], tgt).all() and not exact_match(tgt[:, 2:], tgt).any()
    with pytest.raises(ValueError, match="unknown task"):
        sequence_task_batch(2, task="sort")
