"""Checkpoints: round trip, saves atomic at every instant (a crash injected at each step of a
save, and real SIGKILLs), periodic checkpoints, refusal of corrupt or mismatched checkpoints
(every array checked against the agent before anything changes), and npz files that are never
unpickled.

Every test runs on two agents: a small numpy agent defined here (so the core venv, which has no
deep-learning backend, still tests ``rlgraph_core.checkpoint`` through the real
:class:`~rlgraph_core.agents.base.Agent` save/load code), and the DQN agent on the torch backend
(skipped where rlgraph-torch is not installed).
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
import zipfile
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
from numpy.lib import format as npy_format

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

    def replay_record_spaces(self):
        """What :meth:`observe` inserts, so checkpoints' records are checked against it."""
        return {
            "obs": FloatBox(shape=self.observation_space.shape),
            "actions": Discrete(self.action_space.n),
            "rewards": FloatBox(shape=()),
        }


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
def store_of(path):
    """The hidden folder that holds the versions ``path`` links to."""
    return path.parent / f".{path.name}.versions"


def assert_tidy(path):
    """After a completed save: the link, one version in its store, no temporaries or leftovers."""
    assert path.is_symlink() and path.is_dir()
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, store_of(path).name])
    assert [p.name for p in store_of(path).iterdir()] == [os.readlink(path).split("/")[-1]]


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
    assert_tidy(path)  # no temp or old folders left


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
    assert_tidy(path)
    fresh = make(seed=7)
    fresh.load(path)
    assert_same_weights(fresh.get_weights(), old)
    assert fresh.timesteps == 120


class Killed(BaseException):
    """A simulated kill: not an Exception, so no ``except Exception`` handler swallows it."""


class CrashInjector:
    """Counts every file-system step of a save and "kills" the process at step ``crash_at``.

    After the crash every further step fails too (a dead process does nothing more), so even
    the save's own clean-up handlers cannot run: what is left on disk is what a SIGKILL at that
    instant would leave.
    """

    STEPS = [
        (os, "mkdir"),
        (os, "rename"),
        (os, "replace"),
        (os, "symlink"),
        (os, "unlink"),
        (os, "rmdir"),
        (os, "fsync"),
        (shutil, "rmtree"),
        (np, "savez"),
        (checkpoint.store, "_write_file"),
    ]

    def __init__(self, monkeypatch, crash_at):
        self.crash_at, self.calls, self.dead, self.at = crash_at, 0, False, None
        for owner, name in self.STEPS:
            if hasattr(owner, name):
                monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name), name))

    def _wrap(self, real, name):
        def step(*args, **kwargs):
            self.calls += 1
            if self.dead or self.calls == self.crash_at:
                self.dead = True
                self.at = self.at or f"{name}{args[:2]}"
                raise Killed(f"killed at step {self.calls} ({name})")
            return real(*args, **kwargs)

        return step


def no_symlinks(monkeypatch):
    """A file system without symbolic links (os.symlink fails)."""

    def refuse(*args, **kwargs):
        raise OSError(1, "Operation not permitted (simulated: no symlinks)")

    monkeypatch.setattr(os, "symlink", refuse)


def shift_weights(agent, by):
    """Move every weight by ``by`` (and count a step) so two checkpoints are told apart."""
    agent.set_weights({k: v + np.asarray(by, v.dtype) for k, v in agent.get_weights().items()})
    agent.timesteps += 1


