"""Dict observations (image + vector) end to end: build, act, learn, checkpoint, storage per key."""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("rlgraph_torch")

from rlgraph_core.assemble import assemble, train  # noqa: E402
from rlgraph_core.config.run import load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.plugins import get_plugin_manager  # noqa: E402

ENCODER = {
    "type": "dict_encoder",
    "image": {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3, "stride": 2}], "hidden": [32]},
    "vector": {"hidden": [16]},
    "hidden": [32],
}


def _config(name: str, agent: dict, total: int) -> dict:
    raw = copy.deepcopy(load_shipped_config(name))
    raw["agent"].update(agent)
    raw["env"] = {"id": "dict_env:ImageVectorEnv", "num_envs": 2}
    raw["train"].update(
        total_timesteps=total, eval_interval=total, eval_episodes=1, log_interval=total, target_return=None
    )
    return raw


@pytest.mark.parametrize(
    "name, agent",
    [
        (
            "dqn_cartpole",
            {
                "network": ENCODER,
                "learning_starts": 64,
                "train_freq": 16,
                "gradient_steps": 4,
                "batch_size": 32,
                "memory": {"type": "prioritized_replay", "capacity": 500},
            },
        ),
        ("ppo_cartpole", {"network": ENCODER, "n_steps": 32, "batch_size": 32, "n_epochs": 1}),
    ],
    ids=["dqn", "ppo"],
)
def test_dict_observation_smoke(tmp_path, monkeypatch, name, agent):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    pm = get_plugin_manager()
    config = validate_config(_config(name, agent, total=256), pm)
    summary = train(config, tmp_path / "run", plugin_manager=pm)
    assert summary["timesteps"] >= 256 and summary["updates"] > 0, summary
    assembly = assemble(config, pm)
    env = assembly.make_eval_env()
    fresh = assembly.make_agent(env.observation_space, env.action_space, num_envs=2)
    fresh.load(str(tmp_path / "run" / "checkpoint"))
    obs, _ = env.reset(seed=0)
    batch = {k: v[None] for k, v in obs.items()}
    assert fresh.act(batch, explore=False).shape == (1,)
    if name.startswith("dqn"):
        memory = fresh.memory
        assert set(memory.fields) >= {"obs/image", "obs/vector", "next_obs/image", "next_obs/vector"}
        state = memory.state_dict()
        assert state["frames/obs/image"].dtype == np.uint8 and state["data/obs/vector"].dtype == np.float32
        sample = memory.sample(8)
        assert sample["obs"]["image"].dtype == np.uint8 and sample["obs"]["image"].shape == (8, 8, 8, 3)
    env.close()


def test_actor_role_postprocesses_dict_trajectories():
    """The actor role (a ray_apex worker's): n-step folding of a time-major Dict trajectory keeps
    the Dict per key (uint8 image, float32 vector), with initial priorities."""
    from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
    from rlgraph_core.assemble import make_backend
    from rlgraph_core.components.dict_encoder import DictEncoderSettings
    from rlgraph_core.spaces import Dict, Discrete, FloatBox, IntBox

    shape, (T, N) = (8, 8, 3), (5, 2)
    space = Dict(image=IntBox(0, 255, shape=shape, dtype=np.uint8), vector=FloatBox(shape=(3,)))
    cfg = DQNConfig(
        network=DictEncoderSettings.model_validate(ENCODER), n_step=2, memory={"type": "prioritized_replay"}
    )
    agent = DQNAgent(cfg, space, Discrete(2), make_backend("torch", "eager", device="cpu"), num_envs=N)
    rng = np.random.default_rng(0)

    def obs():
        return {"image": rng.integers(0, 256, (T, N, *shape)).astype(np.uint8), "vector": rng.random((T, N, 3))}

    trajectory = {
        "obs": obs(),
        "actions": rng.integers(0, 2, (T, N)),
        "rewards": np.ones((T, N), np.float32),
        "next_obs": obs(),
        "terminated": np.zeros((T, N), bool),
        "truncated": np.zeros((T, N), bool),
    }
    batch = agent.postprocess(trajectory)
    n = (T - 1) * N  # the last step's transitions wait for their second step
    assert batch["obs"]["image"].shape == (n, *shape) and batch["obs"]["image"].dtype == np.uint8
    assert batch["next_obs"]["vector"].shape == (n, 3) and batch["next_obs"]["vector"].dtype == np.float32
    assert batch["priorities"].shape == (n,) and batch["rewards"].shape == (n,)
