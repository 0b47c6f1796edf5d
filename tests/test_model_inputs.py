"""Every model's token inputs go through one check (minilm.nn.check_token_ids): an id outside the vocabulary, a 1-D
input_ids or a mismatched attention_mask is one ValueError naming the problem, never an IndexError or a broadcast
error from inside a layer."""

import pytest
import torch

from minilm.models.bert import Bert, BertConfig, RobertaConfig
from minilm.models.elmo import ELMo, ELMoConfig
from minilm.models.gpt import GPT, GPTConfig
from minilm.models.transformer import Transformer, TransformerConfig
from minilm.nn import check_token_ids

V = 50
SMALL = dict(vocab_size=V, max_len=16, n_layers=1, n_heads=2, d_model=16)
MODELS = {
    "gpt": lambda: GPT(GPTConfig(**SMALL, dropout=0.0)),
    "bert": lambda: Bert(BertConfig(**SMALL, d_ff=32)),
    "roberta": lambda: Bert(RobertaConfig(**SMALL, d_ff=32)),
    "elmo": lambda: ELMo(ELMoConfig(vocab_size=V, filters=((1, 4), (2, 4)), hidden_size=8, projection_dim=8)),
}


def call(name, model, input_ids, attention_mask=None):
    """Each model's plain forward (the LM head's logits where it has one)."""
    if name == "elmo":
        return model(input_ids, attention_mask)
    return model(input_ids, attention_mask=attention_mask)


@pytest.fixture(scope="module", params=list(MODELS))
def named_model(request):
    torch.manual_seed(0)
    return request.param, MODELS[request.param]().eval()


def test_good_inputs_pass(named_model):
    name, model = named_model
    ids = torch.randint(4, V, (2, 5))
    call(name, model, ids, torch.ones(2, 5, dtype=torch.long))
    model.features(ids, torch.ones(2, 5, dtype=torch.long))


@pytest.mark.parametrize("bad, where", [(V, (1, 3)), (V + 7, (0, 0)), (-1, (1, 4))])
def test_an_id_outside_the_vocabulary_is_named_with_its_position(named_model, bad, where):
    name, model = named_model
    ids = torch.randint(4, V, (2, 5))
    ids[where] = bad
    message = rf"token id {bad} at input_ids\[{where[0]}, {where[1]}\] is outside the model's vocabulary of {V} "
    for forward in (lambda: call(name, model, ids), lambda: model.features(ids)):
        with pytest.raises(ValueError, match=message + r"\(ids 0..49\): was the input encoded with this model's"):
            forward()


def test_one_dimensional_input_ids_ask_for_the_batch_dimension(named_model):
    name, model = named_model
    with pytest.raises(ValueError, match=r"input_ids must be \(B, T\) token ids, got shape \(5,\): add the batch "):
        call(name, model, torch.arange(5))


def test_float_input_ids_are_refused(named_model):
    name, model = named_model
    with pytest.raises(ValueError, match="input_ids must be integer token ids, got torch.float32"):
        call(name, model, torch.ones(2, 5))


@pytest.mark.parametrize("shape", [(2, 4), (5,), (1, 5), (2, 5, 1)])
def test_an_attention_mask_of_another_shape_is_one_value_error(named_model, shape):
    name, model = named_model
    message = rf"attention_mask \({', '.join(map(str, shape))},?\) must have the shape of input_ids: \(2, 5\)"
    with pytest.raises(ValueError, match=message):
        call(name, model, torch.randint(4, V, (2, 5)), torch.ones(shape, dtype=torch.long))


def test_gpt_generate_names_a_bad_prompt_id_and_decodes_as_before():
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SMALL, dropout=0.0)).eval()
    prompt = torch.tensor([[3, 7, 60]])
    with pytest.raises(ValueError, match=r"token id 60 at input_ids\[0, 2\] is outside the model's vocabulary of 50"):
        model.generate(prompt, max_new_tokens=3, do_sample=False)
    good = torch.tensor([[3, 7, 9]])
    out = model.generate(good, max_new_tokens=5, do_sample=False)
    full = good
    for _ in range(5):  # the same greedy tokens without a cache: the check changes nothing it lets through
        full = torch.cat([full, model(full)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, full)


def test_a_cached_step_checks_the_mask_against_cached_plus_new_positions():
    model = GPT(GPTConfig(**SMALL, dropout=0.0)).eval()
    cache = model.new_cache()
    model(torch.tensor([[1, 2, 3]]), cache=cache)
    model(torch.tensor([[4]]), attention_mask=torch.ones(1, 4), cache=cache)  # 3 cached + 1 new
    with pytest.raises(ValueError, match=r"attention_mask \(1, 1\) .* \(1, 5\) \(4 cached \+ 1 new positions\)"):
        model(torch.tensor([[5]]), attention_mask=torch.ones(1, 1), cache=cache)


def test_the_transformer_checks_source_and_target():
    model = Transformer(
        TransformerConfig(
            vocab_size=V, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=16
        )
    ).eval()
    src, tgt = torch.randint(1, V, (2, 6)), torch.randint(1, V, (2, 4))
    assert model(src, tgt).shape == (2, 4, V)
    src[1, 2] = V
    with pytest.raises(ValueError, match=r"token id 50 at src\[1, 2\] is outside the model's vocabulary of 50"):
        model(src, tgt)
    with pytest.raises(ValueError, match=r"token id -3 at src\[1, 2\]"):
        model.generate(src.masked_fill(src == V, -3), bos_id=1, eos_id=2, max_new_tokens=3)
    tgt[0, 0] = V + 1
    with pytest.raises(ValueError, match=r"token id 51 at tgt\[0, 0\]"):
        model(torch.randint(1, V, (2, 6)), tgt)
    with pytest.raises(ValueError, match=r"src must be \(B, T\) token ids, got shape \(6,\)"):
        model(torch.randint(1, V, (6,)), tgt)


def test_the_check_itself():
    check_token_ids(torch.zeros(0, 0, dtype=torch.long), V)  # an empty batch has no bad id
    check_token_ids(torch.full((1, 1), V), V, past=3)  # a cached step's ids are the model's own samples
    with pytest.raises(ValueError, match=r"token id 9 at ids\[0, 1\] is outside the model's vocabulary of 9"):
        check_token_ids(torch.tensor([[0, 9, 10]]), 9, name="ids")
    with pytest.raises(ValueError, match="must be integer token ids, got torch.bool"):
        check_token_ids(torch.ones(1, 2, dtype=torch.bool), V)


def test_elmo_read_from_characters_checks_their_shape_and_the_mask():
    torch.manual_seed(0)
    model = MODELS["elmo"]().eval()
    char_ids = torch.randint(1, 200, (2, 5, model.config.max_chars))
    assert model.features(char_ids=char_ids, attention_mask=torch.ones(2, 5)).last_hidden_state.shape == (2, 5, 16)
    with pytest.raises(ValueError, match=r"char_ids must be \(B, T, max_chars\), got shape \(5, 50\)"):
        model.features(char_ids=char_ids[0])
    with pytest.raises(ValueError, match=r"attention_mask \(2, 4\) must be \(B, T\) = \(2, 5\), the first two"):
        model.features(char_ids=char_ids, attention_mask=torch.ones(2, 4))