@pytest.mark.parametrize("layout", ["link", "legacy-folder", "no-symlinks"])
def test_a_crash_at_every_step_of_a_save_leaves_the_old_or_the_new_checkpoint(make, tmp_path, monkeypatch, layout):
    """Inject a kill at step 1, 2, ... of a save over an existing checkpoint until a save completes.

    After each: loading the path gives exactly the old or exactly the new checkpoint (weights
    and counters from one save), never an error; old until the commit point, new from then on;
    and the next save cleans up whatever the killed one left.
    """
    if layout != "link" and make is make_torch_agent:
        pytest.skip("the layouts differ only in file-system steps: the numpy agent covers them")
    agent = make(seed=0)
    play(agent, 40)
    outcomes = []
    for crash_at in range(1, 200):
        path = tmp_path / f"k{crash_at}" / "ckpt"
        with monkeypatch.context() as mp:
            if layout == "no-symlinks":
                no_symlinks(mp)
            if layout == "legacy-folder":  # a checkpoint folder as saves before the link layout left it
                agent.save(tmp_path / "legacy")
                shutil.copytree(checkpoint.resolve_checkpoint(tmp_path / "legacy"), path)
            else:
                agent.save(path)
        old, old_steps = agent.get_weights(), agent.timesteps
        shift_weights(agent, 1.0)
        new, new_steps = agent.get_weights(), agent.timesteps
        with monkeypatch.context() as mp:
            if layout == "no-symlinks":
                no_symlinks(mp)
            injector = CrashInjector(mp, crash_at)
            try:
                agent.save(path)
                killed = False
            except Killed:
                killed = True
        fresh = make(seed=9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "a save was interrupted" where the link is missing
            fresh.load(path)
        got = fresh.get_weights()
        if weights_differ(got, new):
            assert_same_weights(got, old)
            assert fresh.timesteps == old_steps
            outcomes.append("old")
        else:
            assert fresh.timesteps == new_steps
            outcomes.append("new")
        with monkeypatch.context() as mp:  # the next save repairs and tidies up
            if layout == "no-symlinks":
                no_symlinks(mp)
            shift_weights(agent, 1.0)
            agent.save(path)
        fresh = make(seed=9)
        fresh.load(path)
        assert_same_weights(fresh.get_weights(), agent.get_weights())
        if layout == "no-symlinks":
            assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"]
            assert not path.is_symlink() and (path / "meta.json").is_file()
        else:
            assert_tidy(path)
        if not killed:
            break
        assert injector.dead, injector.at
    assert outcomes[-1] == "new" and "old" in outcomes, outcomes
    commit = outcomes.index("new")
    assert outcomes[commit:] == ["new"] * (len(outcomes) - commit), outcomes  # old until the commit, then new
    assert len(outcomes) > 10  # the save really has many steps to crash at


SAVE_LOOP = """
import sys
import numpy as np

sys.path.insert(0, sys.argv[1])
from test_checkpoint import make_numpy_agent

agent = make_numpy_agent()
i = int(sys.argv[3])
while True:
    i += 1
    agent.set_weights({k: np.full_like(v, i) for k, v in agent.get_weights().items()})
    agent.timesteps = i
    agent.save(sys.argv[2])
    print(i, flush=True)
"""

#: For each line "k value" from stdin: fork a process that saves ``value`` and stops at its k-th
#: file-system step (printing its pid), so the test can SIGKILL it exactly there.
SAVE_AND_STOP_AT_STEP = """
import os
import shutil
import sys
import time
import numpy as np

sys.path.insert(0, sys.argv[1])
from test_checkpoint import make_numpy_agent

agent = make_numpy_agent()
print("READY", flush=True)
for line in sys.stdin:
    k, value = map(int, line.split())
    pid = os.fork()
    if pid == 0:
        calls = [0]

        def stopping(real, name):
            def step(*args, **kwargs):
                calls[0] += 1
                if calls[0] == k:
                    print(f"STOPPED {os.getpid()} {name}", flush=True)
                    while True:
                        time.sleep(1)
                return real(*args, **kwargs)

            return step

        for owner, name in [(os, "mkdir"), (os, "rename"), (os, "replace"), (os, "symlink"), (os, "unlink"),
                            (os, "rmdir"), (os, "fsync"), (shutil, "rmtree"), (np, "savez")]:
            setattr(owner, name, stopping(getattr(owner, name), name))
        agent.set_weights({n: np.full_like(v, value) for n, v in agent.get_weights().items()})
        agent.timesteps = value
        agent.save(sys.argv[2])
        print(f"DONE {os.getpid()}", flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    print("REAPED", flush=True)
"""


def start_script(tmp_path, source, *args, stdin=None):
    """Run ``source`` as a script in a fresh Python (killed after 60 s at the latest)."""
    script = tmp_path / f"script{len(list(tmp_path.glob('script*')))}.py"
    script.write_text(source)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(pathlib.Path(__file__).parent), *map(str, args)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, proc.kill)  # never hang the test run
    watchdog.start()
    return proc, watchdog


