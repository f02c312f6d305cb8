"""Fused update rounds (one ``backend.fused_loop`` call per round) equal the step-by-step loop.

Two agents with the same seed learn from the same data, one with ``fuse_rounds: true`` and one
with ``false``; after one or two rounds their weights (online and target networks), counters,
generator states and metrics agree. The fused path must actually have run: a spy on
``backend.fused_loop`` counts its rounds and their K. On a backend whose ``fuses_loops`` is still
False (eager mode, or a static mode that does not compile loops yet) the test switches it on, so
the fused code path runs on the contract's default :class:`~rlgraph_core.backend.PythonLoop`;
where a backend compiles loops the static cases compare its compiled loop.

Also: PPO with ``target_kl`` or a gradient hook, DQN with a gradient hook and a prioritized
memory without ``fuse_prioritized_rounds`` stay step by step; with ``fuse_prioritized_rounds``
a round samples all K batches before any priority update and updates them after the round with
each step's ``|TD|`` (checked against a step-by-step learner fed the same K batches).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlgraph_core.agents.bc import BCAgent, BCConfig
from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.iql import IQLAgent, IQLConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.agents.sac import SACAgent, SACConfig
from rlgraph_core.memories.settings import PrioritizedReplaySettings
from rlgraph_core.spaces import Dict, Discrete, FloatBox, IntBox
from rlgraph_core.testing import backend_pairs, make_test_backend

PAIRS = [p for p in backend_pairs() if p[0] != "numpy"]
EAGER = [p for p in PAIRS if p[1] == "eager"]
STATIC = [p for p in PAIRS if p[1] == "static"]
OBS = FloatBox(-1.0, 1.0, shape=(4,))


def _ids(pair) -> str:
    return f"{pair[0]}-{pair[1]}"


class LoopSpy:
    """Wraps ``backend.fused_loop`` so a test sees every fused round and its K."""

    def __init__(self, backend):
        self.rounds: list[int] = []
        self._make = backend.fused_loop

    def __call__(self, body):
        loop = self._make(body)

        def run(per_step, constants=()):
            self.rounds.append(int(per_step[0].shape[0]))
            return loop(per_step, constants)

        return run


def _backend(pair, monkeypatch, spy: bool = True) -> tuple[Any, LoopSpy]:
    """A fresh backend of ``pair`` whose fused loop is spied on and whose ``fuses_loops`` is True."""
    backend = make_test_backend(*pair, device="cpu", seed=0)
    if not backend.fuses_loops:
        # The fused path then runs on the default PythonLoop (the class attribute is patched:
        # fuses_loops is a property); the unfused agents of a test opt out by config.
        monkeypatch.setattr(type(backend), "fuses_loops", property(lambda self: True))
    loop_spy = LoopSpy(backend)
    if spy:
        monkeypatch.setattr(backend, "fused_loop", loop_spy)
    return backend, loop_spy


def assert_close_weights(got: dict, ref: dict) -> None:
    assert set(got) == set(ref)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


def assert_close_metrics(got: dict, ref: dict) -> None:
    assert set(got) == set(ref)
    for name in ref:
        np.testing.assert_allclose(float(got[name]), float(ref[name]), rtol=1e-5, atol=1e-6, err_msg=name)


# --- PPO -----------------------------------------------------------------------------------
T, N = 4, 4  # rollouts of 16 samples, minibatches of 8: 2 epochs x 2 minibatches = K 4


def _ppo(pair, monkeypatch, fuse: bool, batch_size: int = 8, **extra) -> tuple[PPOAgent, LoopSpy]:
    cfg = PPOConfig(
        network={"hidden": [16]},
        n_steps=T,
        batch_size=batch_size,
        n_epochs=2,
        ent_coef=0.01,
        clip_range_vf=0.2,
        fuse_rounds=fuse,
        optimizer={"learning_rate": 3e-3},
        **extra,
    )
    backend, spy = _backend(pair, monkeypatch)
    return PPOAgent(cfg, OBS, Discrete(2), backend, seed=0, num_envs=N), spy


def _ppo_rollout(seed: int) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    return {
        "obs": r.uniform(-1, 1, (T, N, 4)).astype(np.float32),
        "actions": r.integers(0, 2, (T, N)),
        "log_probs": (np.log(0.5) + 0.3 * r.standard_normal((T, N))).astype(np.float32),
        "values": r.standard_normal((T, N)).astype(np.float32),
        "rewards": r.standard_normal((T, N)).astype(np.float32),
        "terminated": r.random((T, N)) < 0.1,
        "truncated": np.zeros((T, N), bool),
        "next_values": r.standard_normal((T, N)).astype(np.float32),
    }


ROLLOUTS = [_ppo_rollout(10), _ppo_rollout(11)]


def _drive_ppo(agent: PPOAgent) -> list[dict]:
    return [agent.update(dict(r)) for r in ROLLOUTS]


@pytest.mark.parametrize("pair", EAGER, ids=_ids)
def test_ppo_fused_epochs_equal_the_minibatch_loop(pair, monkeypatch):
    fused, spy = _ppo(pair, monkeypatch, fuse=True)
    plain, plain_spy = _ppo(pair, monkeypatch, fuse=False)
    got, ref = _drive_ppo(fused), _drive_ppo(plain)
    assert spy.rounds == [4, 4] and plain_spy.rounds == []  # one program per rollout
    assert fused.updates == plain.updates == 8 and fused.weights_version == plain.weights_version == 8
    for g, r in zip(got, ref):
        assert g["gradient_steps"] == r["gradient_steps"] == 4 and g["early_stop"] is r["early_stop"] is False
        assert_close_metrics(g, r)
    assert fused.shuffle_rng.bit_generator.state == plain.shuffle_rng.bit_generator.state
    assert_close_weights(fused.get_weights(), plain.get_weights())
    assert_close_weights(fused.train_step.get_state(), plain.train_step.get_state())  # Adam moments


MASKED_OBS = Dict({"observation": OBS, "action_mask": IntBox(0, 1, shape=(3,))})


def _masked_rollout(seed: int) -> dict:
    """A PPO rollout of a masked env (Dict observation, 3 actions, the taken one always legal)."""
    r = np.random.default_rng(seed)
    rollout = _ppo_rollout(seed)
    mask = (r.random((T, N, 3)) < 0.5).astype(np.int64)
    actions = r.integers(0, 3, (T, N))
    np.put_along_axis(mask, actions[..., None], 1, axis=-1)
    rollout["obs"] = {"observation": rollout["obs"], "action_mask": mask}
    rollout["actions"] = actions
    return rollout


#: torch static compiles the fused body and the single step: 15.7 s on one core at load ~3, heavy
MASKED_PARAMS = [pytest.param(p, id=_ids(p)) for p in EAGER] + [
    pytest.param(p, id=_ids(p), marks=pytest.mark.heavy) for p in STATIC if p[0] == "torch"
]


@pytest.mark.parametrize("pair", MASKED_PARAMS)
def test_ppo_fused_epochs_of_a_masked_dict_observation_equal_the_minibatch_loop(pair, monkeypatch):
    """A masked env's ``{observation, action_mask}`` rounds fuse too (one tensor per key)."""

    def make(fuse):
        cfg = PPOConfig(network={"hidden": [16]}, n_steps=T, batch_size=8, n_epochs=2, ent_coef=0.01, fuse_rounds=fuse)
        backend, spy = _backend(pair, monkeypatch)
        return PPOAgent(cfg, MASKED_OBS, Discrete(3), backend, seed=0, num_envs=N), spy

    (fused, spy), (plain, plain_spy) = make(True), make(False)
    rollouts = [_masked_rollout(20), _masked_rollout(21)]
    got = [fused.update({**r}) for r in rollouts]
    ref = [plain.update({**r}) for r in rollouts]
    assert spy.rounds == [4, 4] and plain_spy.rounds == []
    for g, r in zip(got, ref):
        assert_close_metrics(g, r)
    assert_close_weights(fused.get_weights(), plain.get_weights())
    assert_close_weights(fused.train_step.get_state(), plain.train_step.get_state())


