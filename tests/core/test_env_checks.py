"""Observations and rewards are checked where they enter (issue 19): the env, the step and the field are named."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from rlgraph_core.config.sections import EnvConfig
from rlgraph_core.envs import make_eval_env, make_vector_env
from rlgraph_core.errors import EnvDataError


class PoisonCartPole(CartPoleEnv):
    """CartPole whose step ``after`` and later return the bad value ``bad``."""

    def __init__(self, bad="obs_nan", after=3, **kwargs):
        super().__init__(**kwargs)
        self.bad, self.after, self.steps = bad, after, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.steps >= self.after:
            if self.bad == "obs_text":
                obs = "left"
            elif self.bad.startswith("obs_"):
                obs = np.array(obs, copy=True)
                obs[2] = {"obs_nan": np.nan, "obs_inf": np.inf}[self.bad]
            else:
                reward = {"reward_nan": float("nan"), "reward_none": None, "reward_str": "1.0"}[self.bad]
        return obs, reward, False, False, info


def _register(*entries):
    """Register each ``(id, env class)`` with gymnasium once (re-imports find them registered)."""
    for env_id, entry in entries:
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry)


_register(("PoisonCartPoleTest-v0", PoisonCartPole))


def step_until_error(envs, steps=10):
    envs.reset(seed=0)
    for _ in range(steps):
        envs.step(envs.action_space.sample())


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("obs_nan", "field 'observation' holds nan at index (2,)"),
        ("obs_inf", "holds inf at index (2,)"),
        ("obs_text", "not numeric"),
        ("reward_nan", "the reward is nan"),
        ("reward_none", "the reward is None of type NoneType, not a number"),
        ("reward_str", "the reward is '1.0' of type str, not a number"),
    ],
)
def test_a_bad_value_is_refused_at_the_step_it_appears(bad, fragment):
    """Before: None became NaN, "1.0" became 1.0, NaN/inf trained silently to the end."""
    cfg = EnvConfig(id="PoisonCartPoleTest-v0", num_envs=2, kwargs={"bad": bad, "after": 3})
    envs = make_vector_env(cfg, seed=0)
    with pytest.raises(EnvDataError) as info:
        step_until_error(envs)
    envs.close()
    message = str(info.value)
    assert "'PoisonCartPoleTest-v0'" in message and "env step 3" in message and fragment in message
    assert "\n" not in message


def test_the_eval_env_is_checked_too():
    env = make_eval_env(EnvConfig(id="PoisonCartPoleTest-v0", kwargs={"bad": "reward_none", "after": 1}))
    env.reset(seed=0)
    with pytest.raises(EnvDataError, match="reward is None"):
        env.step(0)


def test_allow_nonfinite_obs_lets_inf_observations_through_but_never_bad_rewards():
    cfg = EnvConfig(
        id="PoisonCartPoleTest-v0", num_envs=1, kwargs={"bad": "obs_inf", "after": 1}, allow_nonfinite_obs=True
    )
    envs = make_vector_env(cfg, seed=0)
    envs.reset(seed=0)
    obs, *_ = envs.step(envs.action_space.sample())
    assert np.isinf(obs[0, 2])
    envs.close()
    cfg = EnvConfig(
        id="PoisonCartPoleTest-v0", num_envs=1, kwargs={"bad": "reward_nan", "after": 1}, allow_nonfinite_obs=True
    )
    envs = make_vector_env(cfg, seed=0)
    with pytest.raises(EnvDataError, match="reward is nan"):
        step_until_error(envs)
    envs.close()


class ChangingImageEnv(gym.Env):
    """Declares uint8 (8, 8, 3) images; from step ``after`` returns float64 ones or (10, 8, 3) ones."""

    observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, bad="float", after=3):
        self.bad, self.after, self.steps = bad, after, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros((8, 8, 3), np.uint8), {}

    def step(self, action):
        self.steps += 1
        obs = np.full((8, 8, 3), 7, np.uint8)
        if self.steps >= self.after:
            obs = obs / 255.0 if self.bad == "float" else np.zeros((10, 8, 3), np.uint8)
        return obs, 1.0, False, False, {}


class NoActionSpaceEnv(gym.Env):
    """A custom env that forgot its action space."""

    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)


_register(("ChangingImageTest-v0", ChangingImageEnv), ("NoActionSpaceTest-v0", NoActionSpaceEnv))


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("float", "field 'observation' is float64, but the env's observation_space declares uint8"),
        ("shape", "field 'observation' has shape (10, 8, 3), but the env's observation_space declares (8, 8, 3)"),
    ],
)
def test_an_observation_that_leaves_its_declared_dtype_or_shape_is_refused(bad, fragment):
    """Issue 35 §5: a float64 image was cut to uint8 silently; a changed shape was a vector-env traceback."""
    envs = make_vector_env(EnvConfig(id="ChangingImageTest-v0", num_envs=2, kwargs={"bad": bad}), seed=0)
    with pytest.raises(EnvDataError) as info:
        step_until_error(envs)
    envs.close()
    message = str(info.value)
    assert "'ChangingImageTest-v0'" in message and "env step 3" in message and fragment in message
    assert "shape and dtype its observation_space declares" in message and "\n" not in message


def test_an_env_without_an_action_space_is_one_paragraph():
    from rlgraph_core.errors import ConfigError

    with pytest.raises(ConfigError, match="the environment defines no action_space.*Set self.action_space"):
        make_eval_env(EnvConfig(id="NoActionSpaceTest-v0"))


def test_the_every_step_shortcut_passes_only_what_the_full_checks_pass():
    """``step_ok`` (CheckedEnv.step's one-expression case, issue 36) never lets through what
    ``reward_problem`` / ``observation_problem`` / the declared shape would refuse; where it says
    False the full checks decide (huge finite values whose squares overflow, a bool reward ...)."""
    from rlgraph_core.env_checks import CheckedEnv, observation_problem, reward_problem, step_ok

    env = CheckedEnv(gym.make("CartPole-v1"), "CartPole-v1")
    shape = env._float_shape
    assert shape == (4,)
    good = np.array([0.1, -0.2, 0.3, 1e3], np.float32)
    cases = [
        (good, 1.0, True),
        (good, np.float32(1.0), True),
        (good, 1, True),
        (good.astype(np.float64), np.int64(0), True),
        (np.array([0.1, np.nan, 0, 0], np.float32), 1.0, False),
        (np.array([0.1, -np.inf, 0, 0], np.float32), 1.0, False),
        (np.array([3e38, 0, 0, 0], np.float32), 1.0, False),  # finite, but its square overflows
        (good, float("nan"), False),
        (good, True, False),
        (good, "1.0", False),
        (good, None, False),
        (good[:3], 1.0, False),
        (good.astype(np.int64), 1.0, False),
        (list(good), 1.0, False),
    ]
    for obs, reward, expected in cases:
        assert step_ok(obs, reward, shape) is expected, (obs, reward)
        if expected:
            assert reward_problem(reward) is None and observation_problem(obs) is None
            assert env._shape_problem(obs) is None
    assert observation_problem(cases[6][0]) is None  # the full check passes what the shortcut left to it
    assert not step_ok(good, 1.0, None)  # no float Box declared (or allow_nonfinite_obs): always the full checks
    env.close()


def test_the_dict_shortcut_passes_only_what_the_full_checks_pass():
    """``dict_step_ok`` (CheckedEnv.step's case for a Dict of Boxes: a masked env's observation and
    mask) passes only what ``reward_problem`` / ``observation_problem`` / the declared shapes pass."""
    from rlgraph_core.env_checks import CheckedEnv, dict_step_ok, observation_problem, reward_problem
    from rlgraph_core.testing.masked_env import PickLegalMax

    env = CheckedEnv(PickLegalMax(n=4), "PickLegalMax")
    layout = env._layout
    assert {key: rest for key, *rest in layout} == {"observation": [(4,), True], "action_mask": [(4,), False]}
    values, mask = np.array([0.1, 0.5, 0.2, 0.9], np.float32), np.array([1, 0, 1, 1], np.int8)
    good = {"observation": values, "action_mask": mask}
    cases = [
        (good, 1.0, True),
        (good, np.int64(0), True),
        ({"observation": values, "action_mask": mask.astype(bool)}, 0.0, True),
        ({"observation": values.astype(np.float64), "action_mask": mask}, 0.0, True),
        ({"observation": np.array([0.1, np.nan, 0, 0], np.float32), "action_mask": mask}, 1.0, False),
        ({"observation": np.array([3e38, 0, 0, 0], np.float32), "action_mask": mask}, 1.0, False),
        ({"observation": values, "action_mask": mask.astype(np.float32)}, 1.0, False),  # int Box, float values
        ({"observation": values.astype(np.int64), "action_mask": mask}, 1.0, False),
        ({"observation": values[:3], "action_mask": mask}, 1.0, False),
        ({"observation": values}, 1.0, False),
        ({**good, "extra": mask}, 1.0, False),
        ({"observation": list(values), "action_mask": mask}, 1.0, False),
        (values, 1.0, False),
        (good, float("inf"), False),
        (good, True, False),
        (good, None, False),
    ]
    for obs, reward, expected in cases:
        assert dict_step_ok(obs, reward, layout) is expected, (obs, reward)
        if expected:
            assert reward_problem(reward) is None and observation_problem(obs) is None
            assert env._shape_problem(obs) is None
    assert not dict_step_ok(good, 1.0, None)  # a space that is not a Dict of Boxes: always the full checks
    assert CheckedEnv(gym.make("CartPole-v1"), "CartPole-v1")._layout is None
    assert CheckedEnv(PickLegalMax(n=4), "PickLegalMax", allow_nonfinite_obs=True)._layout is None
    env.reset(seed=0)
    obs, *_ = env.step(int(np.flatnonzero(env.unwrapped._mask)[0]))
    assert dict_step_ok(obs, 0.0, layout)  # what the env really returns takes the shortcut
    env.close()


def _run_both(env_id: str, steps: int, **kwargs):
    """Each step's outputs of rlgraph's sync vector env and of ``gym.make_vec``'s (same seed and actions)."""
    from rlgraph_core.env_checks import CheckedSyncVectorEnv

    ours = make_vector_env(EnvConfig(id=env_id, num_envs=3, kwargs=kwargs), seed=0)
    assert isinstance(ours, CheckedSyncVectorEnv)
    theirs = gym.make_vec(
        env_id,
        num_envs=3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        **kwargs,
    )
    outputs = []
    for envs in (ours, theirs):
        envs.action_space.seed(1)
        out = [envs.reset(seed=5)]
        out += [envs.step(envs.action_space.sample()) for _ in range(steps)]
        envs.close()
        outputs.append(out)
    return outputs


def _assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (tuple, list)) or (isinstance(a, np.ndarray) and a.dtype == object):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize("env_id", ["CartPole-v1", "DictWalkTest-v0"])
def test_the_checked_sync_vector_env_steps_as_gymnasiums(env_id):
    """Issue 36: the checks moved into the vector step (no CheckedEnv frame per sub-env step); what
    it returns (observations, rewards, flags, infos with final observations, resets) is
    gymnasium's SyncVectorEnv's, on a float Box (the batch shortcut) and a Dict space (per-env checks)."""
    ours, theirs = _run_both(env_id, 300)
    ended = sum(int(step[2].sum() + step[3].sum()) for step in ours[1:])
    assert ended >= 3  # autoresets were exercised
    for a, b in zip(ours, theirs):
        _assert_same(a, b)


