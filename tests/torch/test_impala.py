"""The IMPALA agent on the torch backend: stale batches through the actor / learner roles, Gaussian
actions, and learning CartPole-v1 under the local executor.

The roles test drives the agent as ``ray_impala`` does: actors at weights version 0 collect
fragments while the learner has already moved on, so the learner's policy differs from the
behaviour policy and V-trace's truncation of ``rho`` and ``c`` is active; the losses of that step
are checked against a numpy V-trace computed from the learner's own forward pass.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlgraph_core.agents.impala import ImpalaAgent, ImpalaConfig  # noqa: E402
from rlgraph_core.assemble import assemble, make_agent, train  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_config_file, load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.plugins import get_plugin_manager  # noqa: E402
from rlgraph_core.spaces import FloatBox  # noqa: E402
from rlgraph_torch.backend import TorchBackend  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]"]


def collect(agent, env, obs):
    """Act and observe until the actor's fragment is full; ``(postprocessed batch, next obs)``."""
    batch = None
    while batch is None:
        actions = agent.act(obs)
        next_obs, rewards, terminated, truncated, infos = env.step(actions)
        true_next = next_obs.copy()
        if "_final_obs" in infos:  # the true final observation where an episode ended
            for i in np.flatnonzero(infos["_final_obs"]):
                true_next[i] = infos["final_obs"][i]
        agent.observe(obs, actions, rewards, true_next, terminated, truncated)
        obs = next_obs
        batch = agent.take_rollout()
    return batch, obs


def merge(batches):
    """Batches of several actors concatenated along the env axis."""
    return {k: np.concatenate([b[k] for b in batches], axis=1) for k in batches[0]}


def np_vtrace(mu, pi, r, v, v_next, term, trunc, gamma, rho_bar=1.0, c_bar=1.0):
    """Numpy V-trace (backward recursion, float64): ``(vs, pg_advantages)``."""
    ratio = np.exp(pi.astype(np.float64) - mu)
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    bootstrap = np.where(term, 0.0, v_next)
    delta = rho * (r + gamma * bootstrap - v)
    not_done = ~(term | trunc)
    vs_minus_v, acc = np.zeros_like(delta), np.zeros(delta.shape[1])
    for t in reversed(range(len(delta))):
        acc = delta[t] + gamma * c[t] * not_done[t] * acc
        vs_minus_v[t] = acc
    vs = v + vs_minus_v
    vs_next = bootstrap.copy()
    vs_next[:-1] = np.where(not_done[:-1], vs[1:], bootstrap[:-1])
    return vs, rho * (r + gamma * vs_next - v)