@pytest.mark.parametrize("pair", EAGER[:1], ids=_ids)
@pytest.mark.parametrize("why", ["target_kl", "gradient_hook", "batch_size"])
def test_ppo_falls_back_to_the_minibatch_loop(pair, why, monkeypatch):
    extra: dict[str, Any] = {"target_kl": 100.0} if why == "target_kl" else {}  # never stops early
    if why == "batch_size":
        extra["batch_size"] = 6  # 16 samples: minibatches of 6, 6 and 4
    agent, spy = _ppo(pair, monkeypatch, fuse=True, **extra)
    plain, _ = _ppo(pair, monkeypatch, fuse=False, **extra)
    if why == "gradient_hook":
        agent.set_gradient_hook(lambda flat: flat)
        plain.set_gradient_hook(lambda flat: flat)
    got, ref = _drive_ppo(agent), _drive_ppo(plain)
    assert spy.rounds == []
    steps = 6 if why == "batch_size" else 4
    assert agent.updates == plain.updates == 2 * steps
    for g, r in zip(got, ref):
        assert g["gradient_steps"] == steps
        assert_close_metrics(g, r)
    assert_close_weights(agent.get_weights(), plain.get_weights())


# --- DQN and SAC ---------------------------------------------------------------------------
def _transitions(seed: int, n: int, actions) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    return {
        "obs": r.uniform(-1, 1, (n, 4)).astype(np.float32),
        "actions": actions(r, n),
        "rewards": r.standard_normal(n).astype(np.float32),
        "next_obs": r.uniform(-1, 1, (n, 4)).astype(np.float32),
        "terminals": r.random(n) < 0.2,
        "discounts": np.full(n, 0.99, np.float32),
    }


