"""ELMo: LSTMs against torch.nn.LSTM, padding, the character CNN and highway equations, what each direction may see,
the residual connection, shared softmax, the biLM loss, ScalarMix, and parameter counts against allennlp's table."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from minilm.models.elmo import ELMO_PRESETS, ELMo, ELMoConfig, spell_ids
from minilm.nn import (
    CharCNN,
    Highway,
    LSTMLayer,
    ScalarMix,
    batch_to_char_ids,
    reverse_padded,
    word_to_char_ids,
)
from minilm.objectives.bilm import bilm_loss, bilm_loss_from_states
from minilm.objectives.causal_lm import language_model_blocks
from minilm.utils import count_parameters

V, D = 20, 6  # vocabulary and projection width of the small model
SMALL = ELMoConfig(
    vocab_size=V,
    max_chars=8,
    char_embed_dim=4,
    filters=((1, 4), (2, 4), (3, 8)),
    n_highway=1,
    projection_dim=D,
    hidden_size=10,
    dropout=0.0,
)


def small_model() -> ELMo:
    return ELMo(SMALL).eval()


# ---------------------------------------------------------------------------------------------- the LSTM


@pytest.mark.parametrize("proj_size", [0, 3])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("initial_state", [False, True])
def test_written_out_lstm_equals_torch_lstm(proj_size, padded, initial_state):
    layer = LSTMLayer(5, 7, proj_size=proj_size, reference=True)
    torch_lstm = torch.nn.LSTM(5, 7, proj_size=proj_size, batch_first=True)
    torch_lstm.load_state_dict(layer.lstm.state_dict())  # copied weights: (4·7, ·) rows in the gate order i, f, g, o
    x = torch.randn(3, 6, 5)
    out_size = proj_size or 7
    state = (torch.randn(3, out_size), torch.randn(3, 7)) if initial_state else None
    lengths = torch.tensor([6, 2, 4]) if padded else None

    ours, (h, c) = layer(x, lengths=lengths, state=state)
    hx = (state[0][None], state[1][None]) if initial_state else None
    if padded:
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        theirs, (h_t, c_t) = torch_lstm(packed, hx)
        theirs, _ = torch.nn.utils.rnn.pad_packed_sequence(theirs, batch_first=True, total_length=6)
    else:
        theirs, (h_t, c_t) = torch_lstm(x, hx)
    assert ours.shape == (3, 6, out_size) and c.shape == (3, 7)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(h, h_t[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(c, c_t[0], atol=1e-6, rtol=1e-5)

    layer.reference = False  # the fast path on the same weights
    fast, (h_f, c_f) = layer(x, lengths=lengths, state=state)
    torch.testing.assert_close(fast, ours, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close((h_f, c_f), (h, c), atol=1e-6, rtol=1e-5)


def test_written_out_lstm_gradients_equal_torch_lstm():
    layer = LSTMLayer(4, 6, proj_size=2)
    x = torch.randn(2, 5, 4)
    grads = []
    for reference in (False, True):
        layer.reference = reference
        layer.zero_grad()
        out, (h, c) = layer(x)
        (out.square().sum() + c.sum()).backward()
        grads.append([p.grad.clone() for p in layer.parameters()])
    for fast, slow in zip(*grads, strict=True):
        torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-4)


def test_lstm_step_follows_the_gate_equations():
    """One step by hand: i, f, g, o from the stacked rows; c = f c0 + i g; h = W_hr (o tanh c)."""
    layer = LSTMLayer(3, 4, proj_size=2)
    p = layer.lstm
    x, h0, c0 = torch.randn(1, 1, 3), torch.randn(1, 2), torch.randn(1, 4)
    z = p.weight_ih_l0 @ x[0, 0] + p.bias_ih_l0 + p.weight_hh_l0 @ h0[0] + p.bias_hh_l0
    i, f, g, o = torch.sigmoid(z[0:4]), torch.sigmoid(z[4:8]), torch.tanh(z[8:12]), torch.sigmoid(z[12:16])
    c = f * c0[0] + i * g
    h = p.weight_hr_l0 @ (o * torch.tanh(c))
    out, (h_n, c_n) = layer(x, state=(h0, c0))
    torch.testing.assert_close(out[0, 0], h)
    torch.testing.assert_close(c_n[0], c)
    assert torch.equal(h_n, out[:, -1])


def test_reverse_padded_reverses_only_the_real_tokens():
    x = torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5], [7, 0, 0, 0, 0]])
    lengths = torch.tensor([3, 5, 1])
    expected = torch.tensor([[3, 2, 1, 0, 0], [5, 4, 3, 2, 1], [7, 0, 0, 0, 0]])
    assert torch.equal(reverse_padded(x, lengths), expected)
    assert torch.equal(reverse_padded(x), x.flip(1))
    features = torch.randn(3, 5, 4)  # trailing feature dimensions move with their position
    assert torch.equal(reverse_padded(features, lengths)[0, :3], features[0, :3].flip(0))
    assert torch.equal(reverse_padded(reverse_padded(features, lengths), lengths), features)


# ---------------------------------------------------------------------------------------------- characters


def test_word_to_char_ids_markers_truncation_and_padding():
    bow, eow, pad = 259, 260, 261  # ELMo's 258, 259, 260 shifted by one
    assert word_to_char_ids("abc", max_chars=8) == [bow, 98, 99, 100, eow, pad, pad, pad]
    assert word_to_char_ids("é", max_chars=5) == [bow, 0xC3 + 1, 0xA9 + 1, eow, pad]  # UTF-8 bytes
    long = word_to_char_ids("x" * 60)  # cut to 48 bytes + 2 markers
    assert len(long) == 50 and long[0] == bow and long[-1] == eow and long[1:-1] == [ord("x") + 1] * 48
    assert word_to_char_ids("<S>", max_chars=4) == [bow, 257, eow, pad]  # sentence markers: 256, 257 + 1
    assert word_to_char_ids("</S>", max_chars=4) == [bow, 258, eow, pad]
    with pytest.raises(ValueError, match="max_chars"):
        word_to_char_ids("a", max_chars=2)


def test_batch_to_char_ids_pads_missing_words_with_zeros():
    ids = batch_to_char_ids([["a", "bb"], ["c"]], max_chars=6)
    assert ids.shape == (2, 2, 6) and ids.dtype == torch.long
    assert ids[1, 0].tolist() == word_to_char_ids("c", 6)
    assert ids[1, 1].tolist() == [0] * 6  # no word: all zeros (the embedding's padding row)


def test_highway_follows_its_equation():
    highway = Highway(5, n_layers=2)
    assert torch.all(highway.gate[0].bias == -2.0)  # starts mostly carrying its input
    x = torch.randn(3, 5)
    y = x
    for transform, gate in zip(highway.transform, highway.gate, strict=True):
        t = torch.sigmoid(y @ gate.weight.T + gate.bias)  # t = σ(W_T x + b_T)
        y = t * torch.relu(y @ transform.weight.T + transform.bias) + (1 - t) * y  # t g(W_H x) + (1 − t) x
    torch.testing.assert_close(highway(x), y)


def test_char_cnn_pools_each_filter_over_the_word():
    cnn = CharCNN(output_dim=3, filters=((1, 2), (3, 4)), n_highway=1, char_dim=4)
    chars = batch_to_char_ids([["ab", "abcd"]], max_chars=7)  # (1, 2, 7)
    e = cnn.char_embedding.weight[chars[0]].transpose(1, 2)  # (2, 4, 7)
    pooled = [F.conv1d(e, conv.weight, conv.bias).max(dim=-1).values for conv in cnn.convs]  # max over positions
    expected = cnn.projection(cnn.highway(torch.relu(torch.cat(pooled, dim=-1))))
    out = cnn(chars)
    assert out.shape == (1, 2, 3)
    torch.testing.assert_close(out[0], expected)
    assert torch.all(cnn.char_embedding.weight[0] == 0)  # missing words embed to zeros


# ---------------------------------------------------------------------------------------------- the biLM


def test_no_direction_sees_the_token_it_predicts():
    model = small_model()
    ids = torch.randint(0, V, (1, 9))
    forward_logits, backward_logits = model(ids)
    states = model.features(ids).hidden_states
    for t in range(9):
        changed = ids.clone()
        changed[0, t] = (changed[0, t] + 1) % V
        forward_changed, backward_changed = model(changed)
        # the logits that predict token t: the forward LM's at t − 1, the backward LM's at t + 1
        if t > 0:
            torch.testing.assert_close(forward_changed[:, t - 1], forward_logits[:, t - 1])
        if t < 8:
            torch.testing.assert_close(backward_changed[:, t + 1], backward_logits[:, t + 1])
        for j, (h, h_changed) in enumerate(zip(states[1:], model.features(changed).hidden_states[1:], strict=True)):
            fwd, bwd, fwd_changed, bwd_changed = h[..., :D], h[..., D:], h_changed[..., :D], h_changed[..., D:]
            assert torch.equal(fwd[:, :t], fwd_changed[:, :t]), f"layer {j + 1}: forward states before {t} moved"
            assert torch.equal(bwd[:, t + 1 :], bwd_changed[:, t + 1 :]), f"layer {j + 1}: backward after {t} moved"
            assert not torch.allclose(fwd[:, t], fwd_changed[:, t]) and not torch.allclose(bwd[:, t], bwd_changed[:, t])
        assert not torch.allclose(forward_changed[:, t], forward_logits[:, t])  # the state at t does read token t
        assert not torch.allclose(backward_changed[:, t], backward_logits[:, t])


def test_features_are_three_layers_of_both_directions():
    model = small_model()
    ids = torch.randint(0, V, (2, 7))
    out = model.features(ids)
    assert len(out.hidden_states) == 3 and all(h.shape == (2, 7, 2 * D) for h in out.hidden_states)
    x = model.embed(ids)
    torch.testing.assert_close(out.hidden_states[0], torch.cat([x, x], dim=-1))  # layer 0: [x_k; x_k]
    assert out.last_hidden_state is out.hidden_states[-1]
    torch.testing.assert_close(model.features(char_ids=model.char_table[ids]).last_hidden_state, out.last_hidden_state)


def test_second_layer_adds_its_input_the_residual_connection():
    model = small_model()
    ids = torch.randint(0, V, (2, 7))
    x, (h1, h2) = model.embed(ids), model.features(ids).hidden_states[1:]
    torch.testing.assert_close(h1[..., :D], model.forward_lm[0](x)[0])  # first layer: no residual
    torch.testing.assert_close(h2[..., :D], h1[..., :D] + model.forward_lm[1](h1[..., :D])[0])
    backward = model.backward_lm[1](h1[..., D:].flip(1))[0].flip(1)  # right to left
    torch.testing.assert_close(h2[..., D:], h1[..., D:] + backward)


def test_directions_share_token_encoder_and_softmax_but_not_lstms():
    model = small_model()
    ids = torch.randint(0, V, (2, 7))
    forward_logits, backward_logits = model(ids)
    top = model.features(ids).last_hidden_state
    torch.testing.assert_close(forward_logits, model.softmax(top[..., :D]))
    torch.testing.assert_close(backward_logits, model.softmax(top[..., D:]))
    heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == V]
    assert heads == [model.softmax]
    forward_params = {id(p) for p in model.forward_lm.parameters()}
    assert forward_params.isdisjoint(id(p) for p in model.backward_lm.parameters())


def test_right_padding_leaves_the_real_tokens_alone():
    model = small_model()
    ids = torch.randint(1, V, (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    padded = model.features(ids, attention_mask=mask).hidden_states
    alone = model.features(ids[:1, :4]).hidden_states
    for h_padded, h_alone in zip(padded, alone, strict=True):
        torch.testing.assert_close(h_padded[:1, :4], h_alone, atol=1e-6, rtol=1e-5)  # backward LM too
        assert torch.all(h_padded[0, 4:] == 0)
    torch.testing.assert_close(padded[-1][1:], model.features(ids[1:]).last_hidden_state, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="right-padded"):
        model.features(ids, attention_mask=torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]))


def test_set_vocabulary_spells_the_tokens():
    model = small_model()
    assert model.char_table[42 % V].tolist() == spell_ids(V, SMALL.max_chars)[42 % V].tolist()
    tokens = ["the", "Ġcat", "the", *[f"w{i}" for i in range(V - 3)]]  # ids 0 and 2 share one spelling
    model.set_vocabulary(tokens)
    assert model.char_table[1].tolist() == word_to_char_ids("Ġcat", SMALL.max_chars)
    assert "char_table" in model.state_dict()  # saved with the weights
    x = model.embed(torch.tensor([[0, 1, 2]]))
    torch.testing.assert_close(x[0, 0], x[0, 2])  # the token representation depends on the spelling alone
    with pytest.raises(ValueError, match="vocab_size"):
        model.set_vocabulary(tokens + ["one too many"])


def test_config_accepts_filters_from_the_command_line_and_json():
    assert ELMoConfig(filters="1:32,2:64").filters == ((1, 32), (2, 64))
    assert ELMoConfig(filters=[[1, 32], [2, 64]]).filters == ((1, 32), (2, 64))
    with pytest.raises(ValueError, match="projection_dim"):
        ELMoConfig(projection_dim=64, hidden_size=32)


# ---------------------------------------------------------------------------------------------- the objective


def test_bilm_loss_scores_next_token_forward_and_previous_token_backward():
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    forward_logits, backward_logits = torch.randn(1, 5, 8), torch.randn(1, 5, 8)
    out = bilm_loss(forward_logits, backward_logits, ids)
    log_f, log_b = forward_logits.log_softmax(-1)[0], backward_logits.log_softmax(-1)[0]
    forward = -sum(log_f[k, ids[0, k + 1]] for k in range(4)) / 4  # −log p(t_{k+1} | t_≤k)
    backward = -sum(log_b[k, ids[0, k - 1]] for k in range(1, 5)) / 4  # −log p(t_{k−1} | t_≥k)
    torch.testing.assert_close(out.forward, forward)
    torch.testing.assert_close(out.backward, backward)
    torch.testing.assert_close(out.loss, forward + backward)
    torch.testing.assert_close(out.mean, (forward + backward) / 2)
    sure = 50 * F.one_hot(torch.tensor([[1, 4, 1, 5, 0]]), 8).float()  # position k: token k + 1
    sure_back = 50 * F.one_hot(torch.tensor([[0, 3, 1, 4, 1]]), 8).float()  # position k: token k − 1
    assert bilm_loss(sure, sure_back, ids).loss < 1e-6
    assert bilm_loss(sure_back, sure, ids).loss > 10


def test_bilm_loss_scores_a_padded_row_as_the_row_unpadded():
    """No prediction is made from a padding position: the backward logits at the first one (which have read no token)
    do not score the row's last token, so each direction scores n - 1 predictions of a row of n tokens."""
    g = torch.Generator().manual_seed(0)
    forward_logits, backward_logits = torch.randn(2, 1, 7, 8, generator=g).unbind(0)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2]])
    padded = ids.masked_fill(torch.arange(7) >= 4, -100)  # 4 real tokens
    out = bilm_loss(forward_logits, backward_logits, padded)
    alone = bilm_loss(forward_logits[:, :4], backward_logits[:, :4], ids[:, :4])
    torch.testing.assert_close(out.forward, alone.forward)
    torch.testing.assert_close(out.backward, alone.backward)
    softmax = torch.nn.Linear(8, 8)
    states = bilm_loss_from_states(forward_logits, backward_logits, softmax, padded)
    want = bilm_loss(softmax(forward_logits), softmax(backward_logits), padded)
    torch.testing.assert_close(states.loss, want.loss)


