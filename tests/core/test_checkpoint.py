"""Checkpoints: round trip, atomic replacement, refusal of corrupt or mismatched checkpoints,
and npz files that are never unpickled.

Every test runs on two agents: a small numpy agent defined here (so the core venv, which has no
deep-learning backend, still tests ``rlgraph_core.checkpoint`` through the real
:class:`~rlgraph_core.agents.base.Agent` save/load code), and the DQN agent on the torch backend
(skipped where rlgraph-torch is not installed).
"""

from __future__ import annotations

import json
import pathlib
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core import checkpoint
from rlgraph_core.agents.base import Agent
from rlgraph_core.errors import CheckpointError
from rlgraph_core.memories import ReplayMemory
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.spaces import Discrete, FloatBox, from_gym

HAS_TORCH_BACKEND = "torch" in get_plugin_manager().names("backends")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny networks train much faster on one thread, above all on a busy machine."""
    if not HAS_TORCH_BACKEND:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------- agents under test
class NumpyBackend:
    """Just enough of the backend contract for :class:`Agent`'s weight handling: numpy variables."""

    name = "numpy-test"

    def to_numpy(self, x):
        """Variables are numpy arrays already."""
        return np.asarray(x)

    def assign_numpy(self, var, value):
        """Write ``value`` into the variable in place."""
        var[...] = value


class LinearAgent(Agent):
    """A linear greedy policy with a replay memory: the smallest agent with weights and state."""

    def __init__(self, observation_space, action_space, seed=0):
        super().__init__(
            SimpleNamespace(type="linear-test"), observation_space, action_space, NumpyBackend(), seed=seed
        )
        n_in, n_out = observation_space.shape[0], action_space.n
        self.w = self.rng.normal(size=(n_in, n_out)).astype(np.float32)
        self.b = self.rng.normal(size=(n_out,)).astype(np.float32)
        self.memory = ReplayMemory(1000, seed=seed)

    def act(self, obs, explore=True):
        """Greedy actions of the linear Q-function."""
        return np.argmax(np.asarray(obs, np.float32) @ self.w + self.b, axis=-1)

    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Store the step in the memory."""
        self.timesteps += len(obs)
        self.memory.insert(
            {
                "obs": np.asarray(obs, np.float32),
                "actions": np.asarray(actions),
                "rewards": np.asarray(rewards, np.float32),
            }
        )

    def update(self, batch=None):
        """A fake learning step that changes the weights."""
        if len(self.memory) == 0:
            return None
        self.w += 0.01 * self.memory.sample(8)["obs"].mean(axis=0)[:, None]
        self.updates += 1
        return {"loss": 0.0}

    def variables(self):
        """The two arrays, under scope-like names."""
        return {"linear/w": self.w, "linear/b": self.b}

    def get_state(self):
        """Memory plus counters."""
        arrays, counters = super().get_state()
        arrays.update({f"memory/{k}": v for k, v in self.memory.state_dict().items()})
        return arrays, counters

    def set_state(self, arrays, counters):
        """Memory first (it validates before changing), then counters."""
        self.memory.load_state_dict({k[7:]: v for k, v in arrays.items() if k.startswith("memory/")})
        super().set_state(arrays, counters)


def make_numpy_agent(env_id="CartPole-v1", seed=0):
    """A LinearAgent for ``env_id``'s spaces."""
    env = gym.make(env_id)
    return LinearAgent(from_gym(env.observation_space), from_gym(env.action_space), seed)


TORCH_OVERRIDES = [
    "agent.network.hidden=[16]",
    "agent.learning_starts=50",
    "agent.train_freq=25",
    "agent.gradient_steps=2",
    "agent.batch_size=16",
    "agent.memory.capacity=2000",
    "agent.target_update_interval=4",
    "env.num_envs=1",
]


def make_torch_agent(env_id="CartPole-v1", seed=0, overrides=()):
    """A small DQN agent on the torch backend."""
    from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
    from rlgraph_core.assemble import make_agent

    config = validate_config(
        apply_overrides(DEFAULT_CONFIG, [*TORCH_OVERRIDES, f"env.id={env_id}", f"train.seed={seed}", *overrides])
    )
    env = gym.make(env_id)
    return make_agent(config, env.observation_space, env.action_space)


