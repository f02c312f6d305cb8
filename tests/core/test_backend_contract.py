"""The backend contract on every available backend: non-trainable variables and the ops Protocol.

Runs on the numpy harness always and on every installed backend plugin (torch, tf ...), so the
core-only venv checks numpy and the torch / tf venvs check their backend against the same rules.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.components.network import DenseLayer
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox
from rlgraph_core.testing import ComponentTest, backend_params, make_test_backend

ADAM = {"type": "adam", "learning_rate": 0.1, "max_grad_norm": None, "eps": 1e-8, "betas": (0.9, 0.999)}


@pytest.fixture(params=[p for p in backend_params() if p.values[0][1] == "eager"])
def eager_backend(request):
    """A ``(backend_name, "eager")`` pair for every available backend."""
    return request.param


@pytest.fixture(params=[p for p in backend_params() if p.values[0][0] != "numpy"])
def autodiff_backend(request):
    """A ``(backend_name, mode)`` pair for every framework backend (not the numpy harness)."""
    return request.param


# --------------------------------------------------------------------------- non-trainable variables
class Scaled(Component):
    """A trainable weight, a non-trainable scale and a frozen dense child, all in one loss."""

    def __init__(self):
        super().__init__("scaled")
        self.target = DenseLayer(2, rng=np.random.default_rng(0), name="frozen").freeze()
        self.add_components(self.target)

    def create_variables(self, input_spaces):
        self.w = self.make_variable("W", np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2))
        self.scale = self.make_variable("scale", np.full(2, 2.0, np.float32), trainable=False)

    @api
    def loss(self, x):
        """Mean square of ``(x W) * scale + frozen(x)``."""
        y = self.ops.dense(x, self.w, self.ops.zeros_like(self.scale)) * self.scale + self.target.call(x)
        return (self.ops.reduce_mean(self.ops.square(y)),)


SPACES = {"loss": {"x": FloatBox(shape=(3,)).with_batch_rank()}}
X = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)


def test_trainable_sets_are_the_same_on_every_backend(eager_backend):
    test = ComponentTest(Scaled(), SPACES, eager_backend)
    comp, be = test.component, test.backend
    assert set(comp.variables()) == {"W", "scale", "frozen/W", "frozen/b"}
    assert set(comp.variables(trainable_only=True)) == {"W"}
    assert comp.is_trainable("W") and not comp.is_trainable("scale")
    assert not comp.target.is_trainable("W")
    assert {k for k, v in comp.variables().items() if be.is_trainable(v)} == {"W"}
    with pytest.raises(KeyError, match="no variable 'nope'"):
        comp.is_trainable("nope")


def test_backend_variable_records_trainable(eager_backend):
    be = make_test_backend(*eager_backend)
    assert be.is_trainable(be.variable("a", np.ones(2, np.float32)))
    assert not be.is_trainable(be.variable("b", np.ones(2, np.float32), trainable=False))


def test_train_step_never_changes_non_trainable_variables(autodiff_backend):
    """Every variable (the non-trainable ones too) handed to the step: only W moves."""
    test = ComponentTest(Scaled(), SPACES, autodiff_backend)
    before = test.get_weights()
    _, grads = test.backend.gradients(
        test._loss_fn("loss", None), list(test.component.variables().values()), test.backend.to_tensor(X)
    )
    names = list(test.component.variables())
    assert np.any(grads[names.index("W")] != 0)
    for name in ("scale", "frozen/W", "frozen/b"):
        np.testing.assert_array_equal(grads[names.index(name)], 0.0, err_msg=name)
    step = test.backend.train_step(test._loss_fn("loss", None), list(test.component.variables().values()), ADAM)
    for _ in range(2):
        step(test.backend.to_tensor(X))
    after = test.get_weights()
    assert not np.allclose(after["W"], before["W"])
    for name in ("scale", "frozen/W", "frozen/b"):
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


# --------------------------------------------------------------------------- the ops Protocol
def test_ops_contract_is_derived_from_the_protocol():
    import inspect

    from rlgraph_core.backend import OPS_CONTRACT, Ops

    methods = {n for n, f in vars(Ops).items() if inspect.isfunction(f) and not n.startswith("_")}
    assert set(OPS_CONTRACT) == methods and len(methods) == 40
    assert OPS_CONTRACT["dense"] == "dense(x, w, b) -> x @ w + b, w is [in, out]"
    assert "\n" not in OPS_CONTRACT["activation"] and "leaky_relu (negative slope 0.2)" in OPS_CONTRACT["activation"]


def test_every_backend_ops_fulfils_the_protocol(eager_backend):
    from rlgraph_core.backend import ops_contract_problems

    be = make_test_backend(*eager_backend)
    assert ops_contract_problems(be.ops) == []


def test_protocol_check_finds_missing_ops_and_wrong_signatures():
    from rlgraph_core.backend import ops_contract_problems
    from rlgraph_core.testing import NumpyBackend

    class Broken(type(NumpyBackend().ops)):
        dense = None  # missing

        @staticmethod
        def clip(x, low, hi):  # renamed parameter
            return x

        @staticmethod
        def argmax(x, axis=0):  # different default
            return x

        @staticmethod
        def huber(x, delta):  # default missing
            return x

        @staticmethod
        def squeeze(x, axis, mode):  # extra parameter without default
            return x

        @staticmethod
        def square(*args):  # swallows everything: not the contract
            return args[0]

    problems = ops_contract_problems(Broken())
    assert problems == [
        "dense: missing",
        "argmax: parameter 'axis' defaults to 0, expected -1",
        "square: lacks parameter 'x'",
        "clip: parameter 2 is 'low', expected 'lo'",
        "huber: parameter 'delta' needs the default 1.0",
        "squeeze: extra parameter 'mode' needs a default",
    ]


def test_default_fused_loop_runs_the_body_once_per_step_in_order(eager_backend):
    """The base class's fused_loop (a Python loop; eager backends use it): step k sees the
    variable changes of step k - 1 and the outputs come back stacked [K, ...]."""
    be = make_test_backend(*eager_backend)
    total = be.variable("total", np.zeros(2, np.float32), trainable=False)
    scale = be.to_tensor(np.float32(10.0))

    def body(x, factor):
        be.ops.assign(total, total + x * factor)
        return (total + 0.0, be.ops.reduce_sum(x))

    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert not be.fuses_loops  # eager mode: nothing is compiled, a loop is a loop of steps
    loop = be.fused_loop(body)
    running, sums = loop([be.to_tensor(xs)], [scale])
    np.testing.assert_allclose(be.to_numpy(running), np.cumsum(xs * 10.0, axis=0))
    np.testing.assert_allclose(be.to_numpy(sums), xs.sum(1))
    assert loop.trace_count is None


@pytest.mark.parametrize(
    "requested, expected",
    [
        (None, "auto"),
        (" AUTO ", "auto"),
        ("cpu", "cpu"),
        ("cpu:0", "cpu"),
        ("gpu", 0),
        ("cuda", 0),
        ("cuda:3", 3),
        ("GPU:1", 1),
    ],
)
def test_parse_device_reads_the_device_grammar_every_backend_shares(requested, expected):
    from rlgraph_core.backend import parse_device

    assert parse_device(requested, "tile", "auto, cpu, gpu:N") == expected


@pytest.mark.parametrize("requested", ["tpu", "cuda:x", "gpu:-1", "cpu:1", "cuda:"])
def test_parse_device_refuses_other_names_naming_the_backend_and_its_choices(requested):
    from rlgraph_core.backend import parse_device
    from rlgraph_core.errors import ConfigError

    with pytest.raises(
        ConfigError, match=rf"'train.device' = '{requested}' is not known to the tile backend; use auto, cpu"
    ):
        parse_device(requested, "tile", "auto, cpu, gpu:N")
