"""Run configs read back from JSON and TOML: nested dataclasses round-trip, wrong keys and types are clear errors."""

import json
from dataclasses import dataclass, field

import pytest

from minilm.models.bert import BertConfig
from minilm.models.elmo import ELMoConfig
from minilm.train.config import ConfigError, from_dict, to_dict, update
from minilm.train.trainer import TrainConfig


@dataclass
class Inner:
    n_layers: int = 2
    dropout: float = 0.1
    name: str | None = None


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)  # a config holding another
    optional: Inner | None = None  # an optional one
    stack: list[Inner] = field(default_factory=list)  # a list of them
    sizes: tuple[int, ...] = (1, 2)
    pair: tuple[int, str] = (0, "a")
    table: dict[str, float] = field(default_factory=dict)
    flag: bool = False


@dataclass
class Required:
    width: int

    def validate(self) -> None:
        if self.width < 1:
            raise ValueError(f"width must be positive, got {self.width}")


def round_trip(config):
    return from_dict(type(config), json.loads(json.dumps(to_dict(config))))


@pytest.mark.parametrize(
    "config",
    [
        Outer(),
        Outer(Inner(4, 0.5, "x"), Inner(1), [Inner(3), Inner(5, 0.0)], (3, 4, 5), (7, "b"), {"a": 1.5}, True),
        BertConfig(n_layers=3, d_model=64, n_heads=4, nsp=False),
        ELMoConfig(filters=((1, 8), (2, 16)), hidden_size=32, projection_dim=16),
        TrainConfig(optimizer="lamb", eps=1e-6, weight_decay=0.01),
    ],
    ids=["defaults", "nested", "bert", "elmo", "train-lamb"],
)
def test_configs_round_trip_through_json(config):
    back = round_trip(config)
    assert back == config and type(back) is type(config)


def test_nested_values_come_back_as_their_types():
    back = round_trip(Outer(optional=Inner(1), stack=[Inner(3)], sizes=(3, 4)))
    assert isinstance(back.optional, Inner) and isinstance(back.stack[0], Inner)
    assert back.sizes == (3, 4) and isinstance(back.sizes, tuple) and isinstance(back.pair, tuple)
    assert from_dict(Outer, {"inner": {"dropout": 1}}).inner.dropout == 1.0  # an int where a float is expected
    assert from_dict(Outer, {}) == Outer() and from_dict(Outer, {"optional": None}).optional is None
    assert from_dict(ELMoConfig, {"filters": [[1, 8]], "hidden_size": 8, "projection_dim": 8}).filters == ((1, 8),)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"innr": {}}, "unknown Outer key 'innr'; did you mean 'inner'?"),
        ({"inner": {"n_layer": 3}}, "unknown Outer key 'inner.n_layer'; did you mean 'inner.n_layers'?"),
        ({"inner": {"n_layers": "3"}}, "Outer key 'inner.n_layers' expects int, got '3'"),
        ({"inner": {"n_layers": True}}, "Outer key 'inner.n_layers' expects int, got True"),
        ({"inner": 3}, "Outer key 'inner' expects Inner, got 3"),
        ({"optional": {"name": 5}}, "Outer key 'optional' expects"),
        ({"stack": [{"n_layers": 1}, {"dropout": "high"}]}, "Outer key 'stack[1].dropout' expects float, got 'high'"),
        ({"sizes": "1,2"}, "Outer key 'sizes' expects tuple[int, ...], got '1,2'"),
        ({"pair": [1, "b", 2]}, "Outer key 'pair' expects tuple[int, str], got [1, 'b', 2] (3 items for 2)"),
        ({"table": {"a": "x"}}, "Outer key 'table.a' expects float"),
        ({"flag": "yes"}, "Outer key 'flag' expects bool, got 'yes'"),
    ],
)
def test_unknown_keys_and_wrong_types_name_the_key(data, message):
    with pytest.raises(ConfigError) as err:
        from_dict(Outer, data)
    assert message in str(err.value)


def test_a_section_name_and_the_configs_own_checks_show_in_errors():
    with pytest.raises(ConfigError, match="unknown model key 'n_layer'; did you mean 'n_layers'"):
        from_dict(BertConfig, {"n_layer": 2}, "model")
    with pytest.raises(ConfigError, match="model: d_model=30 is not divisible by n_heads=4"):
        from_dict(BertConfig, {"d_model": 30, "n_heads": 4}, "model")
    with pytest.raises(ConfigError, match="Required: width must be positive, got 0"):
        from_dict(Required, {"width": 0})
    with pytest.raises(ConfigError, match="Required: .*missing 1 required positional argument: 'width'"):
        from_dict(Required, {})
    with pytest.raises(ConfigError, match="must be a table of keys"):
        from_dict(Outer, [1, 2])


def test_the_optimizer_is_one_of_adamw_and_lamb():
    assert TrainConfig().optimizer == "adamw" and from_dict(TrainConfig, {}).optimizer == "adamw"  # older runs
    assert update(TrainConfig(), {"optimizer": "lamb"}, "train").optimizer == "lamb"
    with pytest.raises(ConfigError, match="optimizer='adam' is not one of adamw, lamb"):
        update(TrainConfig(), {"optimizer": "adam"}, "train")
    with pytest.raises(ConfigError, match="optimizer='sgd' is not one of adamw, lamb"):
        from_dict(TrainConfig, {"optimizer": "sgd"})
    with pytest.raises(ConfigError, match="eps must be between 0.0 and 1.0, got nan"):
        update(TrainConfig(), {"eps": "nan"}, "train")


def test_update_checks_typed_values_like_from_dict():
    assert update(Outer(), {"inner": {"n_layers": 5}}, "job").inner == Inner(5)
    assert update(Outer(), {"sizes": [5, 6]}, "job").sizes == (5, 6)
    assert update(Outer(), {"flag": "true"}, "job").flag is True  # text from the command line is parsed
    with pytest.raises(ConfigError, match="job key 'inner.dropout' expects float, got 'x'"):
        update(Outer(), {"inner": {"dropout": "x"}}, "job")