def _dqn_records(seed: int = 5, n: int = 40) -> dict[str, np.ndarray]:
    return _transitions(seed, n, lambda r, n: r.integers(0, 3, n).astype(np.int64))


def _sac_records(seed: int = 6, n: int = 40) -> dict[str, np.ndarray]:
    return _transitions(seed, n, lambda r, n: r.uniform(-1, 1, (n, 2)).astype(np.float32))


def _dqn(pair, monkeypatch, fuse: bool, **extra) -> tuple[DQNAgent, LoopSpy]:
    cfg = DQNConfig(
        network={"hidden": [16]},
        batch_size=8,
        learning_starts=0,
        train_freq=1,
        gradient_steps=4,
        target_update_interval=3,  # updates 3 and 6: inside the first and the second round
        fuse_rounds=fuse,
        optimizer={"learning_rate": 1e-2},
        **extra,
    )
    backend, spy = _backend(pair, monkeypatch)
    return DQNAgent(cfg, OBS, Discrete(3), backend, seed=0), spy


def _sac(pair, monkeypatch, fuse: bool) -> tuple[SACAgent, LoopSpy]:
    cfg = SACConfig(
        actor_network={"hidden": [16]},
        critic_network={"hidden": [16]},
        batch_size=8,
        learning_starts=0,
        train_freq=1,
        gradient_steps=3,
        target_update_interval=2,  # updates 2, 4, 6
        tau=0.5,
        fuse_rounds=fuse,
        optimizer={"learning_rate": 1e-2},
    )
    backend, spy = _backend(pair, monkeypatch)
    return SACAgent(cfg, OBS, FloatBox(-2.0, 2.0, shape=(2,)), backend, seed=0), spy