@pytest.fixture(params=["numpy", "torch-dqn"])
def make(request):
    """A factory of fresh agents of one kind: ``make(env_id=..., seed=...)``."""
    if request.param == "torch-dqn":
        if not HAS_TORCH_BACKEND:
            pytest.skip("the torch backend (rlgraph-torch) is not installed")
        return make_torch_agent
    return make_numpy_agent


def play(agent, steps, seed=0, env_id="CartPole-v1"):
    """Run ``agent`` for ``steps`` env steps (observe + update), so weights, memory and counters move."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        action = agent.act(np.asarray(obs)[None])
        nxt, reward, term, trunc, _ = env.step(int(action[0]))
        agent.observe(
            np.asarray(obs)[None],
            action,
            np.array([reward]),
            np.asarray(nxt)[None],
            np.array([term]),
            np.array([trunc]),
        )
        agent.update()
        obs = nxt if not (term or trunc) else env.reset()[0]
    env.close()


def probe_obs(n=64, seed=1):
    """A fixed batch of CartPole-like observations."""
    return np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)


def assert_same_weights(a, b):
    """Same names, exactly equal arrays."""
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def weights_differ(a, b):
    """True if any array differs."""
    return any(not np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture
def saved(make, tmp_path):
    """An agent that has played a little, and the checkpoint it saved."""
    agent = make(seed=0)
    play(agent, 120)
    path = tmp_path / "ckpt"
    agent.save(path, {"config": {"note": "test"}})
    return agent, path


def assert_refused(make, path, fragment):
    """Loading ``path`` into a fresh agent raises CheckpointError with ``fragment`` and changes nothing."""
    fresh = make(seed=5)
    before = fresh.get_weights()
    counters = (fresh.timesteps, fresh.updates)
    with pytest.raises(CheckpointError) as info:
        fresh.load(path)
    assert fragment in str(info.value)
    assert_same_weights(fresh.get_weights(), before)
    assert (fresh.timesteps, fresh.updates) == counters
    assert len(fresh.memory) == 0
    return str(info.value)


# --------------------------------------------------------------------------- round trip
def test_round_trip_restores_weights_actions_counters_and_memory(make, saved):
    agent, path = saved
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "meta.json", "state.npz", "weights.npz"]
    fresh = make(seed=123)
    assert weights_differ(fresh.get_weights(), agent.get_weights())  # or the test proves nothing
    meta = fresh.load(path)
    assert meta["agent_type"] == agent.config.type
    assert_same_weights(fresh.get_weights(), agent.get_weights())
    obs = probe_obs()
    np.testing.assert_array_equal(fresh.act(obs, explore=False), agent.act(obs, explore=False))
    assert agent.timesteps == 120 and agent.updates > 0  # counters that moved, so restoring them shows
    assert (fresh.timesteps, fresh.updates) == (agent.timesteps, agent.updates)
    assert len(fresh.memory) == len(agent.memory) > 0
    # the memory's sampling generator comes back too: both draw the same batch
    a, b = agent.memory.sample(16), fresh.memory.sample(16)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert json.loads((path / "config.json").read_text()) == {"note": "test"}


def test_torch_dqn_resume_continues_identically(tmp_path):
    """Optimizer state, memory, counters and RNGs restored: the next updates match exactly."""
    if not HAS_TORCH_BACKEND:
        pytest.skip("the torch backend (rlgraph-torch) is not installed")
    agent = make_torch_agent(seed=0)
    play(agent, 150)
    assert agent.updates > 0 and agent.train_step.get_state()  # Adam moments exist
    agent.save(tmp_path / "ckpt")
    state = np.load(tmp_path / "ckpt" / "state.npz", allow_pickle=False)
    assert "memory/size" in state.files and int(state["memory/size"]) == len(agent.memory)
    assert any(k.startswith("optimizer/") for k in state.files)
    fresh = make_torch_agent(seed=9)
    fresh.load(tmp_path / "ckpt")
    assert len(fresh.memory) == len(agent.memory)
    assert fresh._last_train == agent._last_train
    for a in (agent, fresh):
        play(a, 60, seed=3)
    assert agent.updates == fresh.updates
    assert_same_weights(fresh.get_weights(), agent.get_weights())


def test_torch_dqn_memory_of_another_capacity_is_refused_and_agent_unchanged(tmp_path):
    if not HAS_TORCH_BACKEND:
        pytest.skip("the torch backend (rlgraph-torch) is not installed")
    agent = make_torch_agent(seed=0)
    play(agent, 80)
    agent.save(tmp_path / "ckpt")
    other = make_torch_agent(seed=1, overrides=["agent.memory.capacity=500"])
    before = other.get_weights()
    with pytest.raises(CheckpointError, match="replay memory cannot be restored"):
        other.load(tmp_path / "ckpt")
    assert_same_weights(other.get_weights(), before)
    assert (other.timesteps, len(other.memory)) == (0, 0)


# --------------------------------------------------------------------------- atomic saves
def test_saving_over_a_checkpoint_replaces_it(make, saved):
    agent, path = saved
    old = agent.get_weights()
    play(agent, 60, seed=1)
    assert weights_differ(agent.get_weights(), old)
    agent.save(path)
    fresh = make(seed=7)
    fresh.load(path)
    assert_same_weights(fresh.get_weights(), agent.get_weights())
    assert fresh.timesteps == 180
    assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"]  # no temp or .old folders left


@pytest.mark.parametrize("fail_on_call", [1, 2])
def test_failure_mid_save_keeps_the_old_checkpoint(make, saved, monkeypatch, fail_on_call):
    agent, path = saved
    old = agent.get_weights()
    play(agent, 60, seed=1)
    real_savez, calls = np.savez, []

    def failing_savez(file, *args, **kwds):
        calls.append(file)
        if len(calls) == fail_on_call:
            raise OSError("disk full (simulated)")
        return real_savez(file, *args, **kwds)

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(OSError, match="disk full"):
        agent.save(path)
    monkeypatch.undo()
    assert len(calls) == fail_on_call
    assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"]
    fresh = make(seed=7)
    fresh.load(path)
    assert_same_weights(fresh.get_weights(), old)
    assert fresh.timesteps == 120


def test_failure_while_swapping_in_the_new_checkpoint_restores_the_old(make, saved, monkeypatch):
    agent, path = saved
    old = agent.get_weights()
    play(agent, 30, seed=1)
    real_replace = checkpoint.os.replace

    def failing_replace(src, dst):
        if pathlib.Path(dst) == path and pathlib.Path(src).name != ".ckpt.old":  # new one into place
            raise OSError("rename failed (simulated)")
        return real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", failing_replace)
    with pytest.raises(OSError, match="rename failed"):
        agent.save(path)
    monkeypatch.undo()
    assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"]
    fresh = make(seed=7)
    fresh.load(path)
    assert_same_weights(fresh.get_weights(), old)


# --------------------------------------------------------------------------- refused checkpoints
def test_truncated_weights_are_refused(make, saved):
    _, path = saved
    data = (path / "weights.npz").read_bytes()
    (path / "weights.npz").write_bytes(data[: len(data) // 2])
    assert_refused(make, path, "weights.npz")


def edit_meta(path, change):
    """Apply ``change`` to the checkpoint's meta.json dict in place."""
    meta = json.loads((path / "meta.json").read_text())
    change(meta)
    (path / "meta.json").write_text(json.dumps(meta))


