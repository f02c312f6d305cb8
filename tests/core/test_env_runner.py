"""The one env loop (:class:`rlgraph_core.execution.env_runner.EnvRunner`) on its own: final
observations at episode ends, episode returns and lengths, step counts, observe on or off,
time-major fragments; the run's step counter; and that nothing else in the executors steps an env."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import numpy as np

from rlgraph_core.execution.counters import StepCounter
from rlgraph_core.execution.env_runner import STEP_FIELDS, EnvRunner

ROOT = Path(__file__).resolve().parents[2]


class CountEnv(gym.Env):
    """obs = [steps taken in this episode]; reward = that count; terminates after ``length`` steps
    (truncates instead when ``length`` is odd), so every episode's final observation is ``length``."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int):
        self.length = length
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        odd = self.length % 2 == 1
        return np.array([self.t], np.float32), float(self.t), end and not odd, end and odd, {}


class RecordingAgent:
    """The actor side a runner needs (``act``, ``observe``), recording what it was given."""

    def __init__(self):
        self.seen: list[tuple] = []
        self.timesteps = 0
        self.updates = 0

    def act(self, obs):
        return np.zeros(len(obs), np.int64)

    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        self.seen.append((np.array(obs), np.array(next_obs), np.array(terminated), np.array(truncated)))


def _envs(lengths=(3, 4)):
    fns = [lambda n=n: CountEnv(n) for n in lengths]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def test_steps_observe_true_final_observations_and_count_episodes():
    agent, envs = RecordingAgent(), _envs((3, 4))
    runner = EnvRunner(agent, envs, seed=0)
    for _ in range(12):
        runner.step()
    assert runner.env_steps == 24 and len(agent.seen) == 12
    for obs, next_obs, term, trunc in agent.seen:
        # next_obs is what the action led to: the count one higher, the final one (3 or 4) at ends
        np.testing.assert_array_equal(next_obs[:, 0], obs[:, 0] + 1)
    ended = [(i, next_obs[i, 0]) for obs, next_obs, term, trunc in agent.seen for i in range(2) if term[i] or trunc[i]]
    assert ended and all(final == (3, 4)[i] for i, final in ended)
    assert any(trunc[0] for *_, trunc in agent.seen) and any(term[1] for *_, term, _ in agent.seen)
    episodes = runner.take_episodes()
    # env 0: 4 episodes of 3 steps (return 1+2+3), env 1: 3 of 4 steps (return 1+2+3+4)
    assert sorted(episodes.lengths) == [3, 3, 3, 3, 4, 4, 4]
    assert sorted(episodes.returns) == [6.0] * 4 + [10.0] * 3
    assert runner.episodes == 7 and len(runner.take_episodes()) == 0  # taken once
    envs.close()


def test_trajectory_is_time_major_unobserved_and_continues_episodes():
    agent, envs = RecordingAgent(), _envs((3, 5))
    runner = EnvRunner(agent, envs, seed=0)
    traj = runner.trajectory(4)
    assert set(traj) == set(STEP_FIELDS) and agent.seen == []  # an actor postprocesses instead
    assert traj["obs"].shape == (4, 2, 1) and traj["rewards"].shape == (4, 2)
    np.testing.assert_array_equal(traj["next_obs"][:, 0, 0], [1, 2, 3, 1])  # final obs 3, then a new episode
    np.testing.assert_array_equal(traj["obs"][:, 0, 0], [0, 1, 2, 0])
    assert traj["truncated"][2, 0] and not traj["terminated"][2, 0]  # length 3: odd, so truncated
    nxt = runner.trajectory(2)  # the envs go on where the last fragment stopped
    np.testing.assert_array_equal(nxt["obs"][:, 1, 0], [4, 0])
    assert nxt["truncated"][0, 1] and runner.env_steps == 12
    envs.close()