def _iql(pair, monkeypatch, fuse: bool, actions=None) -> tuple[IQLAgent, LoopSpy]:
    cfg = IQLConfig(
        actor_network={"hidden": [16]},
        critic_network={"hidden": [16]},
        batch_size=8,
        learning_starts=0,
        train_freq=1,
        gradient_steps=3,
        target_update_interval=2,
        tau=0.5,
        fuse_rounds=fuse,
        optimizer={"learning_rate": 1e-2},
    )
    backend, spy = _backend(pair, monkeypatch)
    actions = FloatBox(-2.0, 2.0, shape=(2,)) if actions is None else actions
    return IQLAgent(cfg, OBS, actions, backend, seed=0), spy


def _iql_discrete(pair, monkeypatch, fuse: bool) -> tuple[IQLAgent, LoopSpy]:
    return _iql(pair, monkeypatch, fuse, actions=Discrete(3))


def _bc(pair, monkeypatch, fuse: bool, actions=None) -> tuple[BCAgent, LoopSpy]:
    cfg = BCConfig(
        network={"hidden": [16]},
        batch_size=8,
        learning_starts=0,
        train_freq=1,
        gradient_steps=3,
        fuse_rounds=fuse,
        optimizer={"learning_rate": 1e-2},
    )
    backend, spy = _backend(pair, monkeypatch)
    actions = Discrete(3) if actions is None else actions
    return BCAgent(cfg, OBS, actions, backend, seed=0), spy


def _bc_continuous(pair, monkeypatch, fuse: bool) -> tuple[BCAgent, LoopSpy]:
    return _bc(pair, monkeypatch, fuse, actions=FloatBox(-2.0, 2.0, shape=(2,)))


def _drive_rounds(agent, records: dict[str, np.ndarray], rounds: int = 2) -> list[dict]:
    """Fill the memory, then run ``rounds`` scheduled update rounds; metrics after each."""
    agent.memory.insert(records)
    out = []
    for _ in range(rounds):
        agent.timesteps += 1  # one env step: train_freq 1 makes a round due
        assert agent.update() is not None
        out.append(agent.metrics())
    return out


OFF_POLICY = {
    "dqn": (_dqn, _dqn_records, 4),
    "sac": (_sac, _sac_records, 3),
    "iql": (_iql, _sac_records, 3),
    "iql_discrete": (_iql_discrete, _dqn_records, 3),
    "bc": (_bc, _dqn_records, 3),
    "bc_continuous": (_bc_continuous, _sac_records, 3),
}
OFF_CASES = [(a, p) for a in OFF_POLICY for p in EAGER] + [(a, p) for a in ("dqn", "iql") for p in STATIC]
# BC's compiled round on torch only (what bench_offline times): 14.5 s at load ~5, 7 CPU-s with imports
OFF_CASES += [("bc", p) for p in STATIC if p[0] == "torch"]
#: IQL's three compiled train steps under torch.compile took 48 s on CI's two cores: heavy (DQN's
#: torch static round and IQL's tf/jax static rounds stay in CI)
OFF_PARAMS = [
    pytest.param(
        a, p, id=f"{a}-{p[0]}-{p[1]}", marks=[pytest.mark.heavy] if (a, p) == ("iql", ("torch", "static")) else []
    )
    for a, p in OFF_CASES
]


@pytest.mark.parametrize("algo,pair", OFF_PARAMS)
def test_off_policy_fused_round_equals_the_step_loop(algo, pair, monkeypatch):
    make, records, k = OFF_POLICY[algo]
    fused, spy = make(pair, monkeypatch, fuse=True)
    plain, plain_spy = make(pair, monkeypatch, fuse=False)
    start = fused.get_weights()
    got, ref = _drive_rounds(fused, records()), _drive_rounds(plain, records())
    assert spy.rounds == [k, k] and plain_spy.rounds == []
    assert fused.updates == plain.updates == 2 * k and fused.weights_version == plain.weights_version == 2 * k
    for g, r in zip(got, ref):
        assert_close_metrics(g, r)
    weights = fused.get_weights()
    target = [name for name in weights if "target" in name]
    if not algo.startswith("bc"):  # BC has no target network
        assert target and any(not np.allclose(weights[n], start[n]) for n in target)  # the target moved
    assert any(not np.allclose(weights[n], start[n]) for n in weights)
    assert_close_weights(weights, plain.get_weights())
    assert fused.rng.bit_generator.state == plain.rng.bit_generator.state  # SAC: the same noise drawn
    for name, step in fused.train_steps().items():
        assert_close_weights(step.get_state(), plain.train_steps()[name].get_state())