def test_manifest_shape_mismatch_is_refused(make, saved):
    _, path = saved

    def grow_first_shape(meta):
        name = sorted(meta["weights"])[0]
        meta["weights"][name][0] = [d + 1 for d in meta["weights"][name][0]]

    edit_meta(path, grow_first_shape)
    assert_refused(make, path, "the manifest says")


def test_manifest_naming_other_arrays_is_refused(make, saved):
    _, path = saved
    edit_meta(path, lambda meta: meta["weights"].update({"extra/w": [[1], "float32"]}))
    assert_refused(make, path, "corrupt")


def test_garbled_manifest_entry_is_refused(make, saved):
    _, path = saved

    def garble(meta):
        meta["weights"][sorted(meta["weights"])[0]] = "float32"

    edit_meta(path, garble)
    assert_refused(make, path, "not [shape, dtype]")


@pytest.mark.parametrize("name", ["meta.json", "config.json", "weights.npz", "state.npz"])
def test_missing_file_is_refused(make, saved, name):
    _, path = saved
    (path / name).unlink()
    assert_refused(make, path, f"lacks '{name}'")


def test_corrupt_json_is_refused(make, saved):
    _, path = saved
    (path / "meta.json").write_text('{"format_version": 1, "agent_type": ')
    assert_refused(make, path, "corrupt JSON")


