"""The update schedule shared by replay-based (off-policy) agents such as DQN and SAC."""

from __future__ import annotations


def due_gradient_steps(agent, batch) -> int:
    """How many gradient steps a replay agent should take now (0: none).

    With an explicit ``batch`` it is always one step. Otherwise the agent's config decides:
    nothing before ``learning_starts`` env steps or while the memory holds less than a batch,
    then ``gradient_steps`` steps every ``train_freq`` env steps. Marks the round as done.
    """
    if batch is not None:
        return 1
    cfg = agent.config
    if agent.timesteps < cfg.learning_starts or len(agent.memory) < cfg.batch_size:
        return 0
    if agent.timesteps - agent._last_train < cfg.train_freq:
        return 0
    agent._last_train = agent.timesteps
    return cfg.gradient_steps