def test_stale_actor_batches_are_vtrace_corrected_on_the_learner():
    """Two actors at version 0, a learner 6 updates ahead: policy_lag 6, rho/c truncated, and the
    step's losses equal a numpy V-trace of the learner's own log-probabilities and values."""
    overrides = ["train.backend=torch", "agent.n_steps=8", "agent.n_epochs=1", "env.num_envs=2"]
    overrides += ["agent.optimizer.learning_rate=0.01", "agent.ent_coef=0.01", "agent.normalize_advantage=false"]
    config = validate_config(apply_overrides(load_shipped_config("impala_cartpole"), overrides))
    parts = assemble(config, get_plugin_manager())
    envs = [parts.make_vector_env(seed=s) for s in (0, 1)]
    spaces = (envs[0].single_observation_space, envs[0].single_action_space)
    actors = [parts.make_agent(*spaces, num_envs=2, seed=s) for s in (1, 2)]
    learner = parts.make_agent(*spaces, num_envs=2)  # learns from N = 4: two actors' fragments
    for actor in actors:
        actor.set_weights(learner.get_versioned_weights())
    obs = [env.reset(seed=i)[0] for i, env in enumerate(envs)]

    def fragments():
        out = []
        for i, (actor, env) in enumerate(zip(actors, envs)):
            batch, obs[i] = collect(actor, env, obs[i])
            assert "advantages" not in batch and batch["next_obs"].shape == (8, 2, 4)
            out.append(batch)
        return merge(out)

    fresh = fragments()
    first = learner.learn(fresh).metrics
    assert first["policy_lag"] == first["staleness"] == 0.0
    assert first["rho_truncated"] == first["c_truncated"] == 0.0  # on-policy: pi == mu
    for _ in range(5):
        learner.learn(fresh)
    assert learner.weights_version == 6

    stale = fragments()  # still acting with version 0
    assert np.all(stale["policy_version"] == 0)
    to_t, to_np = learner.backend.to_tensor, learner.backend.to_numpy
    log_pi, entropy, values = (
        to_np(x).reshape(8, 4)
        for x in learner.graph.evaluate_actions(to_t(stale["obs"].reshape(32, 4)), to_t(stale["actions"].reshape(32)))
    )
    next_values = to_np(learner.graph.value(to_t(stale["next_obs"].reshape(32, 4)))).reshape(8, 4)
    args = (stale["log_probs"], log_pi, stale["rewards"], values, next_values, stale["terminated"], stale["truncated"])
    vs, pg_adv = np_vtrace(*args, gamma=config.agent.gamma)
    ratio = np.exp(log_pi - stale["log_probs"])
    assert (ratio > 1.001).any() and (ratio < 0.999).any()

    result = learner.learn(stale).metrics
    assert result["policy_lag"] == result["staleness"] == 6.0 and learner.weights_version == 7
    assert result["rho_truncated"] == pytest.approx(np.mean(ratio > 1.001)) and result["rho_truncated"] > 0
    assert result["c_truncated"] == result["rho_truncated"]  # rho_bar == c_bar == 1
    assert result["pg_loss"] == pytest.approx(-np.mean(pg_adv * log_pi), rel=1e-4, abs=1e-5)
    assert result["vf_loss"] == pytest.approx(0.5 * np.mean((vs - values) ** 2), rel=1e-4, abs=1e-5)
    assert result["entropy"] == pytest.approx(np.mean(entropy), rel=1e-4)
    # Without the truncation the policy-gradient loss would be a different number.
    _, loose = np_vtrace(*args, gamma=config.agent.gamma, rho_bar=1e9, c_bar=1e9)
    assert abs(np.mean(loose * log_pi) - np.mean(pg_adv * log_pi)) > 1e-3

    for actor in actors:  # weights flow back with their version
        actor.set_weights(learner.get_versioned_weights())
        assert actor.weights_version == learner.weights_version == 7
        np.testing.assert_array_equal(
            actor.get_weights()["policy/value_head/W"], learner.get_weights()["policy/value_head/W"]
        )
    for env in envs:
        env.close()


def test_gaussian_policy_and_batches_without_next_obs():
    obs_space, act_space = FloatBox(-8.0, 8.0, shape=(3,)), FloatBox(-2.0, 2.0, shape=(1,))
    cfg = ImpalaConfig(n_steps=4, n_epochs=2, network={"hidden": [16]})
    agent = ImpalaAgent(cfg, obs_space, act_space, TorchBackend("eager", "cpu", seed=0), seed=0, num_envs=3)
    before = agent.get_weights()
    rng = np.random.default_rng(0)
    results = []
    for _ in range(8):
        obs = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
        nxt = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
        agent.observe(obs, agent.act(obs), rng.standard_normal(3), nxt, rng.random(3) < 0.2, rng.random(3) < 0.2)
        results.append(agent.update())
    assert [r is not None for r in results] == [False] * 3 + [True] + [False] * 3 + [True]
    assert agent.updates == agent.weights_version == 4 and results[3]["gradient_steps"] == 2
    assert "policy_lag" not in results[3] and all(np.isfinite(v) for v in results[3].values())
    assert results[3]["rho_truncated"] > 0  # the second pass over a batch is off-policy
    assert any(not np.array_equal(before[k], v) for k, v in agent.get_weights().items())
    for _ in range(4):
        obs = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
        agent.observe(obs, agent.act(obs), np.zeros(3), obs, np.zeros(3, bool), np.zeros(3, bool))
    batch = agent.take_rollout()
    assert set(batch) >= {"log_probs", "next_obs", "policy_version"} and "advantages" not in batch
    del batch["next_obs"]
    with pytest.raises(KeyError, match="next_obs"):
        agent.learn(batch)


@pytest.mark.learning
def test_impala_reaches_475_on_cartpole(tmp_path):
    raw = apply_overrides(
        load_config_file(CONFIGS / "impala_cartpole.yaml"),
        QUIET + ["train.seed=0", "train.total_timesteps=40000", "train.eval_interval=2048"],
    )
    config = validate_config(raw)
    summary = train(config, tmp_path)
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475.0 and summary["timesteps"] <= 40000

    # The checkpoint reproduces the evaluation in a fresh agent.
    env = gym.make("CartPole-v1")
    agent = make_agent(config, env.observation_space, env.action_space)
    agent.load(tmp_path / "checkpoint")
    result = agent.evaluate(env, episodes=10, seed=10_000 + config.train.seed)
    assert result["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])