def stop_script(proc, watchdog):
    watchdog.cancel()
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


def load_value(path):
    """Load ``path`` into a fresh agent: the one value all its weights hold (one save wrote them all)."""
    fresh = make_numpy_agent(seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "a save was interrupted" where the link is missing
        fresh.load(path)
    values = {float(x) for v in fresh.get_weights().values() for x in np.unique(v)}
    assert len(values) == 1, values  # every weight from one save
    (value,) = values
    assert fresh.timesteps == int(value)  # and meta.json from the same save
    return int(value)


def test_a_process_killed_by_sigkill_while_saving_leaves_a_loadable_checkpoint(tmp_path):
    """Real SIGKILLs sent to saving processes.

    1. At every file-system step of a save in turn: a forked process saves and stops at step k;
       the test SIGKILLs it there; the path then loads as the old or the new checkpoint.
    2. At random moments of a loop of saves: the path loads, and no completed save is lost.
    """
    path = tmp_path / "run" / "checkpoint"
    proc, watchdog = start_script(tmp_path, SAVE_AND_STOP_AT_STEP, path, stdin=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == "READY"
        proc.stdin.write("0 1\n")  # a complete first save (k = 0: never stops)
        proc.stdin.flush()
        assert proc.stdout.readline().split()[0] == "DONE" and proc.stdout.readline().strip() == "REAPED"
        value, outcomes = 1, []
        for k in range(1, 200):
            proc.stdin.write(f"{k} {value + 1}\n")
            proc.stdin.flush()
            report = proc.stdout.readline().split()
            if report[0] == "STOPPED":
                os.kill(int(report[1]), signal.SIGKILL)
            assert proc.stdout.readline().strip() == "REAPED"
            got = load_value(path)
            assert got in (value, value + 1), (k, report, got)
            outcomes.append(got == value + 1)
            value = got
            if report[0] == "DONE":
                break
    finally:
        stop_script(proc, watchdog)
    assert outcomes[-1] and not all(outcomes) and len(outcomes) > 10, outcomes

    rng = random.Random(0)
    for _ in range(1):  # more rounds: more random moments, ~1.5 s each
        proc, watchdog = start_script(tmp_path, SAVE_LOOP, path, value)
        try:
            done = [int(proc.stdout.readline()) for _ in range(3)]  # saves that completed
            time.sleep(rng.uniform(0.0, 0.02))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            done += [int(line) for line in proc.stdout.read().split()]
        finally:
            stop_script(proc, watchdog)
        assert proc.returncode == -signal.SIGKILL
        value = load_value(path)
        assert value >= done[-1]  # a save that completed is never lost


# --------------------------------------------------------------------------- periodic checkpoints
def test_periodic_checkpoints_keep_the_newest_and_point_latest_at_the_last(tmp_path):
    agent = make_numpy_agent(seed=0)
    run = tmp_path / "run"
    assert checkpoint.latest_checkpoint(run) is None
    written = []
    for step in (100, 200, 300, 400):
        shift_weights(agent, 1.0)
        written.append(checkpoint.save_periodic(agent, run, step, {"config": {"n": step}}, keep=2))
    assert written[-1] == run / "checkpoints" / "step-400"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "step-300", "step-400"]
    assert os.readlink(run / "checkpoints" / "latest") == "step-400"
    assert checkpoint.latest_checkpoint(run) == run / "checkpoints" / "step-400"
    meta, config = checkpoint.read_meta(run / "checkpoints" / "latest")
    assert meta["periodic_step"] == 400 and config == {"n": 400}
    fresh = make_numpy_agent(seed=5)
    fresh.load(checkpoint.latest_checkpoint(run))
    assert_same_weights(fresh.get_weights(), agent.get_weights())
    # the same step again never touches the complete folder of that name
    assert checkpoint.save_periodic(agent, run, 400, {}, keep=2).name == "step-400.1"
    # a final checkpoint with more env steps is the newest; with fewer, the periodic one is
    agent.timesteps += 10
    agent.save(run / "checkpoint")
    assert checkpoint.latest_checkpoint(run) == run / "checkpoint"
    checkpoint.save_periodic(agent, run, 500, {}, keep=2)
    assert checkpoint.latest_checkpoint(run) == run / "checkpoint"  # a tie: the final one
    agent.timesteps += 1
    checkpoint.save_periodic(agent, run, 600, {}, keep=2)
    assert checkpoint.latest_checkpoint(run) == run / "checkpoints" / "step-600"


def test_latest_checkpoint_without_a_usable_latest_link_takes_the_highest_complete_step(tmp_path):
    agent = make_numpy_agent(seed=0)
    run = tmp_path / "run"
    for step in (10, 20):
        checkpoint.save_periodic(agent, run, step, {})
    store = run / "checkpoints"
    (store / "latest").unlink()
    (store / ".tmp-abcd").mkdir()  # what a killed save leaves
    (store / "step-30").mkdir()  # not complete: never a candidate
    assert checkpoint.latest_checkpoint(run) == store / "step-20"
    with pytest.warns(UserWarning, match="save was interrupted"):
        make_numpy_agent(seed=1).load(store / "latest")
    checkpoint.save_periodic(agent, run, 40, {})
    assert not (store / ".tmp-abcd").exists()
    assert checkpoint.latest_checkpoint(run) == store / "step-40"


def test_adopt_checkpoint_copies_a_snapshot_into_the_run_as_its_newest_and_refuses_a_corrupt_one(tmp_path):
    """What the Ray watchdog does with the driver's RAM snapshot once Ray ended the driver."""
    agent = make_numpy_agent(seed=0)
    play(agent, 50)
    run = tmp_path / "run"
    checkpoint.save_periodic(agent, run, 20, {"config": {"n": 20}})
    snapshot = tmp_path / "shm" / "checkpoint"
    checkpoint.save_checkpoint(agent, snapshot, {"config": {"n": 50}})
    adopted = checkpoint.adopt_checkpoint(snapshot, run)
    assert adopted == run / "checkpoints" / f"step-{agent.timesteps}"
    assert checkpoint.latest_checkpoint(run) == adopted
    assert os.readlink(run / "checkpoints" / "latest") == adopted.name
    assert (run / "checkpoints" / "step-20").is_dir()  # older periodic ones are kept
    fresh = make_numpy_agent(seed=5)
    fresh.load(checkpoint.latest_checkpoint(run))
    assert_same_weights(fresh.get_weights(), agent.get_weights())
    assert fresh.timesteps == agent.timesteps and len(fresh.memory) == len(agent.memory)
    assert checkpoint.adopt_checkpoint(snapshot, run).name == f"step-{agent.timesteps}.1"  # never overwrites

    folder = checkpoint.resolve_checkpoint(snapshot)
    data = bytearray((folder / "weights.npz").read_bytes())
    data[len(data) // 3] ^= 0xFF  # a flipped bit inside the array data: only the CRC sees it
    (folder / "weights.npz").write_bytes(bytes(data))
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    with pytest.raises(CheckpointError, match="weights.npz"):
        checkpoint.adopt_checkpoint(snapshot, run)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before  # nothing half-copied is left
    (folder / "weights.npz").unlink()
    with pytest.raises(CheckpointError, match="lacks 'weights.npz'"):
        checkpoint.adopt_checkpoint(snapshot, run)


def test_periodic_keep_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="keep"):
        checkpoint.save_periodic(make_numpy_agent(), tmp_path, 1, {}, keep=0)


def test_leftovers_of_an_interrupted_save_of_the_previous_layout_are_recovered(tmp_path):
    """The state issue 8 reported: a kill between the two renames left '.ckpt.old' plus a temp
    folder and no 'ckpt'. Loading recovers the old checkpoint; the next save cleans up."""
    agent = make_numpy_agent(seed=0)
    path = tmp_path / "ckpt"
    agent.save(tmp_path / "src")
    shutil.copytree(checkpoint.resolve_checkpoint(tmp_path / "src"), tmp_path / ".ckpt.old")
    shutil.copytree(checkpoint.resolve_checkpoint(tmp_path / "src"), tmp_path / ".ckpt.x1y2z3w4")
    shutil.rmtree(tmp_path / ".src.versions")
    (tmp_path / "src").unlink()
    fresh = make_numpy_agent(seed=4)
    with pytest.warns(UserWarning, match="save was interrupted"):
        fresh.load(path)
    assert_same_weights(fresh.get_weights(), agent.get_weights())
    shift_weights(agent, 1.0)
    agent.save(path)
    assert_tidy(path)


def test_save_never_replaces_a_folder_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    with pytest.raises(CheckpointError, match="not an rlgraph checkpoint"):
        make_numpy_agent().save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"


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


# --------------------------------------------------------------------------- every array checked against the agent
def rewrite_npz(path, name, change):
    """Apply ``change`` to the arrays of ``path/name`` (a dict) and keep the manifest consistent,
    as a checkpoint would look that was written that way."""
    key = {"weights.npz": "weights", "state.npz": "state"}[name]
    with np.load(path / name, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    change(arrays)
    np.savez(path / name, **arrays)
    edit_meta(path, lambda meta: meta.update({key: {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()}}))


def test_float_weights_stored_as_int64_are_refused(make, saved):
    """Issue 8: int64 weights with a matching manifest loaded silently (eval return 9 instead of 203)."""
    _, path = saved

    def to_int64(arrays):
        for k in arrays:
            arrays[k] = np.round(arrays[k]).astype(np.int64)

    rewrite_npz(path, "weights.npz", to_int64)
    msg = assert_refused(make, path, "is stored as int64")
    assert "float32" in msg and "weights.npz" in msg


def test_weights_stored_as_strings_are_refused_and_nothing_changes(make, saved):
    """Issue 8: string weights raised a traceback after 4 arrays had changed."""
    _, path = saved

    def to_str(arrays):
        for k in arrays:
            arrays[k] = arrays[k].astype(str)

    rewrite_npz(path, "weights.npz", to_str)
    msg = assert_refused(make, path, "is stored as <U")
    assert "float" in msg


def test_set_weights_checks_every_array_before_assigning_any(make):
    agent = make(seed=0)
    before = agent.get_weights()
    bad = {k: v + 1 for k, v in before.items()}
    bad[sorted(bad)[-1]] = bad[sorted(bad)[-1]].astype(str)  # only the last one is wrong
    with pytest.raises(CheckpointError, match="No weight was changed"):
        agent.set_weights(bad)
    assert_same_weights(agent.get_weights(), before)


def test_replay_records_of_another_shape_are_refused(make, saved):
    _, path = saved

    def widen_obs(arrays):
        obs = arrays["memory/data/obs"]
        arrays["memory/data/obs"] = np.concatenate([obs, obs[:, :1]], axis=1)

    rewrite_npz(path, "state.npz", widen_obs)
    msg = assert_refused(make, path, "records of shape (5,)")
    assert "memory/data/obs" in msg and "state.npz" in msg and "(4,)" in msg


def test_replay_actions_outside_the_action_space_are_refused(make, saved):
    _, path = saved

    def bad_action(arrays):
        arrays["memory/data/actions"][3] = 7  # CartPole has actions 0 and 1

    rewrite_npz(path, "state.npz", bad_action)
    msg = assert_refused(make, path, "outside the bounds")
    assert "memory/data/actions" in msg and "7" in msg


def test_replay_records_of_another_dtype_are_refused(make, saved):
    _, path = saved

    def float_actions(arrays):
        arrays["memory/data/actions"] = arrays["memory/data/actions"].astype(np.float64)

    rewrite_npz(path, "state.npz", float_actions)
    assert_refused(make, path, "dtype float64")


def test_torch_optimizer_state_of_another_shape_is_refused(tmp_path):
    if not HAS_TORCH_BACKEND:
        pytest.skip("the torch backend (rlgraph-torch) is not installed")
    agent = make_torch_agent(seed=0)
    play(agent, 80)
    agent.save(tmp_path / "ckpt")

    def grow(arrays):
        arrays["optimizer/q/0/exp_avg"] = np.zeros(arrays["optimizer/q/0/exp_avg"].shape + (2,), np.float32)

    rewrite_npz(tmp_path / "ckpt", "state.npz", grow)
    assert_refused(make_torch_agent, tmp_path / "ckpt", "optimizer/q/0/exp_avg")


HUGE = 10**13


def npy_header_only(shape, descr="<f4"):
    """The bytes of an .npy file whose header claims ``shape`` but that holds no data."""
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def replace_member_with_huge_header(path, name, array, shape, descr):
    """Rewrite ``path/name`` with member ``array`` replaced by a header claiming ``shape``; fix the manifest."""
    key = {"weights.npz": "weights", "state.npz": "state"}[name]
    src = zipfile.ZipFile(path / name)
    members = {m: src.read(m) for m in src.namelist()}
    src.close()
    members[array + ".npy"] = npy_header_only(shape, descr)
    with zipfile.ZipFile(path / name, "w") as out:
        for m, data in members.items():
            out.writestr(m, data)
    edit_meta(path, lambda meta: meta[key].update({array: [list(shape), str(np.dtype(descr))]}))


@pytest.mark.parametrize(
    "name, array, shape, descr, fragment",
    [
        ("weights.npz", None, (HUGE,), "<f4", "expects"),
        ("state.npz", "memory/data/obs", (HUGE, 4), "<f4", "holds at most"),
        ("state.npz", "memory/rng_state", (HUGE,), "<u8", "bytes a state array"),
    ],
)
def test_an_array_whose_header_claims_1e13_elements_is_refused_fast(make, saved, name, array, shape, descr, fragment):
    """Issue 8: such an entry exhausted memory. Its header alone is refused, before any data is read."""
    _, path = saved
    if array is None:
        array = sorted(json.loads((path / "meta.json").read_text())["weights"])[0]
    replace_member_with_huge_header(path, name, array, shape, descr)
    start = time.perf_counter()
    msg = assert_refused(make, path, fragment)
    assert time.perf_counter() - start < 5
    assert array in msg and name in msg and str(HUGE) in msg


# --------------------------------------------------------------------------- counters
def test_a_checkpoint_without_counters_is_refused_for_training_and_warns_for_evaluation(make, saved):
    """Issue 8: it resumed silently from step 0."""
    agent, path = saved
    edit_meta(path, lambda meta: meta.pop("counters"))
    msg = assert_refused(make, path, "cannot be resumed from")
    assert "no 'counters'" in msg and "for_training=False" in msg
    fresh = make(seed=5)
    with pytest.warns(UserWarning, match="evaluation only"):
        fresh.load(path, for_training=False)
    assert_same_weights(fresh.get_weights(), agent.get_weights())
    assert len(fresh.memory) == 0  # evaluation loads the weights only


def test_counters_lacking_updates_are_refused_for_training(make, saved):
    _, path = saved
    edit_meta(path, lambda meta: meta["counters"].pop("updates"))
    assert_refused(make, path, "lack 'updates'")


def test_counters_that_are_not_counts_are_refused(make, saved):
    _, path = saved
    edit_meta(path, lambda meta: meta["counters"].update(timesteps=-3))
    assert_refused(make, path, "timesteps=-3")


def test_evaluation_only_load_does_not_read_the_state(make, saved):
    agent, path = saved
    (path / "state.npz").write_bytes(b"garbage")
    fresh = make(seed=5)
    fresh.load(path, for_training=False)
    assert_same_weights(fresh.get_weights(), agent.get_weights())


def test_remove_checkpoint_deletes_the_link_and_its_versions(tmp_path):
    agent = make_numpy_agent()
    agent.save(tmp_path / "ckpt")
    (tmp_path / "other").mkdir()
    checkpoint.remove_checkpoint(tmp_path / "ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]
    checkpoint.remove_checkpoint(tmp_path / "ckpt")  # nothing there: no error
    with pytest.raises(CheckpointError, match="does not exist"):
        make_numpy_agent().load(tmp_path / "ckpt")


# --------------------------------------------------------------------------- hostile files, non-finite weights (issue 19)
def add_zero_member(path, name, nbytes, trailing=0):
    """Add to ``path`` a deflated ``name.npy`` of ``nbytes`` zero bytes of float32 (+ ``trailing`` junk bytes)."""
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (nbytes // 4,)})
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open(name + ".npy", "w", force_zip64=True) as f:
            f.write(header.getvalue())
            chunk = bytes(2**20)
            for _ in range((nbytes + trailing) // len(chunk)):
                f.write(chunk)


def test_state_arrays_this_agent_does_not_keep_are_refused_from_their_names_before_decompressing(make, saved):
    """Issue 19: extra arrays inflating to gigabytes were all read before 'unexpected keys' refused them."""
    _, path = saved
    real = path.resolve()
    add_zero_member(real / "state.npz", "junk", 2**26)
    edit_meta(path, lambda meta: meta["state"].update(junk=[[2**24], "float32"]))
    msg = assert_refused(make, path, "is not state this agent keeps")
    assert "'junk'" in msg


def test_a_member_that_inflates_beyond_its_header_is_refused(make, saved):
    _, path = saved
    add_zero_member(path.resolve() / "state.npz", "memory/rng_state_extra", 64, trailing=2**24)
    edit_meta(path, lambda meta: meta["state"].update({"memory/rng_state_extra": [[16], "float32"]}))
    assert_refused(make, path, "inflates to")


def test_no_checkpoint_is_written_with_non_finite_weights(make, saved):
    """Issue 19: all-NaN weights replaced good checkpoints."""
    from rlgraph_core.errors import NonFiniteError

    agent, path = saved
    before = {name: (path / name).read_bytes() for name in ("meta.json", "weights.npz")}
    name = sorted(agent.get_weights())[0]
    poisoned = {**agent.get_weights(), name: np.full_like(agent.get_weights()[name], np.nan)}
    agent.set_weights(poisoned)
    with pytest.raises(NonFiniteError, match=f"{name}.*NaN or infinite"):
        agent.save(path)
    with pytest.raises(NonFiniteError):
        checkpoint.save_periodic(agent, path.parent, 100, {})
    assert {name: (path / name).read_bytes() for name in before} == before
    assert checkpoint.latest_checkpoint(path.parent) is None  # no periodic checkpoint either


def test_non_finite_weights_are_refused_for_training_and_warn_for_evaluation(make, saved):
    agent, path = saved
    weights = agent.get_weights()
    name = sorted(weights)[-1]
    weights[name] = np.full_like(weights[name], np.inf)
    with open(path / "weights.npz", "wb") as f:
        np.savez(f, **weights)
    assert_refused(make, path, "NaN or infinite weights")
    fresh = make(seed=5)
    with pytest.warns(RuntimeWarning, match="NaN or infinite weights"):
        fresh.load(path, for_training=False)


@pytest.mark.parametrize("field,value", [("memory/data/obs", np.nan), ("memory/data/rewards", np.inf)])
def test_non_finite_replay_records_are_refused_at_load(make, saved, field, value):
    """Issue 35: NaN observations inside a checkpoint's replay records loaded silently for training."""
    _, path = saved

    def poison(arrays):
        arrays[field][2] = value

    rewrite_npz(path, "state.npz", poison)
    msg = assert_refused(make, path, "NaN or infinite values")
    assert f"'{field}'" in msg and "first at index [2" in msg and "Nothing was loaded" in msg


def test_non_finite_replay_observations_load_only_for_a_run_that_allowed_them(make, tmp_path):
    """``env.allow_nonfinite_obs: true`` lets inf observations into replay; its checkpoint still resumes
    (rewards stay checked)."""
    agent = make(seed=0)
    play(agent, 60)
    path = tmp_path / "ckpt"
    agent.save(path, {"config": {"env": {"id": "CartPole-v1", "allow_nonfinite_obs": True}}})
    rewrite_npz(path, "state.npz", lambda arrays: arrays["memory/data/obs"].__setitem__(1, np.inf))
    fresh = make(seed=5)
    fresh.load(path)
    assert np.isinf(fresh.get_state()[0]["memory/data/obs"][1]).all()
    rewrite_npz(path, "state.npz", lambda arrays: arrays["memory/data/rewards"].__setitem__(1, np.nan))
    assert_refused(make, path, "'memory/data/rewards'")


def test_non_finite_replay_records_are_refused_at_save(make, saved):
    """Issue 35: what loading refuses was written: a NaN reward in replay reached the checkpoint."""
    from rlgraph_core.errors import NonFiniteError

    agent, path = saved
    before = {name: (path / name).read_bytes() for name in ("meta.json", "state.npz")}
    arrays, counters = agent.get_state()
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["memory/data/rewards"][3] = np.nan
    agent.set_state(arrays, counters)
    with pytest.raises(NonFiniteError) as info:
        agent.save(path)
    msg = str(info.value)
    assert "'state.npz: memory/data/rewards'" in msg and "first at index [3]" in msg and "Nothing was written" in msg
    assert "\n" not in msg
    with pytest.raises(NonFiniteError, match="memory/data/rewards"):
        checkpoint.save_periodic(agent, path.parent, 100, {})
    assert {name: (path / name).read_bytes() for name in before} == before
    assert checkpoint.latest_checkpoint(path.parent) is None


def test_non_finite_replay_observations_are_saved_only_for_a_run_that_allows_them(tmp_path):
    from rlgraph_core.errors import NonFiniteError

    agent = make_numpy_agent()
    play(agent, 60)
    arrays, counters = agent.get_state()
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["memory/data/obs"][1] = np.inf
    agent.set_state(arrays, counters)
    with pytest.raises(NonFiniteError, match="memory/data/obs"):
        agent.save(tmp_path / "refused", {"config": {"env": {"id": "CartPole-v1"}}})
    assert not (tmp_path / "refused").exists()
    allowed = {"config": {"env": {"id": "CartPole-v1", "allow_nonfinite_obs": True}}}
    agent.save(tmp_path / "ckpt", allowed)
    fresh = make_numpy_agent(seed=5)
    fresh.load(tmp_path / "ckpt")
    assert np.isinf(fresh.get_state()[0]["memory/data/obs"][1]).all()


def test_a_versions_store_that_is_a_link_is_never_written_through(tmp_path):
    """Issue 35: '.checkpoint.versions' linked out of the run folder got the new version, and lost the old."""
    agent = make_numpy_agent()
    run = tmp_path / "run"
    agent.save(run / "checkpoint")
    outside = tmp_path / "outside"
    os.rename(run / ".checkpoint.versions", outside)
    os.symlink(outside, run / ".checkpoint.versions")
    before = sorted(os.listdir(outside))
    for action in (lambda: agent.save(run / "checkpoint"), lambda: checkpoint.remove_checkpoint(run / "checkpoint")):
        with pytest.raises(CheckpointError, match="is a symbolic link .*Nothing was written or removed"):
            action()
        assert sorted(os.listdir(outside)) == before
    (run / "elsewhere").mkdir()
    os.symlink(run / "elsewhere", run / "checkpoints")
    with pytest.raises(CheckpointError, match="is a symbolic link"):
        checkpoint.save_periodic(agent, run, 10, {})
    assert os.listdir(run / "elsewhere") == []
