"""Agents driven purely through the actor / learner roles, as distributed executors drive them."""

import numpy as np
import pytest

from rlgraph_core.agents.base import LearnResult, VersionedWeights
from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, load_shipped_config, validate_config
from rlgraph_core.memories import PrioritizedReplay, ReplayMemory
from rlgraph_core.plugins import get_plugin_manager

pytestmark = pytest.mark.skipif("torch" not in get_plugin_manager().names("backends"), reason="needs rlgraph-torch")


def _assembly(*overrides, base=DEFAULT_CONFIG):
    config = validate_config(apply_overrides(base, ["train.backend=torch", *overrides]))
    return assemble(config, get_plugin_manager())


def _collect(agent, envs, obs, steps):
    """``steps`` vector steps with the actor's exploring policy; a time-major trajectory."""
    keys = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")
    traj = {k: [] for k in keys}
    for _ in range(steps):
        actions = agent.act(obs)
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        true_next = next_obs.copy()
        if "_final_obs" in infos:
            for i in np.flatnonzero(infos["_final_obs"]):
                true_next[i] = infos["final_obs"][i]
        for k, v in zip(keys, (obs, actions, rewards, true_next, terminated, truncated)):
            traj[k].append(np.asarray(v))
        obs = next_obs
    return {k: np.stack(v) for k, v in traj.items()}, obs


@pytest.mark.learning
def test_dqn_learns_cartpole_through_actor_and_learner_roles():
    """Actor: act + postprocess; replay outside both agents; learner: learn; weights flow back."""
    parts = _assembly()
    cfg = parts.config
    envs = parts.make_vector_env(seed=0)
    spaces = (envs.single_observation_space, envs.single_action_space)
    actor = parts.make_agent(*spaces, num_envs=cfg.env.num_envs, with_memory=False)
    learner = parts.make_agent(*spaces, backend=parts.backend_factory(), with_memory=False)
    replay = ReplayMemory(cfg.agent.memory.capacity, seed=0)
    eval_env = parts.make_eval_env()
    obs, _ = envs.reset(seed=0)
    best, fragment = -np.inf, cfg.agent.train_freq
    # The default config's learning run (tests/torch/test_learning.py) shows 475; through the roles
    # 300 shows the same wiring (weights flow back, only the learner updates) at lower cost.
    while actor.timesteps < 60_000 and best < 300:
        trajectory, obs = _collect(actor, envs, obs, fragment)
        batch = actor.postprocess(trajectory)
        assert set(batch["policy_version"]) == {learner.weights_version}  # the actor is up to date
        replay.insert({k: v for k, v in batch.items() if k != "policy_version"})
        learner.timesteps = actor.timesteps  # the learner's schedules follow the global step count
        if actor.timesteps >= cfg.agent.learning_starts:
            for _ in range(cfg.agent.gradient_steps):
                result = learner.learn(replay.sample(cfg.agent.batch_size))
            assert isinstance(result, LearnResult) and np.isfinite(result.metrics["loss"])
            weights = learner.get_versioned_weights()
            assert isinstance(weights, VersionedWeights) and weights.version == learner.updates
            actor.set_weights(weights)
            assert actor.weights_version == learner.weights_version
            if actor.timesteps % 2_500 < fragment:
                best = max(best, learner.evaluate(eval_env, 10, seed=10_000)["eval_return_mean"])
    envs.close()
    assert learner.updates > 0 and actor.updates == 0  # only the learner took gradient steps
    assert best >= 300, f"DQN through roles reached only {best} in {actor.timesteps} steps"


