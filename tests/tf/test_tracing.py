"""Static mode traces once per input signature: counted with a Python-side counter.

Python code inside a ``tf.function`` runs only while tracing, so a list appended to inside the
traced function counts traces. Many calls with same-shaped inputs (and changing values,
learning rates, epsilons) must trace exactly once.
"""

import numpy as np

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_tf import TFBackend

rng = np.random.default_rng(0)


def test_function_traces_once_for_same_shapes():
    backend = TFBackend(mode="static", device="cpu")
    traces = []

    def fn(x, scale):
        traces.append(1)
        return backend.ops.reduce_sum(x * scale, axis=-1)

    f = backend.function(fn)
    for i in range(100):
        x = rng.standard_normal((8, 4)).astype(np.float32)
        out = f(backend.to_tensor(x), backend.to_tensor(np.float32(i)))
        np.testing.assert_allclose(backend.to_numpy(out), (x * i).sum(-1), rtol=1e-5, atol=1e-5)
    assert len(traces) == 1
    assert f.experimental_get_tracing_count() == 1
    # A new batch size generalises the signature (reduce_retracing) instead of one trace per size.
    for n in list(range(1, 40)) * 2:
        x = rng.standard_normal((n, 4)).astype(np.float32)
        out = f(backend.to_tensor(x), backend.to_tensor(np.float32(2)))
        np.testing.assert_allclose(backend.to_numpy(out), (x * 2).sum(-1), rtol=1e-5, atol=1e-5)
    assert len(traces) == 2


def test_python_values_are_part_of_the_signature():
    """A Python number is a trace-time constant (documented): a new value traces again."""
    backend = TFBackend(mode="static", device="cpu")
    traces = []

    def fn(x, scale):
        traces.append(1)
        return x * scale

    f = backend.function(fn)
    x = backend.to_tensor(np.ones(2, np.float32))
    for scale in (1.0, 1.0, 2.0, 2.0):
        np.testing.assert_allclose(backend.to_numpy(f(x, scale)), [scale, scale])
    assert len(traces) == 2


def test_eager_function_is_the_plain_function():
    backend = TFBackend(mode="eager", device="cpu")
    calls = []

    def fn(x):
        calls.append(1)
        return x + 1.0

    f = backend.function(fn)
    assert f is fn
    for _ in range(5):
        f(backend.to_tensor(np.zeros(3, np.float32)))
    assert len(calls) == 5


def test_train_step_traces_once_across_calls_and_learning_rates():
    backend = TFBackend(mode="static", device="cpu")
    w = backend.variable("w", rng.standard_normal((4, 2)).astype(np.float32))
    traces = []

    def loss_fn(x, y):
        traces.append(1)
        return (backend.ops.reduce_mean(backend.ops.square(backend.ops.dense(x, w, np.zeros(2, np.float32)) - y)),)

    step = backend.train_step(
        loss_fn, [w], {"type": "adam", "learning_rate": 1e-2, "max_grad_norm": 1.0, "eps": 1e-8, "betas": (0.9, 0.999)}
    )
    losses = []
    for i in range(60):
        if i % 10 == 0:
            step.learning_rate = 1e-2 / (1 + i)  # a schedule: a variable in the graph, no retrace
        x = rng.standard_normal((32, 4)).astype(np.float32)
        (loss,) = step(backend.to_tensor(x), backend.to_tensor(x[:, :2]))
        losses.append(float(backend.to_numpy(loss)))
    assert len(traces) == 1
    assert step._step.experimental_get_tracing_count() == 1
    assert np.mean(losses[-10:]) < np.mean(losses[:10])


def test_hooked_train_step_traces_each_half_once_across_learning_rates():
    """With a gradient hook the gradient half and the update half are each one graph, traced once."""
    backend = TFBackend(mode="static", device="cpu")
    w = backend.variable("w", rng.standard_normal((4, 2)).astype(np.float32))
    traces, hooked = [], []

    def loss_fn(x, y):
        traces.append(1)
        return (backend.ops.reduce_mean(backend.ops.square(backend.ops.dense(x, w, np.zeros(2, np.float32)) - y)),)

    step = backend.train_step(
        loss_fn, [w], {"type": "adam", "learning_rate": 1e-2, "max_grad_norm": 1.0, "eps": 1e-8, "betas": (0.9, 0.999)}
    )
    step.gradient_hook = lambda flat: hooked.append(flat.shape) or flat
    for i in range(20):
        if i % 5 == 0:
            step.learning_rate = 1e-2 / (1 + i)
        x = rng.standard_normal((32, 4)).astype(np.float32)
        step(backend.to_tensor(x), backend.to_tensor(x[:, :2]))
    assert hooked == [(8,)] * 20
    assert len(traces) == 1
    assert step._compute.experimental_get_tracing_count() == 1
    assert [fn.experimental_get_tracing_count() for fn in step._apply_fns.values()] == [1]


def test_dqn_agent_static_traces_once():
    """A static DQN agent: acting, greedy acting and updating each trace once over many calls."""
    agent = DQNAgent(
        DQNConfig(network={"hidden": [16]}, batch_size=16, exploration=0.3),
        FloatBox(shape=(4,)),
        Discrete(2),
        TFBackend(mode="static", device="cpu"),
        seed=0,
    )
    loss_traces = []
    inner = agent.graph.dqn_loss.loss

    def counted_loss(*args):
        loss_traces.append(1)
        return inner(*args)

    agent.graph.dqn_loss.loss = counted_loss
    for t in range(40):
        obs = rng.standard_normal((3, 4)).astype(np.float32)
        agent.act(obs)  # epsilon changes with timesteps: a tensor input
        agent.act(obs, explore=False)
        agent.timesteps += 100
        batch = {
            "obs": rng.standard_normal((16, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, 16),
            "rewards": rng.random(16).astype(np.float32),
            "next_obs": rng.standard_normal((16, 4)).astype(np.float32),
            "terminals": rng.random(16) < 0.2,
        }
        agent.update(batch)
    assert len(loss_traces) == 1
    assert agent.train_step._step.experimental_get_tracing_count() == 1
    assert agent.graph.act.experimental_get_tracing_count() == 1
    assert agent.graph.greedy.experimental_get_tracing_count() == 1
