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


def replay_state(agent, optimizer_arrays: dict) -> tuple[dict, dict]:
    """Checkpoint arrays and counters of a replay agent: optimizer state (already prefixed),
    the memory's ``state_dict`` under ``memory/``, counters and the exploration RNG state."""
    arrays = dict(optimizer_arrays)
    arrays.update({f"memory/{k}": v for k, v in agent.memory.state_dict().items()})
    counters = {"timesteps": agent.timesteps, "updates": agent.updates, "last_train": agent._last_train,
                "rng": agent.rng.bit_generator.state}
    return arrays, counters


def restore_replay_state(agent, arrays: dict, counters: dict) -> None:
    """Inverse of :func:`replay_state` (optimizer state is left to the agent).

    The memory is validated and loaded first, so a mismatch changes nothing. Pending n-step
    transitions are dropped: they belong to episodes a resumed run does not continue.
    """
    from rlgraph_core.agents.base import Agent
    from rlgraph_core.errors import CheckpointError

    memory_state = {k[len("memory/"):]: v for k, v in arrays.items() if k.startswith("memory/")}
    if memory_state:
        try:
            agent.memory.load_state_dict(memory_state)  # validates everything before changing
        except ValueError as exc:
            raise CheckpointError(
                f"The checkpoint's replay memory cannot be restored into this agent's "
                f"'{agent.config.memory.type}' memory (capacity {agent.config.memory.capacity}): {exc} "
                f"Resume with the memory settings the checkpoint was written with."
            ) from None
    agent.nstep.reset()
    Agent.set_state(agent, arrays, counters)
    agent._last_train = int(counters.get("last_train", 0))
    if "rng" in counters:
        agent.rng.bit_generator.state = counters["rng"]