def test_wrong_format_version_is_refused(make, saved):
    _, path = saved
    edit_meta(path, lambda meta: meta.update(format_version=99))
    assert_refused(make, path, "format version 99")


def test_missing_directory_is_refused(make, tmp_path):
    assert_refused(make, tmp_path / "nowhere", "does not exist")


def test_other_environment_is_refused(make, saved):
    _, path = saved
    fresh = make(env_id="Acrobot-v1", seed=5)
    before = fresh.get_weights()
    with pytest.raises(CheckpointError, match="observation space") as info:
        fresh.load(path)
    assert "same environment" in str(info.value)
    assert_same_weights(fresh.get_weights(), before)


def test_other_agent_type_is_refused(make, saved):
    _, path = saved
    edit_meta(path, lambda meta: meta.update(agent_type="ppo"))
    msg = assert_refused(make, path, "holds a 'ppo' agent")
    assert "cannot be loaded into" in msg


def test_unreadable_space_is_refused(make, saved):
    _, path = saved
    edit_meta(path, lambda meta: meta.update(observation_space={"type": "NoSuchSpace"}))
    assert_refused(make, path, "unreadable observation_space")


def test_weights_of_another_network_are_refused_without_partial_loading(saved, tmp_path):
    """Names match but one shape differs (consistent manifest): set_weights refuses before assigning."""
    agent, path = saved
    weights = agent.get_weights()
    name = sorted(weights)[-1]
    weights[name] = np.zeros(weights[name].shape + (2,), weights[name].dtype)
    np.savez(path / "weights.npz", **weights)
    edit_meta(path, lambda meta: meta["weights"].update({name: [list(weights[name].shape), str(weights[name].dtype)]}))
    fresh = make_numpy_agent(seed=5) if isinstance(agent, LinearAgent) else make_torch_agent(seed=5)
    before = fresh.get_weights()
    with pytest.raises(CheckpointError, match="shape"):
        fresh.load(path)
    assert_same_weights(fresh.get_weights(), before)


class _TouchOnUnpickle:
    """Unpickling this object creates a file: proof that pickle ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_npz_with_object_array_is_refused_without_unpickling(make, saved, tmp_path):
    _, path = saved
    marker = tmp_path / "pickle-ran"
    meta = json.loads((path / "meta.json").read_text())
    payload = {k: np.array([_TouchOnUnpickle(marker)], dtype=object) for k in meta["weights"]}
    np.savez(path / "weights.npz", **payload)  # numpy pickles object arrays when saving
    msg = assert_refused(make, path, "weights.npz")
    assert "allow_pickle" in msg or "Object arrays" in msg
    assert not marker.exists()


def test_state_npz_is_loaded_without_pickle_too(make, saved, tmp_path):
    _, path = saved
    marker = tmp_path / "pickle-ran"
    np.savez(path / "state.npz", x=np.array([_TouchOnUnpickle(marker)], dtype=object))
    assert_refused(make, path, "state.npz")
    assert not marker.exists()


def test_numpy_agent_spaces_are_what_the_checkpoint_records(saved):
    """Guards the test agent itself: it records real spaces, so mismatches above are meaningful."""
    agent, path = saved
    meta = json.loads((path / "meta.json").read_text())
    assert meta["observation_space"]["shape"] == [4]
    assert meta["action_space"]["n"] == 2
    assert isinstance(agent.observation_space, FloatBox) and isinstance(agent.action_space, Discrete)