def test_step_counter_is_the_one_writer_of_the_agents_timesteps():
    agent = RecordingAgent()
    agent.timesteps = 100  # a resumed run
    counter = StepCounter(agent)
    assert counter.add_env_steps(8) == 108 and agent.timesteps == 108
    agent.timesteps = 50  # e.g. an elastic reset restored an older commit
    counter.sync_from_agent()
    assert counter.add_env_steps(2) == 52 and agent.timesteps == 52


def test_no_executor_steps_an_env_itself_nor_writes_agent_timesteps():
    """The architecture's rule: the env runner is the one env loop, the run's counter the one
    writer of ``agent.timesteps`` (evaluation plays its own episodes on a single env)."""
    sources = [
        *(ROOT / "rlgraph_core/src/rlgraph_core/execution").glob("*.py"),
        *(ROOT / "rlgraph_ray/src/rlgraph_ray").glob("*.py"),
        *(ROOT / "rlgraph_horovod/src/rlgraph_horovod").glob("*.py"),
    ]
    assert len(sources) > 10
    stepping = re.compile(r"\benvs?\.step\(")
    writing = re.compile(r"\.timesteps\s*(\+|-)?=[^=]")
    for path in sources:
        text = path.read_text()
        if path.name != "env_runner.py":
            assert not stepping.search(text), f"{path} steps an env itself; use EnvRunner"
        if path.name != "counters.py":
            assert not writing.search(text), f"{path} writes agent.timesteps; use the recorder's add_env_steps"


class CountingStateAgent(RecordingAgent):
    """A stateful actor: its state is ``{"t": [N, 1]}``, the steps acted since its episode started
    (reset where ``episode_start``); it acts with ``t`` so a test can read the state back."""

    def initial_state(self, batch):
        return {"t": np.zeros((batch, 1), np.float32)}

    def act(self, obs, explore=True, *, state, episode_start):
        t = np.where(episode_start[:, None], 0.0, state["t"])
        return t[:, 0].astype(np.int64), {"t": t + 1}


def test_runner_carries_a_stateful_agents_state_and_resets_it_where_episodes_start():
    agent = CountingStateAgent()
    runner = EnvRunner(agent, _envs((3, 4)), seed=0)
    assert runner.episode_starts.all()
    traj = runner.trajectory(9)
    # the action is the step index within the episode: the state was reset at each autoreset
    np.testing.assert_array_equal(traj["actions"][:, 0], [0, 1, 2] * 3)
    np.testing.assert_array_equal(traj["actions"][:, 1], [0, 1, 2, 3, 0, 1, 2, 3, 0])
    np.testing.assert_array_equal(traj["episode_starts"][:, 0], [True, False, False] * 3)
    assert traj["states"]["t"].shape == (9, 2, 1)
    np.testing.assert_array_equal(traj["states"]["t"][1:, 1, 0], [1, 2, 3, 4, 1, 2, 3, 4])
    # observed steps carry it the same way
    runner.step()
    assert runner.state["t"][0, 0] == 1 and runner.state["t"][1, 0] == 2


def test_feed_forward_agent_is_called_without_state():
    runner = EnvRunner(RecordingAgent(), _envs(), seed=0)  # act(obs) takes no state: it would raise
    assert runner.state is None and runner.episode_starts is None
    traj = runner.trajectory(2)
    assert "states" not in traj and "episode_starts" not in traj


def test_evaluation_resets_a_stateful_policy_at_each_episode():
    from rlgraph_core.evaluation import StatefulPolicy, agent_policy, evaluate_policy

    agent = CountingStateAgent()
    policy = agent_policy(agent)
    assert isinstance(policy, StatefulPolicy)
    seen = []
    agent_act = agent.act

    def act(obs, explore=True, *, state, episode_start):
        out = agent_act(obs, explore, state=state, episode_start=episode_start)
        seen.append(int(out[0][0]))
        return out

    agent.act = act
    result = evaluate_policy(policy, CountEnv(4), episodes=2, seed=0)
    assert result["eval_length_mean"] == 4 and seen == [0, 1, 2, 3, 0, 1, 2, 3]
    assert not isinstance(agent_policy(RecordingAgent()), StatefulPolicy)