@pytest.mark.parametrize("pair", EAGER[:1], ids=_ids)
def test_dqn_gradient_hook_keeps_the_step_loop(pair, monkeypatch):
    agent, spy = _dqn(pair, monkeypatch, fuse=True)
    agent.set_gradient_hook(lambda flat: flat)
    _drive_rounds(agent, _dqn_records(), rounds=1)
    assert spy.rounds == [] and agent.updates == 4


def _prioritized(pair, monkeypatch, fuse_prioritized: bool) -> tuple[DQNAgent, LoopSpy]:
    memory = PrioritizedReplaySettings(capacity=64, alpha=0.6, beta=0.4)
    return _dqn(pair, monkeypatch, fuse=True, memory=memory, fuse_prioritized_rounds=fuse_prioritized)


class MemoryLog:
    """Records the order of a memory's ``sample`` and ``update_priorities`` calls."""

    def __init__(self, memory, monkeypatch):
        self.calls: list[tuple[str, dict]] = []
        sample, update = memory.sample, memory.update_priorities

        def logged_sample(batch_size):
            out = sample(batch_size)
            self.calls.append(("sample", {k: np.array(v, copy=True) for k, v in out.items()}))
            return out

        def logged_update(indices, priorities):
            self.calls.append(("update", {"indices": np.array(indices), "priorities": np.array(priorities)}))
            return update(indices, priorities)

        monkeypatch.setattr(memory, "sample", logged_sample)
        monkeypatch.setattr(memory, "update_priorities", logged_update)


@pytest.mark.parametrize("pair", EAGER[:1], ids=_ids)
def test_prioritized_memory_keeps_per_step_sampling_by_default(pair, monkeypatch):
    agent, spy = _prioritized(pair, monkeypatch, fuse_prioritized=False)
    log = MemoryLog(agent.memory, monkeypatch)
    _drive_rounds(agent, _dqn_records(), rounds=1)
    assert spy.rounds == []
    assert [c for c, _ in log.calls] == ["sample", "update"] * 4


@pytest.mark.parametrize("pair", EAGER, ids=_ids)
def test_fuse_prioritized_rounds_samples_up_front_and_updates_after(pair, monkeypatch):
    agent, spy = _prioritized(pair, monkeypatch, fuse_prioritized=True)
    agent.memory.insert(_dqn_records())
    agent.memory.update_priorities(np.arange(40), np.linspace(0.1, 2.0, 40))  # unequal priorities
    log = MemoryLog(agent.memory, monkeypatch)
    # A step-by-step learner from the same initial weights, fed the K batches the round sampled.
    learner, _ = _prioritized(pair, monkeypatch, fuse_prioritized=False)
    agent.timesteps += 1
    agent.update()
    assert spy.rounds == [4]
    assert [c for c, _ in log.calls] == ["sample"] * 4 + ["update"] * 4
    samples = [d for c, d in log.calls if c == "sample"]
    updates = [d for c, d in log.calls if c == "update"]
    assert any(not np.allclose(s["weights"], 1.0) for s in samples)  # importance weights in play
    for sample, update in zip(samples, updates):
        result = learner.learn(sample)
        np.testing.assert_array_equal(update["indices"], sample["indices"])
        np.testing.assert_array_equal(result.indices, sample["indices"])
        np.testing.assert_allclose(update["priorities"], result.priorities, rtol=1e-5, atol=1e-6)
    assert agent.updates == learner.updates == 4
    assert_close_weights(agent.get_weights(), learner.get_weights())