class EndsBadly(gym.Env):
    """Ends its episode at step 3 with a bad final observation or reward (``bad``); fine otherwise."""

    observation_space = gym.spaces.Box(-1e30, 1e30, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, bad="final_nan", at=3):
        self.bad, self.at, self.t = bad, at, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        obs, reward = np.full(2, 1e20 if self.bad == "huge" else 0.5, np.float32), 1.0
        if self.t == self.at:
            if self.bad == "final_nan":
                obs[1] = np.nan
            elif self.bad == "final_reward_inf":
                reward = float("inf")
            elif self.bad == "reward_bool":
                reward = True
        return obs, reward, self.t == self.at, False, {}


class DictWalk(gym.Env):
    """A Dict observation (float position, uint8 counter) with random steps, rewards, infos and episode lengths."""

    observation_space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-100, 100, (2,), np.float32), "count": gym.spaces.Box(0, 255, (1,), np.uint8)}
    )
    action_space = gym.spaces.Discrete(3)

    def _obs(self):
        return {"pos": self.pos.copy(), "count": np.array([self.t % 256], np.uint8)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = self.np_random.normal(size=2).astype(np.float32), 0
        return self._obs(), {"start": float(self.pos[0])}

    def step(self, action):
        self.t += 1
        self.pos += self.np_random.normal(size=2).astype(np.float32) + (action - 1)
        info = {"odd": True} if self.t % 2 else {}
        ended = bool(self.np_random.random() < 0.05)
        return self._obs(), float(self.pos[0]), ended, self.t >= 30, info


_register(("EndsBadlyTest-v0", EndsBadly), ("DictWalkTest-v0", DictWalk))


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("final_nan", "field 'observation' holds nan at index (1,)"),
        ("final_reward_inf", "the reward is inf"),
        ("reward_bool", "the reward is True of type bool, not a number"),
    ],
)
def test_an_ended_episodes_final_values_are_checked(bad, fragment):
    """The final observation of an ended episode goes to infos["final_obs"], not into the batch the
    vector step checks at once: it is checked on its own, with the step of its episode named."""
    envs = make_vector_env(EnvConfig(id="EndsBadlyTest-v0", num_envs=2, kwargs={"bad": bad}), seed=0)
    envs.reset(seed=0)
    envs.step(np.zeros(2, np.int64))
    envs.step(np.zeros(2, np.int64))
    with pytest.raises(EnvDataError) as info:
        envs.step(np.zeros(2, np.int64))
    envs.close()
    message = str(info.value)
    assert "env step 3 (step 3 of its episode)" in message and fragment in message


def test_huge_finite_observations_pass_the_batch_check():
    """A batch whose sum of squares overflows is finite value by value: the per-env checks pass it."""
    envs = make_vector_env(EnvConfig(id="EndsBadlyTest-v0", num_envs=2, kwargs={"bad": "huge", "at": 10}), seed=0)
    envs.reset(seed=0)
    obs, *_ = envs.step(np.zeros(2, np.int64))
    assert obs[0, 0] == np.float32(1e20)
    envs.close()