def test_bilm_loss_falls_on_a_repetitive_corpus():
    torch.manual_seed(0)
    model = ELMo(dataclasses.replace(SMALL, hidden_size=32, projection_dim=16)).train()
    stream = torch.tensor([0, 5, 3, 9, 12, 3, 7, 1] * 40)
    blocks = language_model_blocks(stream, seq_len=16)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    losses = []
    for step in range(50):
        batch = blocks[(step * 4) % (len(blocks) - 4) :][:4]
        out = bilm_loss(*model(batch), batch)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        losses.append(out.loss.item())
    assert losses[-1] < 0.1 * losses[0], losses[::10]
    assert out.forward < 0.3 and out.backward < 0.3  # both directions learned the cycle


def test_scalar_mix_is_gamma_times_a_softmax_weighted_sum():
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.5)
    layers = [torch.randn(2, 4, 6) for _ in range(3)]
    s = torch.exp(mix.weights) / torch.exp(mix.weights).sum()
    torch.testing.assert_close(s.sum(), torch.tensor(1.0))
    torch.testing.assert_close(mix(layers), 1.5 * (s[0] * layers[0] + s[1] * layers[1] + s[2] * layers[2]))
    mix(layers).sum().backward()
    assert mix.weights.grad.abs().sum() > 0 and mix.gamma.grad.abs() > 0

    normed = ScalarMix(3, layer_norm=True)
    standardise = [
        (h - h.mean(-1, keepdim=True)) / (h.var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt() for h in layers
    ]
    torch.testing.assert_close(normed(layers), sum(standardise) / 3, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="3 layers"):
        mix(layers[:2])


def test_scalar_mix_over_elmo_features():
    model = small_model()
    out = model.features(torch.randint(0, V, (2, 5)))
    assert ScalarMix(3)(out.hidden_states).shape == (2, 5, 2 * D)


# ---------------------------------------------------------------------------------------------- sizes


def parameters_by_formula(c: ELMoConfig, lstm_biases: int = 2) -> int:
    """The biLM without its softmax; ``lstm_biases``: 2 in torch.nn.LSTM (b_ih, b_hh), 1 in ELMo's own LSTM."""
    E, width = c.char_embed_dim, sum(n for _, n in c.filters)
    d, H = c.projection_dim, c.hidden_size
    token_encoder = (
        c.n_chars * E  # character embedding
        + sum(w * E * n + n for w, n in c.filters)  # convolutions
        + c.n_highway * 2 * (width * width + width)  # highway: W_H, b_H, W_T, b_T
        + width * d
        + d  # projection to d
    )
    proj = d if d < H else 0
    lstm = 4 * H * d + 4 * H * (proj or H) + lstm_biases * 4 * H + H * proj  # W_ih, W_hh, biases, W_hr
    return token_encoder + 2 * c.n_layers * lstm  # two directions


# allennlp's pretrained ELMo models (allennlp.org/elmo): parameters in millions, without the softmax
ALLENNLP_MILLIONS = [("elmo-small", 13.6), ("elmo-medium", 28.0), ("elmo-original", 93.6)]


@pytest.mark.parametrize("size, millions", ALLENNLP_MILLIONS)
def test_parameter_counts_match_the_formula_and_allennlp(size, millions):
    config = ELMoConfig(vocab_size=793471, **ELMO_PRESETS[size])  # the 1B Word Benchmark vocabulary
    with torch.device("meta"):
        model = ELMo(config)
    ours = count_parameters(model) - count_parameters(model.softmax)
    print(f"{size}: {ours:,} parameters without the softmax ({count_parameters(model.softmax):,} in it)")
    assert ours == parameters_by_formula(config)
    assert round(parameters_by_formula(config, lstm_biases=1) / 1e6, 1) == millions  # ELMo's LSTMs: one bias


def test_registered_in_minilm_train():
    from minilm.objectives.causal_lm import language_model_blocks
    from minilm.train.registry import get_model, get_objective

    entry, objective = get_model("elmo"), get_objective("bilm", "elmo")
    model = entry.build(dataclasses.replace(SMALL, **entry.sizes["tiny"]))
    assert entry.attach_tokenizer is not None  # ELMo is given its vocabulary's spelling
    out = objective.loss(model, language_model_blocks(torch.randint(0, V, (200,)), 16)[:2])
    assert out.loss.ndim == 0 and out.n_tokens == 2 * 16
