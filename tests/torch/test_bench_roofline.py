"""benchmarks/roofline.py: the FLOP count of one update against torch's own FLOP counter.

Each test runs the matmuls of one gradient step (the hand-written loops' networks from the
benchmarks) under ``torch.utils.flop_counter.FlopCounterMode``. torch skips the input gradient
of a first layer whose input needs no gradient, which ``update_flops`` counts by its documented
rule (backward = 2x forward for every layer backpropagated through), so the expected torch count
is ``update_flops`` minus exactly those first-layer input-gradient terms.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import reference  # noqa: E402
import compare_loops  # noqa: E402
import roofline  # noqa: E402


def _count(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_ppo_update_flops_match_torch_counter():
    B, obs_dim, n_actions, hidden = 256, 4, 2, [64, 64]
    model = compare_loops.ActorCritic(obs_dim, n_actions, hidden)
    obs = torch.randn(B, obs_dim)

    def step():
        loss = model.actor(obs).logsumexp(-1).mean() + model.value(obs).pow(2).mean()
        loss.backward()

    skipped = 2 * (2 * B * obs_dim * hidden[0])  # input grads of both trunks' first layers
    expected = roofline.update_flops("ppo", obs_dim=obs_dim, n_actions=n_actions, hidden=hidden, batch=B)
    assert _count(step) == expected - skipped


@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_update_flops_match_torch_counter(double_q):
    B, obs_dim, n_actions, hidden = 64, 4, 2, [256, 256]
    q_net, target = reference.mlp(obs_dim, hidden, n_actions), reference.mlp(obs_dim, hidden, n_actions)
    obs, next_obs = torch.randn(B, obs_dim), torch.randn(B, obs_dim)

    def step():
        with torch.no_grad():
            next_q = target(next_obs)
            if double_q:
                next_q = next_q.gather(1, q_net(next_obs).argmax(1, keepdim=True))
        (q_net(obs).max(1).values - next_q.max(1).values).pow(2).mean().backward()

    skipped = 2 * B * obs_dim * hidden[0]
    expected = roofline.update_flops(
        "dqn", obs_dim=obs_dim, n_actions=n_actions, hidden=hidden, batch=B, double_q=double_q
    )
    assert _count(step) == expected - skipped


def test_sac_update_flops_match_torch_counter():
    B, obs_dim, act_dim, hidden = 256, 3, 1, [256, 256]
    actor = reference.Actor(obs_dim, hidden, act_dim)
    qs = [reference.Critic(obs_dim, hidden, act_dim) for _ in range(2)]
    targets = [reference.Critic(obs_dim, hidden, act_dim) for _ in range(2)]
    obs, actions, next_obs = torch.randn(B, obs_dim), torch.rand(B, act_dim), torch.randn(B, obs_dim)

    def step():
        with torch.no_grad():  # critic step
            next_a, _, _ = actor(next_obs)
            y = torch.min(*(t(next_obs, next_a) for t in targets))
        sum((q(obs, actions) - y).pow(2).mean() for q in qs).backward()
        pi, logp, _ = actor(obs)  # actor step: the gradient flows through both Qs into pi
        (logp - torch.min(*(q(obs, pi) for q in qs))).mean().backward()

    # input grads torch skips: both Qs' first layers in the critic step, the actor's first layer
    skipped = 2 * (2 * B * (obs_dim + act_dim) * hidden[0]) + 2 * B * obs_dim * hidden[0]
    expected = roofline.update_flops(
        "sac", obs_dim=obs_dim, act_dim=act_dim, actor_hidden=hidden, critic_hidden=hidden, batch=B
    )
    assert _count(step) == expected - skipped


def test_roofline_line_reports_fraction_of_measured_rate():
    rate = roofline.MatmulRate((((64, 256, 256), 50.0), ((2048, 2048, 2048), 100.0)))
    line = roofline.roofline_line(2e7, 100.0, rate)  # 2 GFLOP/s achieved
    assert "2.00 GFLOP/s" in line and "(4.0%)" in line and "(2.0%)" in line


def test_matmul_gflops_measures_every_size_and_restores_threads():
    threads = torch.get_num_threads()
    rate = roofline.matmul_gflops([(32, 32, 32), (64, 64, 64)], seconds=0.01, repeats=1)
    assert [s for s, _ in rate.rates] == [(32, 32, 32), (64, 64, 64)]
    assert all(g > 0 for _, g in rate.rates)
    assert torch.get_num_threads() == threads
