"""Multi-agent checks for a backend plugin's tests (issue 32): the two kinds of PettingZoo run train,
evaluate, save, load and resume on the plugin's backend in a mode, in a few seconds each.

* :func:`check_self_play_run`: masked PPO self-play on PettingZoo's tic-tac-toe with one shared
  policy and a pool of frozen copies (one small convolution, so a static build compiles quickly).
* :func:`check_parallel_run`: two independent PPO policies on MPE ``simple_spread`` (N=2).

Each trains a few rollouts through the public facade (``make``/``load`` passed in: the api is a
floor above this module), saves, loads into a fresh algorithm (weights, pool and counters equal),
evaluates both greedily (equal results), then trains the loaded one on to a longer budget.
Needs ``pettingzoo`` (and ``mpe2`` for the Parallel env): the ``pettingzoo`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TICTACTOE", "SPREAD", "check_parallel_run", "check_self_play_run"]

TICTACTOE = "pettingzoo:pettingzoo.classic.tictactoe_v3"
SPREAD = "pettingzoo:mpe2.simple_spread_v3"

#: a PPO small enough to build and compile in seconds: 2 copies x 2 seats/agents = 4 rows
_PPO = dict(network={"hidden": [16]}, num_envs=2, n_steps=8, batch_size=16, n_epochs=2)
#: the board (3, 3, 2 int8 planes) through one 3x3 convolution
_BOARD = {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3}], "hidden": [16]}
_BOARD.update(scale=1.0, channels="last")


def _assert_same_weights(a: dict[str, np.ndarray], b: dict[str, np.ndarray], what: str) -> None:
    assert sorted(a) == sorted(b), f"{what}: other weight names"
    differing = [k for k in a if not np.array_equal(a[k], b[k])]
    assert not differing, f"{what}: weights differ: {differing[:5]}"


def _round_trip(make, load, settings: dict[str, Any], folder: Path, steps: int) -> tuple[Any, Any]:
    """Train ``steps`` (nothing written but the saved checkpoint), save, load; both algorithms,
    after checking that the load has every policy's weights and counters."""
    algo = make("ppo", **settings).learn(steps)
    algo.save(folder / "saved")
    loaded = load(folder / "saved")
    _assert_same_weights(algo.agent.get_weights(), loaded.agent.get_weights(), "saved and loaded")
    assert loaded.agent.timesteps == algo.agent.timesteps == steps
    for name, policy in algo.agent.policies.items():
        other = loaded.agent.policies[name]
        assert (other.updates, other.timesteps) == (policy.updates, policy.timesteps), name
        assert policy.updates > 0, f"policy '{name}' never learned in {steps} steps"
    return algo, loaded


def _resumes(algo, loaded, steps: int) -> None:
    """``loaded`` (``algo``'s checkpoint) trains on to ``steps``: every policy learns on."""
    loaded.learn(steps - loaded.agent.timesteps)
    assert loaded.agent.timesteps == steps
    for name, policy in algo.agent.policies.items():
        assert loaded.agent.policies[name].updates > policy.updates, f"policy '{name}' did not learn after the load"


def check_self_play_run(make, load, backend: str, mode: str, folder: str | Path, steps: int = 64) -> None:
    """Self-play PPO on tic-tac-toe (shared policy, pool of copies every update) on ``backend``/``mode``:
    trains ``steps`` moves, evaluates against the random player with no illegal move, saves and
    loads (weights, pool copies, counters equal; the loaded one plays the same greedy games), and
    resumes to ``2 * steps`` against the same pool."""
    folder = Path(folder)
    settings = dict(
        _PPO,
        env={"id": TICTACTOE, "num_envs": 2},
        network=_BOARD,
        backend=backend,
        mode=mode,
        device="cpu",
        seed=0,
        multi_agent={"self_play": {"opponent": "pool", "snapshot_every": 1, "pool_size": 2, "latest_prob": 0.2}},
        eval_interval=steps,
        eval_episodes=4,
    )
    algo, loaded = _round_trip(make, load, settings, folder, steps)
    pool, same = algo.agent.opponents.get_state(), loaded.agent.opponents.get_state()
    assert pool[1]["sizes"]["shared"] == 2, f"no pool of 2 copies after {steps} moves: {pool[1]}"
    assert pool[1] == same[1]
    _assert_same_weights(pool[0], same[0], "the opponent pool")
    first, second = algo.evaluate(episodes=8, seed=5), loaded.evaluate(episodes=8, seed=5)
    assert first["eval_illegal_moves"] == 0
    assert abs(first["eval_win_rate"] + first["eval_draw_rate"] + first["eval_loss_rate"] - 1) < 1e-9
    assert first == second, (first, second)
    _resumes(algo, loaded, 2 * steps)
    assert loaded.agent.opponents.get_state()[1]["sizes"]["shared"] == 2


def check_parallel_run(make, load, backend: str, mode: str, folder: str | Path, steps: int = 128) -> None:
    """Two independent PPO policies (one per agent) on MPE simple_spread (N=2, 25-step episodes) on
    ``backend``/``mode``: trains ``steps`` agent steps, saves and loads (each policy's weights and
    counters equal; the loaded one's greedy evaluation equals the original's, per policy too), and
    resumes to ``2 * steps``."""
    folder = Path(folder)
    settings = dict(
        _PPO,
        env={"id": SPREAD, "num_envs": 2, "kwargs": {"N": 2, "max_cycles": 25, "continuous_actions": False}},
        backend=backend,
        mode=mode,
        device="cpu",
        seed=0,
        multi_agent={"policies": {"a0": {}, "a1": {}}, "policy_mapping": {"agent_0": "a0", "agent_1": "a1"}},
        eval_interval=steps,
        eval_episodes=1,
    )
    algo, loaded = _round_trip(make, load, settings, folder, steps)
    assert set(algo.agent.policies) == {"a0", "a1"}
    first, second = algo.evaluate(episodes=2, seed=5), loaded.evaluate(episodes=2, seed=5)
    assert {"a0/eval_return_mean", "a1/eval_return_mean"} <= set(first)
    assert first == second, (first, second)
    _resumes(algo, loaded, 2 * steps)
