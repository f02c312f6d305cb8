"""Eager mode's ForeachAdam against torch.optim.Adam(foreach=True): the same bits, the same state."""

from __future__ import annotations

import torch

from rlgraph_torch.eager_optim import ForeachAdam


def _params(seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    shapes = [(4, 8), (8,), (8, 2), (2,)]
    return [torch.randn(shape, generator=gen).requires_grad_() for shape in shapes]


def _grads(step: int, params: list[torch.Tensor]) -> list[torch.Tensor | None]:
    gen = torch.Generator().manual_seed(100 + step)
    grads: list[torch.Tensor | None] = [torch.randn(p.shape, generator=gen) * (step + 1) for p in params]
    if step in (1, 2):
        grads[3] = None  # a parameter the loss did not reach: skipped, its step count lags
    return grads


def test_foreach_adam_is_torch_optim_adam_bit_for_bit():
    ours, theirs = _params(0), _params(0)
    kwargs = {"lr": 3e-3, "betas": (0.8, 0.99), "eps": 1e-5}
    mine = ForeachAdam(ours, **kwargs)
    reference = torch.optim.Adam(theirs, foreach=True, **kwargs)
    for step in range(6):
        if step == 3:  # a schedule writes the rate between steps
            mine.param_groups[0]["lr"] = reference.param_groups[0]["lr"] = 1e-3
        for opt, params in ((mine, ours), (reference, theirs)):
            opt.zero_grad(set_to_none=True)
            for p, g in zip(params, _grads(step, params)):
                p.grad = None if g is None else g.clone()
            opt.step()
        for a, b in zip(ours, theirs):
            assert torch.equal(a, b), f"step {step}"
    for a, b in zip(ours, theirs):
        assert reference.state[b].keys() == mine.state[a].keys()
        for key, value in reference.state[b].items():
            assert torch.equal(mine.state[a][key], value), key
            assert mine.state[a][key].dtype == value.dtype, key
    assert float(mine.state[ours[3]]["step"]) == 4.0  # skipped twice


def test_foreach_adam_carries_on_from_a_restored_state():
    """State written into ``state`` (a checkpoint's, as TorchTrainStep.set_state does) is read, not a stale count."""
    ours, theirs = _params(1), _params(1)
    mine, reference = ForeachAdam(ours, lr=1e-2), torch.optim.Adam(theirs, lr=1e-2, foreach=True)
    for p in ours:
        p.grad = torch.ones_like(p)
    mine.step()  # one step of its own, then a state with 5 steps is restored over it
    for p, q in zip(ours, theirs):
        q.grad = torch.full_like(q, 0.5)
    for _ in range(5):
        reference.step()
    with torch.no_grad():
        for p, q in zip(ours, theirs):
            p.copy_(q)
            mine.state[p] = {k: v.clone() for k, v in reference.state[q].items()}
    for p, q in zip(ours, theirs):
        p.grad, q.grad = torch.full_like(p, -2.0), torch.full_like(q, -2.0)
    mine.step()
    reference.step()
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
        assert float(mine.state[a]["step"]) == 6.0