def test_prioritized_actor_computes_initial_priorities_and_learner_returns_new_ones():
    """Ape-X's flow: |TD| from the actor's weights at insert, new priorities from the learner."""
    parts = _assembly(
        "agent.memory.type=prioritized_replay", "agent.n_step=3", "agent.network.hidden=[16]", "env.num_envs=2"
    )
    envs = parts.make_vector_env(seed=1)
    spaces = (envs.single_observation_space, envs.single_action_space)
    actor = parts.make_agent(*spaces, num_envs=2, with_memory=False)
    learner = parts.make_agent(*spaces, with_memory=False)
    obs, _ = envs.reset(seed=1)
    trajectory, obs = _collect(actor, envs, obs, 40)
    batch = actor.postprocess(trajectory)
    envs.close()
    n = len(batch["rewards"])
    assert 0 < n <= 80 and actor.timesteps == 80
    assert set(batch) >= {"obs", "actions", "rewards", "next_obs", "terminals", "discounts", "priorities"}
    # Initial priorities equal the |TD| the actor's own loss gives for those transitions.
    probe = {k: batch[k] for k in ("obs", "actions", "rewards", "next_obs", "terminals", "discounts")}
    probe["weights"] = np.ones(n, np.float32)
    np.testing.assert_allclose(batch["priorities"], actor._td_errors(probe), rtol=1e-6)
    shard = PrioritizedReplay(1000, seed=0)
    idx = shard.insert({k: v for k, v in batch.items() if k not in ("priorities", "policy_version")})
    shard.update_priorities(idx, batch["priorities"])
    sample = shard.sample(16)
    result = learner.learn(sample)
    assert result.priorities is not None and result.priorities.shape == (16,)
    np.testing.assert_array_equal(result.indices, sample["indices"])
    assert learner.weights_version == 1 and result.metrics["updates"] == 1.0


def test_ppo_actor_postprocesses_rollouts_and_learner_tracks_staleness():
    """On-policy: GAE on the actor, rollouts of two actors concatenated on the learner."""
    parts = _assembly(
        "agent.n_steps=16",
        "agent.batch_size=32",
        "agent.n_epochs=2",
        "env.num_envs=2",
        base=load_shipped_config("ppo_cartpole"),
    )
    envs = [parts.make_vector_env(seed=s) for s in (0, 1)]
    spaces = (envs[0].single_observation_space, envs[0].single_action_space)
    actors = [parts.make_agent(*spaces, num_envs=2, seed=s) for s in (0, 1)]
    learner = parts.make_agent(*spaces, num_envs=4)
    batches = []
    for actor, env in zip(actors, envs):
        obs, _ = env.reset(seed=actor.seed)
        batch = None
        while batch is None:
            actions = actor.act(obs)
            next_obs, rewards, terminated, truncated, _ = env.step(actions)
            actor.observe(obs, actions, rewards, next_obs, terminated, truncated)
            obs = next_obs
            batch = actor.take_rollout()
        env.close()
        # GAE on the actor equals GAE recomputed from the rollout.
        adv, ret = actor.compute_advantages(batch)
        np.testing.assert_allclose(batch["advantages"], adv, rtol=1e-6)
        batches.append(batch)
    merged = {k: np.concatenate([b[k] for b in batches], axis=1) for k in batches[0]}
    first = learner.learn(merged)
    assert first.metrics["staleness"] == 0.0 and learner.weights_version == learner.updates > 0
    second = learner.learn(merged)  # the same data again: now as old as the first update round
    assert second.metrics["staleness"] == first.metrics["gradient_steps"]
    for actor in actors:
        actor.set_weights(learner.get_versioned_weights())
        assert actor.weights_version == learner.weights_version
        for name, value in learner.get_weights().items():
            np.testing.assert_array_equal(actor.get_weights()[name], value)


def test_an_agent_counts_what_it_observes_only_while_no_run_counter_owns_its_timesteps():
    """Alone (an actor, a loop written by hand) an agent counts the env steps it observes; under a
    run's counter only the counter writes ``agent.timesteps``; released, the agent counts again."""
    from rlgraph_core.execution.counters import StepCounter

    parts = _assembly("agent.network.hidden=[8]", "env.num_envs=2")
    envs = parts.make_vector_env(seed=0)
    agent = parts.make_agent(envs.single_observation_space, envs.single_action_space, num_envs=2)
    envs.close()
    obs = np.zeros((2, 4), np.float32)
    step = (obs, np.zeros(2, np.int64), np.ones(2, np.float32), obs, np.zeros(2, bool), np.zeros(2, bool))
    agent.observe(*step)
    assert agent.timesteps == 2
    counter = StepCounter(agent)
    agent.observe(*step)
    assert agent.timesteps == 2  # the counter owns the count: the agent does not write it
    assert counter.add_env_steps(2) == 4 and agent.timesteps == 4
    counter.release()
    agent.observe(*step)
    assert agent.timesteps == 6
