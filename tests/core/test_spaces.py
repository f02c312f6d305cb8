"""Tests for rlgraph_core.spaces."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from rlgraph_core.spaces import (
    BoolBox,
    Dict,
    Discrete,
    FloatBox,
    IntBox,
    MultiBinary,
    MultiDiscrete,
    Space,
    SpaceError,
    Tuple,
    from_gym,
    space_from_value,
    to_gym,
)

I64 = np.iinfo(np.int64)

LEAVES = {
    "float_unbounded": FloatBox(shape=(4,)),
    "float_bounded_per_elem": FloatBox(low=[0.0, -1.0, 2.0], high=[1.0, 1.0, 2.0]),
    "float_half_bounded": FloatBox(low=[0.0, -np.inf], high=[np.inf, 3.0]),
    "float64_scalar": FloatBox(-2.0, 5.0, dtype="float64"),
    "int_box": IntBox(-3, 3, shape=(2, 2)),
    "int_uint8_image": IntBox(0, 255, shape=(4, 4, 3), dtype="uint8"),
    "int_full_range": IntBox(I64.min, I64.max, shape=(3,)),
    "bool_box": BoolBox((3,)),
    "bool_scalar": BoolBox(),
    "discrete": Discrete(5),
    "discrete_start": Discrete(3, start=-2),
    "multi_discrete": MultiDiscrete([2, 3, 4], start=[0, 1, -1]),
    "multi_binary": MultiBinary((2, 3)),
}
CONTAINERS = {
    "dict": Dict(a=FloatBox(0.0, 1.0, shape=(2,)), b=Discrete(3)),
    "tuple": Tuple(IntBox(0, 9), BoolBox((2,))),
    "nested": Dict(
        obs=Tuple(FloatBox(shape=(3,)), Dict(pos=IntBox(0, 4, shape=(2,)))),
        act=MultiDiscrete([2, 2]),
    ),
}
ALL = {**LEAVES, **CONTAINERS}
ids = pytest.mark.parametrize("space", list(ALL.values()), ids=list(ALL))
leaf_ids = pytest.mark.parametrize("space", list(LEAVES.values()), ids=list(LEAVES))


def _leaves_of(value, space):
    """Arrays of a (nested) value in flatten order."""
    return list(space.flatten_value(value).values())


def _rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------ sample / contains
@ids
def test_single_sample_is_contained(space):
    value = space.sample(rng=_rng())
    assert space.contains(value)
    space.check(value)
    for arr, leaf in zip(_leaves_of(value, space), space.flatten().values()):
        assert arr.shape == leaf.shape
        assert arr.dtype == leaf.dtype


@ids
def test_batched_sample_needs_batch_rank(space):
    batched = space.with_batch_rank()
    value = batched.sample(5, rng=_rng())
    assert batched.contains(value)
    assert not space.contains(value)
    assert not batched.contains(space.sample(rng=_rng()))
    # Batch size is arbitrary.
    assert batched.contains(batched.sample(1, rng=_rng()))


@ids
def test_batch_and_time_ranks(space):
    bt = space.with_batch_rank().with_time_rank()
    assert bt.contains(bt.sample((2, 7), rng=_rng()))
    assert not bt.contains(bt.sample(2, rng=_rng()))
    time_only = space.with_time_rank()
    assert time_only.contains(time_only.sample(6, rng=_rng()))
    assert not time_only.has_batch_rank


@leaf_ids
def test_get_shape_orders_batch_and_time(space):
    assert space.get_shape(batch_size=8) == space.shape
    assert space.with_batch_rank().get_shape() == (None,) + space.shape
    batch_major = space.with_batch_rank().with_time_rank()
    assert batch_major.get_shape(2, 3) == (2, 3) + space.shape
    time_major = space.with_batch_rank().with_time_rank(time_major=True)
    assert time_major.time_major
    assert time_major.get_shape(2, 3) == (3, 2) + space.shape


def test_with_rank_returns_copies():
    base = FloatBox(shape=(2,))
    batched = base.with_batch_rank()
    assert not base.has_batch_rank and batched.has_batch_rank
    assert batched.with_batch_rank(False) == base
    timed = batched.with_time_rank(True, time_major=True)
    assert timed.has_time_rank and timed.time_major and timed.has_batch_rank
    assert not timed.with_time_rank(False).time_major


def test_container_flags_apply_to_leaves():
    d = Dict(a=FloatBox().with_batch_rank(), b=Tuple(Discrete(2)))
    assert not d.has_batch_rank
    batched = d.with_batch_rank().with_time_rank(time_major=True)
    assert batched.has_batch_rank and batched.has_time_rank and batched.time_major
    assert all(leaf.has_batch_rank and leaf.time_major for leaf in batched.flatten().values())
    assert batched.get_shape(4, 5) == {"a": (5, 4), "b": ((5, 4),)}
    empty = Dict().with_batch_rank()
    assert empty.has_batch_rank and empty != Dict()


@leaf_ids
def test_contains_rejects_wrong_shape(space):
    value = space.sample(rng=_rng())
    assert not space.contains(np.stack([value, value]))
    if space.rank > 0:
        assert not space.contains(value.reshape(-1)[:-1])


WRONG_KIND = [
    (FloatBox(shape=(2,)), np.zeros(2, dtype=np.int64)),
    (FloatBox(shape=()), True),
    (IntBox(0, 5, shape=(2,)), np.zeros(2, dtype=np.float32)),
    (IntBox(0, 1), np.bool_(True)),
    (BoolBox((2,)), np.zeros(2, dtype=np.int64)),
    (Discrete(3), 1.0),
    (MultiDiscrete([2, 2]), np.array([0.0, 1.0])),
    (MultiBinary(2), np.array([True, False])),
    (FloatBox(), "a string"),
]


@pytest.mark.parametrize("space,value", WRONG_KIND, ids=[repr(s) for s, _ in WRONG_KIND])
def test_contains_rejects_wrong_dtype_kind(space, value):
    assert not space.contains(value)
    with pytest.raises(SpaceError, match="dtype"):
        space.check(value)


def test_contains_accepts_other_precision_of_same_kind():
    assert FloatBox(0.0, 1.0, shape=(2,)).contains(np.array([0.0, 1.0], dtype=np.float64))
    assert IntBox(0, 5).contains(np.int8(5))
    assert Discrete(3).contains(2)


OUT_OF_BOUNDS = [
    (FloatBox(0.0, 1.0), 1.5, 1.0),
    (FloatBox(0.0, 1.0), np.nan, 0.0),
    (FloatBox(low=[0.0, -np.inf], high=[np.inf, 3.0]), np.array([-0.1, 0.0]), np.array([np.inf, 3.0])),
    (IntBox(0, 5), 6, 5),
    (IntBox(0, 5), -1, 0),
    (IntBox([0, 10], [1, 20]), np.array([1, 9]), np.array([1, 10])),
    (Discrete(3, start=2), 5, 4),
    (Discrete(3, start=2), 1, 2),
    (MultiDiscrete([2, 3]), np.array([2, 0]), np.array([1, 2])),
    (MultiBinary(3), np.array([0, 2, 1], dtype=np.int8), np.array([0, 1, 1], dtype=np.int8)),
]


@pytest.mark.parametrize("space,bad,good", OUT_OF_BOUNDS, ids=[f"{s!r}-{b!r}" for s, b, _ in OUT_OF_BOUNDS])
def test_bounds_are_inclusive_and_enforced(space, bad, good):
    assert not space.contains(bad)
    assert space.contains(good)
    with pytest.raises(SpaceError, match="outside the bounds"):
        space.check(bad)


def test_check_message_names_expected_and_given_shape():
    space = FloatBox(shape=(4,)).with_batch_rank()
    with pytest.raises(SpaceError) as info:
        space.check(np.zeros((3, 5), np.float32), name="obs")
    msg = str(info.value)
    assert msg.startswith("obs has shape (3, 5)")
    assert "expects shape (batch, 4)" in msg


def test_check_message_names_dtype_and_bounds():
    with pytest.raises(SpaceError) as info:
        IntBox(0, 5, shape=(3,)).check(np.array([1.0, 2.0, 3.0]))
    assert "float64" in str(info.value) and "integer" in str(info.value)
    with pytest.raises(SpaceError) as info:
        IntBox(0, 5, shape=(3,)).check(np.array([1, 9, 3]))
    msg = str(info.value)
    assert "9" in msg and "[0, 5]" in msg and "(1,)" in msg


def test_check_message_locates_nested_problem():
    space = Dict(a=Tuple(FloatBox(0.0, 1.0), Discrete(3)), b=BoolBox())
    good = {"a": (0.5, 2), "b": True}
    space.check(good)
    with pytest.raises(SpaceError, match=r"action\['a'\]\[1\] has 1 of 1 elements outside"):
        space.check({"a": (0.5, 3), "b": True}, name="action")


CONTAINER_MISMATCH = [
    (Dict(a=Discrete(2), b=Discrete(2)), {"a": 0}, "missing"),
    (Dict(a=Discrete(2)), {"a": 0, "z": 1}, "unexpected"),
    (Dict(a=Discrete(2)), (0,), "expects a dict"),
    (Tuple(Discrete(2), Discrete(2)), (0,), "1 entries"),
    (Tuple(Discrete(2)), {"0": 0}, "expects a tuple"),
    (Discrete(2), (0,), "single array"),
]


@pytest.mark.parametrize("space,value,fragment", CONTAINER_MISMATCH, ids=[m for *_, m in CONTAINER_MISMATCH])
def test_container_structure_mismatch(space, value, fragment):
    assert not space.contains(value)
    with pytest.raises(SpaceError, match=fragment):
        space.check(value)


# ------------------------------------------------------------ flatten
def test_flatten_keys():
    inner = FloatBox(shape=(2,))
    space = Dict(b=Dict(c=Discrete(2)), a=Tuple(inner, IntBox(0, 1)))
    flat = space.flatten()
    assert list(flat) == ["a/0", "a/1", "b/c"]
    assert flat["a/0"] is inner
    assert inner.flatten() == {"": inner}
    assert list(Tuple(Discrete(2), Tuple(BoolBox())).flatten()) == ["0", "1/0"]


@ids
def test_flatten_unflatten_round_trip(space):
    value = space.sample(3, rng=_rng())
    flat = space.flatten_value(value)
    assert list(flat) == list(space.flatten())
    assert all(isinstance(v, np.ndarray) for v in flat.values())
    rebuilt = space.unflatten_value(flat)
    assert type(rebuilt) is type(value)
    for a, b in zip(_leaves_of(rebuilt, space), _leaves_of(value, space)):
        np.testing.assert_array_equal(a, b)


def test_unflatten_gives_dicts_and_tuples():
    space = Dict(x=Tuple(Discrete(2), Dict(y=BoolBox())))
    value = space.unflatten_value({"x/0": np.array(1), "x/1/y": np.array(True)})
    assert isinstance(value, dict) and isinstance(value["x"], tuple) and isinstance(value["x"][1], dict)
    assert space.contains(value)


def test_unflatten_rejects_missing_and_extra_keys():
    space = Dict(a=Discrete(2), b=Discrete(2))
    with pytest.raises(SpaceError, match="'b'.*missing"):
        space.unflatten_value({"a": np.array(0)})
    with pytest.raises(SpaceError, match="unexpected flat keys"):
        space.unflatten_value({"a": np.array(0), "b": np.array(1), "c": np.array(1)})
    with pytest.raises(SpaceError, match="expects a tuple"):
        Dict(a=Tuple(Discrete(2))).flatten_value({"a": 0})


# ------------------------------------------------------------ json / equality
@ids
@pytest.mark.parametrize("flags", ["none", "batch", "batch_time_major"])
def test_json_round_trip(space, flags):
    if flags != "none":
        space = space.with_batch_rank()
    if flags == "batch_time_major":
        space = space.with_time_rank(time_major=True)
    text = json.dumps(space.to_json(), allow_nan=False)  # infinities must be encoded safely
    restored = Space.from_json(json.loads(text))
    assert restored == space
    assert hash(restored) == hash(space)
    assert restored.to_json() == space.to_json()


def test_json_of_empty_containers_keeps_flags():
    for space in (Dict().with_batch_rank(), Tuple().with_time_rank(time_major=True)):
        assert Space.from_json(json.loads(json.dumps(space.to_json()))) == space


def test_from_json_errors():
    with pytest.raises(SpaceError, match="unknown type 'Weird'"):
        Space.from_json({"type": "Weird"})
    with pytest.raises(SpaceError, match="'type'"):
        Space.from_json({"shape": []})
    with pytest.raises(SpaceError, match="Invalid JSON description of a FloatBox"):
        Space.from_json({"type": "FloatBox", "shape": []})
    with pytest.raises(SpaceError, match="IntBox"):
        FloatBox.from_json(IntBox(0, 1).to_json())
    assert isinstance(IntBox.from_json(Discrete(3).to_json()), Discrete)


EQUALITY = [
    (FloatBox(0.0, 1.0, shape=(2,)), FloatBox([0.0, 0.0], [1.0, 1.0]), True),
    (FloatBox(shape=(2,)), FloatBox(shape=(2,), dtype="float64"), False),
    (FloatBox(shape=(2,)), FloatBox(shape=(2,)).with_batch_rank(), False),
    (FloatBox(shape=(2,)).with_time_rank(), FloatBox(shape=(2,)).with_time_rank(time_major=True), False),
    (Discrete(3), IntBox(0, 2), False),
    (MultiBinary(2), IntBox(0, 1, shape=(2,), dtype="int8"), False),
    (Discrete(3), Discrete(3, start=1), False),
    (Dict(a=Discrete(2), b=BoolBox()), Dict({"b": BoolBox()}, a=Discrete(2)), True),
    (Dict(a=Discrete(2)), Dict(b=Discrete(2)), False),
    (Tuple(Discrete(2)), Tuple([Discrete(2)]), True),
    (Tuple(), Dict(), False),
]


@pytest.mark.parametrize("a,b,equal", EQUALITY, ids=[f"{a!r}=={b!r}" for a, b, _ in EQUALITY])
def test_structural_equality(a, b, equal):
    assert (a == b) is equal
    if equal:
        assert hash(a) == hash(b)


def test_repr():
    assert repr(FloatBox(shape=(4,)).with_batch_rank()) == "FloatBox(shape=(4,), low=-inf, high=inf, +batch)"
    assert repr(Discrete(3, start=1)) == "Discrete(n=3, start=1)"
    assert repr(Dict(a=BoolBox())) == "Dict({'a': BoolBox(shape=())})"
    assert "+time(major)" in repr(IntBox(0, 1).with_time_rank(time_major=True))


# ------------------------------------------------------------ gymnasium
def _gym_cases():
    gs = pytest.importorskip("gymnasium.spaces")
    return {
        "box_f32": gs.Box(-1.0, 1.0, (3,), np.float32),
        "box_f64_per_elem_inf": gs.Box(np.array([0.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float64),
        "box_f16_unbounded": gs.Box(-np.inf, np.inf, (2, 2), np.float16),
        "box_uint8": gs.Box(0, 255, (4, 4, 3), np.uint8),
        "box_int32_per_elem": gs.Box(np.array([-3, 0]), np.array([3, 7]), dtype=np.int32),
        "box_int64_inf": gs.Box(-np.inf, np.inf, (2,), np.int64),
        "box_bool": gs.Box(0, 1, (2,), np.bool_),
        "discrete": gs.Discrete(5),
        "discrete_start": gs.Discrete(3, start=-2),
        "discrete_int32": gs.Discrete(4, dtype=np.int32),
        "multi_discrete": gs.MultiDiscrete([3, 4]),
        "multi_discrete_2d_start": gs.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[1, 1], [0, -5]])),
        "multi_binary": gs.MultiBinary(4),
        "multi_binary_2d": gs.MultiBinary((2, 3)),
        "dict": gs.Dict(a=gs.Discrete(2), b=gs.Tuple((gs.Box(0.0, 1.0, (2,)), gs.MultiBinary(2)))),
        "tuple": gs.Tuple((gs.Discrete(2), gs.Dict(x=gs.Box(-1, 1, (1,), np.int16)))),
    }


GYM_NAMES = [
    "box_f32",
    "box_f64_per_elem_inf",
    "box_f16_unbounded",
    "box_uint8",
    "box_int32_per_elem",
    "box_int64_inf",
    "box_bool",
    "discrete",
    "discrete_start",
    "discrete_int32",
    "multi_discrete",
    "multi_discrete_2d_start",
    "multi_binary",
    "multi_binary_2d",
    "dict",
    "tuple",
]


@pytest.mark.parametrize("name", GYM_NAMES)
def test_gym_round_trip(name):
    gym_space = _gym_cases()[name]
    space = from_gym(gym_space)
    back = to_gym(space)
    assert back == gym_space
    assert type(back) is type(gym_space)
    assert from_gym(back) == space
    gym_space.seed(0)
    for _ in range(3):
        assert space.contains(gym_space.sample())
        sample = space.sample(rng=_rng())
        assert gym_space.contains(sample)


def test_gym_mapping_choices():
    gs = pytest.importorskip("gymnasium.spaces")
    assert from_gym(gs.MultiBinary(3)) == MultiBinary(3)
    assert from_gym(gs.Discrete(4, start=1)) == Discrete(4, start=1)
    assert from_gym(gs.Box(0, 1, (2,), np.int8)) == IntBox(0, 1, shape=(2,), dtype="int8")
    assert to_gym(FloatBox(shape=(2,)).with_batch_rank()) == gs.Box(-np.inf, np.inf, (2,), np.float32)


def test_gym_unsupported_space():
    gs = pytest.importorskip("gymnasium.spaces")
    with pytest.raises(SpaceError, match="Text.*supported gymnasium spaces are Box.*Discrete"):
        from_gym(gs.Text(5))
    with pytest.raises(SpaceError, match="string keys"):
        from_gym(gs.Dict({1: gs.Discrete(2)}))
    with pytest.raises(SpaceError, match="Box"):
        from_gym("not a space")


def test_package_does_not_import_gymnasium():
    code = "import sys, rlgraph_core.spaces; assert 'gymnasium' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": ":".join(sys.path)})


# ------------------------------------------------------------ misc
FLAT_DIMS = [
    (FloatBox(shape=(3, 4)), 12),
    (FloatBox(), 1),
    (Discrete(7), 1),
    (MultiDiscrete([2, 3, 4]), 3),
    (MultiBinary((2, 5)), 10),
    (BoolBox((0,)), 0),
    (Dict(a=FloatBox(shape=(3,)), b=Tuple(Discrete(4), IntBox(0, 1, shape=(2, 2)))), 8),
    (Tuple(), 0),
]


@pytest.mark.parametrize("space,expected", FLAT_DIMS, ids=[repr(s) for s, _ in FLAT_DIMS])
def test_flat_dim(space, expected):
    assert space.flat_dim == expected
    assert space.with_batch_rank().flat_dim == expected


@ids
def test_zeros(space):
    for size, lead in ((None, ()), (3, (3,)), ((2, 4), (2, 4))):
        value = space.zeros(size)
        for arr, leaf in zip(_leaves_of(value, space), space.flatten().values()):
            assert arr.shape == lead + leaf.shape
            assert arr.dtype == leaf.dtype
            assert not np.any(arr)


def test_zeros_structure_and_unclipped_values():
    z = Dict(a=Tuple(Discrete(3, start=5)), b=FloatBox(1.0, 2.0)).zeros()
    assert isinstance(z, dict) and isinstance(z["a"], tuple)
    assert z["a"][0] == 0 and z["b"] == 0.0


@ids
def test_sampling_is_reproducible(space):
    a = space.flatten_value(space.sample(4, rng=_rng(123)))
    b = space.flatten_value(space.sample(4, rng=_rng(123)))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_sampling_differs_across_seeds_and_respects_bounds():
    space = FloatBox(low=[0.0, 2.0, -np.inf], high=[1.0, np.inf, -3.0])
    a, b = space.sample(200, rng=_rng(1)), space.sample(200, rng=_rng(2))
    assert not np.array_equal(a, b)
    assert a.shape == (200, 3)
    assert (a[:, 0] >= 0).all() and (a[:, 0] <= 1).all() and a[:, 0].std() > 0.1
    assert (a[:, 1] >= 2).all() and (a[:, 2] <= -3).all()
    ints = IntBox(0, 2).sample(300, rng=_rng())
    assert set(np.unique(ints)) == {0, 1, 2}
    assert set(np.unique(Discrete(3, start=-1).sample(300, rng=_rng()))) == {-1, 0, 1}


@pytest.mark.parametrize("size", [-1, 1.5, "3", (2, -1), True])
def test_invalid_sample_size(size):
    with pytest.raises(SpaceError, match="Invalid size"):
        FloatBox().sample(size)


def test_invalid_rng():
    with pytest.raises(SpaceError, match="Generator"):
        FloatBox().sample(rng=np.random.RandomState(0))


def test_discrete_attributes():
    d = Discrete(4, start=2)
    assert (d.n, d.start, d.num_categories, d.shape, d.rank, d.dtype) == (4, 2, 4, (), 0, np.int64)
    md = MultiDiscrete([2, 3], start=1)
    np.testing.assert_array_equal(md.nvec, [2, 3])
    np.testing.assert_array_equal(md.high, [2, 3])
    assert IntBox(0, 1).dtype == np.int64 and FloatBox().dtype == np.float32 and BoolBox().dtype == np.bool_


def test_container_interfaces():
    d = Dict({"b": Discrete(2)}, a=FloatBox())
    assert list(d.keys()) == ["a", "b"] and len(d) == 2 and d["b"] == Discrete(2)
    assert [k for k, _ in d.items()] == ["a", "b"] and list(d) == ["a", "b"]
    assert d.dtype is None and d.shape == {"a": (), "b": ()}
    t = Tuple([Discrete(2), BoolBox()])
    assert len(t) == 2 and t[1] == BoolBox() and list(t) == [Discrete(2), BoolBox()]
    assert t[:1] == Tuple(Discrete(2))
    assert Dict(x={"y": Discrete(2)}) == Dict(x=Dict(y=Discrete(2)))
    with pytest.raises(KeyError, match="keys are"):
        d["zzz"]


INVALID = [
    (lambda: FloatBox(1.0, 0.0), "low > high"),
    (lambda: FloatBox(np.nan, 1.0), "NaN"),
    (lambda: FloatBox(shape=(2,), dtype="int32"), "floating-point dtype"),
    (lambda: FloatBox([0.0, 0.0], [1.0, 1.0, 1.0]), "incompatible shapes"),
    (lambda: FloatBox([0.0, 0.0], 1.0, shape=(3,)), "do not fit"),
    (lambda: FloatBox(0.0, 1e39), "float32 range"),
    (lambda: IntBox(0, 1.5), "not integral"),
    (lambda: IntBox(0, 300, dtype="uint8"), "uint8 range"),
    (lambda: IntBox(0, np.inf), "not integral"),
    (lambda: Discrete(0), "positive integer"),
    (lambda: MultiDiscrete([2, 0]), "positive integers"),
    (lambda: Dict({"a/b": Discrete(2)}), "without '/'"),
    (lambda: Dict({"a": Discrete(2)}, a=Discrete(3)), "given twice"),
    (lambda: Dict(a=3), "expected a Space"),
    (lambda: Tuple(Discrete(2), "x"), "Tuple entry 1"),
    (lambda: BoolBox((-1,)), "non-negative"),
]


@pytest.mark.parametrize("make,fragment", INVALID, ids=[f for _, f in INVALID])
def test_invalid_construction(make, fragment):
    with pytest.raises(SpaceError, match=fragment):
        make()


def test_space_error_is_value_error():
    assert issubclass(SpaceError, ValueError)


# ------------------------------------------------------------ space_from_value
def test_space_from_value_leaves():
    assert space_from_value(np.zeros((2, 3), np.float32)) == FloatBox(shape=(2, 3))
    assert space_from_value(1.5) == FloatBox(dtype="float64")
    assert space_from_value(np.arange(4)) == IntBox(I64.min, I64.max, shape=(4,))
    assert space_from_value(np.zeros(2, np.uint8)) == IntBox(0, 255, shape=(2,), dtype="uint8")
    assert space_from_value(np.array([True, False])) == BoolBox((2,))


def test_space_from_value_containers_and_batch():
    value = {"img": np.zeros((5, 8, 8), np.float32), "info": (np.arange(5), np.ones(5, bool))}
    space = space_from_value(value, has_batch_rank=True)
    assert space == Dict(img=FloatBox(shape=(8, 8)), info=Tuple(IntBox(I64.min, I64.max), BoolBox())).with_batch_rank()
    assert space.contains(value)
    assert space_from_value(value).contains(value)


def test_space_from_value_errors():
    with pytest.raises(SpaceError, match="dtype <U"):
        space_from_value(np.array(["a"]))
    with pytest.raises(SpaceError, match="leading batch axis"):
        space_from_value(np.float32(1.0), has_batch_rank=True)
