"""The episodes in progress at a stop, replayed on resume (:mod:`rlgraph_core.execution.env_resume`):
a deterministic env continues exactly (its randomness in reset and step included, through a JSON
round trip of the snapshot), an env with randomness of its own falls back to fresh episodes with
one warning line, and malformed snapshots are refused before anything is assigned."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core.env_checks import CheckedEnv
from rlgraph_core.errors import CheckpointError
from rlgraph_core.execution import env_resume
from rlgraph_core.execution.env_runner import EnvRunner


class NoisyWalk(gym.Env):
    """A walk whose start, steps and end all draw from ``np_random`` (or, with ``own_rng``, from
    a generator of its own that no seed reaches, like ALE's)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, own_rng: bool = False):
        self.own = np.random.default_rng() if own_rng else None
        self.pos = np.zeros(2)

    def _rng(self):
        return self.own if self.own is not None else self.np_random

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self._rng().normal(size=2)
        return self.pos.copy(), {}

    def step(self, action):
        self.pos = self.pos + (int(action) - 1) + 0.1 * self._rng().normal(size=2)
        reward = float(self._rng().uniform())
        return self.pos.copy(), reward, bool(self._rng().uniform() < 0.08), False, {}


class GreedyAgent:
    """Acts from the observation alone, so two runners that see the same observations act alike."""

    def act(self, obs):
        return (obs[:, 0] > 0).astype(np.int64) + (obs[:, 1] > 0).astype(np.int64)


def _runner(own_rng: bool = False, seed: int = 3) -> EnvRunner:
    fns = [lambda: CheckedEnv(NoisyWalk(own_rng), "NoisyWalk") for _ in range(3)]
    envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return EnvRunner(GreedyAgent(), envs, seed=seed)


def _through_json(taken):
    arrays, info = taken
    return {k: np.array(v) for k, v in arrays.items()}, json.loads(json.dumps(info))


def _checked(taken, runner):
    arrays, info = _through_json(taken)
    envs = runner.envs
    return env_resume.check_snapshot(info, arrays, envs.single_observation_space, envs.single_action_space, 3, "x")


def test_a_replayed_runner_continues_the_episodes_in_progress_exactly():
    first = _runner()
    for _ in range(40):
        first.step(observe=False)
    taken = env_resume.snapshot(first, 120)
    assert taken is not None and taken[0]["lengths"].min() < taken[0]["lengths"].max()
    assert any("rng" in s for s in taken[1]["starts"]), "no episode restarted within 40 steps: a weak test"
    second = _runner(seed=99)  # another reset seed: only the replay can bring the same episodes back
    assert env_resume.replay(second, *_checked(taken, first), timesteps=120, seed=99)
    for _ in range(60):
        a, b = first.step(observe=False), second.step(observe=False)
        assert np.array_equal(a.next_obs, b.next_obs) and np.array_equal(a.rewards, b.rewards)
    assert first.take_episodes().returns[-2:] == second.take_episodes().returns[-2:]
    # the replayed runner's own snapshot is the uninterrupted one's
    again, again_first = env_resume.snapshot(second, 300), env_resume.snapshot(first, 300)
    assert again[1] == again_first[1] and all(np.array_equal(again[0][k], again_first[0][k]) for k in again[0])


def test_an_env_with_its_own_randomness_restarts_its_episodes_with_one_warning():
    first = _runner(own_rng=True)
    for _ in range(10):
        first.step(observe=False)
    second = _runner(own_rng=True)
    with pytest.warns(RuntimeWarning, match=r"^rlgraph: warning: the episodes in progress at the stop restart"):
        assert not env_resume.replay(second, *_checked(env_resume.snapshot(first, 30), first), timesteps=30, seed=7)
    assert second.obs.shape == (3, 2) and not second._lengths.any()
    second.step(observe=False)  # and the runner steps on


def test_another_step_count_falls_back_too():
    first = _runner()
    first.step(observe=False)
    with pytest.warns(RuntimeWarning, match="taken at 3 env steps, the agent is at 6"):
        assert not env_resume.replay(_runner(), *_checked(env_resume.snapshot(first, 3), first), timesteps=6, seed=0)


@pytest.mark.parametrize(
    ("corrupt", "named"),
    [
        (lambda a, i: i.update(num_envs=4), "written for 4 envs"),
        (lambda a, i: i["starts"].__setitem__(0, {"rng": {"bit_generator": "Evil"}}), "names no numpy bit generator"),
        (lambda a, i: i["starts"][1].update(extra=1), "env 1's episode start"),
        (lambda a, i: a.__setitem__("actions", a["actions"] + 5), "outside Discrete(3"),
        (lambda a, i: a.__setitem__("obs", a["obs"].astype(np.float32)), "obs is [3, 2] float32"),
        (lambda a, i: a.__setitem__("returns", a["returns"][:2]), "returns is [2]"),
        (lambda a, i: a.pop("lengths"), "holds the arrays"),
    ],
)
def test_malformed_snapshots_are_refused_in_one_paragraph(corrupt, named):
    runner = _runner()
    for _ in range(5):
        runner.step(observe=False)
    arrays, info = _through_json(env_resume.snapshot(runner, 15))
    corrupt(arrays, info)
    envs = runner.envs
    with pytest.raises(CheckpointError, match="refused") as caught:
        env_resume.check_snapshot(info, arrays, envs.single_observation_space, envs.single_action_space, 3, "ck")
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_no_snapshot_for_a_vector_env_it_cannot_replay():
    envs = gym.vector.SyncVectorEnv([lambda: NoisyWalk()] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    runner = EnvRunner(GreedyAgent(), envs, seed=0)
    runner.step(observe=False)
    assert env_resume.snapshot(runner, 2) is None  # no CheckedEnv notes its episode starts


def test_the_action_log_keeps_only_the_episodes_in_progress():
    runner = _runner()
    for _ in range(3000):
        runner.step(observe=False)
    log = runner.action_log()
    assert len(log) == runner._lengths.max() < 3000


class RolloutAgent(GreedyAgent):
    """An agent with a rollout in progress: records what the resume tells it to do with it."""

    def __init__(self):
        self.told: list = []

    def partial_rollout(self):
        return None

    def continue_rollout(self, fields):
        self.told.append(fields)


def test_a_fallback_drops_an_on_policy_agents_rollout_in_progress():
    first = _runner(own_rng=True)
    for _ in range(10):
        first.step(observe=False)
    second = _runner(own_rng=True)
    second.agent = agent = RolloutAgent()
    with pytest.warns(RuntimeWarning, match="restart on resume"):
        env_resume.replay(second, *_checked(env_resume.snapshot(first, 30), first), timesteps=30, seed=7)
    assert agent.told == [None]  # its steps so far would not join the restarted episodes
