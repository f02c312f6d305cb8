"""Plain-numpy LSTM and GRU: the reference every backend's ``lstm`` / ``gru`` op is checked against.

The math and the weight layout are those of the contract (:meth:`rlgraph_core.backend.Ops.lstm`,
:meth:`~rlgraph_core.backend.Ops.gru`): weights ``[in, out]`` as for ``dense``, gate blocks along
the last axis in torch's order (LSTM ``i, f, g, o``; GRU ``r, z, n``), and a reset mask that zeroes
the state before every step where an episode starts. Written as one explicit loop over time in
float64, so it reads as the equations and rounds less than any backend.
"""

from __future__ import annotations

import numpy as np


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _keep(reset: np.ndarray | None, t: int, batch: int) -> np.ndarray:
    """``[B, 1]``: 0 where step ``t`` starts an episode (state zeroed), else 1."""
    if reset is None:
        return np.ones((batch, 1))
    return 1.0 - np.asarray(reset[t], np.float64).reshape(batch, 1)


def reference_lstm(x, h, c, w_x, w_h, b, reset=None):
    """One-layer LSTM over ``x [T, B, F]`` from ``h, c [B, H]``: ``(y [T, B, H], h_T, c_T)`` in float64.

    ``z = x_t w_x + h w_h + b`` split into ``i, f, g, o``; ``c' = s(f) c + s(i) tanh(g)``;
    ``h' = s(o) tanh(c')``. Where ``reset[t, b]`` is true, ``h`` and ``c`` are zeroed before step ``t``.
    """
    x, h, c = (np.asarray(a, np.float64) for a in (x, h, c))
    w_x, w_h, b = (np.asarray(a, np.float64) for a in (w_x, w_h, b))
    hidden = h.shape[-1]
    ys = []
    for t in range(x.shape[0]):
        keep = _keep(reset, t, x.shape[1])
        h, c = h * keep, c * keep
        z = x[t] @ w_x + h @ w_h + b
        i, f, g, o = (z[:, k * hidden : (k + 1) * hidden] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h, c


def reference_gru(x, h, w_x, w_h, b_x, b_h, reset=None):
    """One-layer GRU over ``x [T, B, F]`` from ``h [B, H]``: ``(y [T, B, H], h_T)`` in float64.

    ``r = s(x w_xr + b_xr + h w_hr + b_hr)``, ``z`` likewise, ``n = tanh(x w_xn + b_xn + r (h w_hn +
    b_hn))``, ``h' = (1 - z) n + z h`` (torch's GRU, and keras' with ``reset_after=True``).
    Where ``reset[t, b]`` is true, ``h`` is zeroed before step ``t``.
    """
    x, h = np.asarray(x, np.float64), np.asarray(h, np.float64)
    w_x, w_h, b_x, b_h = (np.asarray(a, np.float64) for a in (w_x, w_h, b_x, b_h))
    hidden = h.shape[-1]
    ys = []
    for t in range(x.shape[0]):
        h = h * _keep(reset, t, x.shape[1])
        gx, gh = x[t] @ w_x + b_x, h @ w_h + b_h
        r = _sigmoid(gx[:, :hidden] + gh[:, :hidden])
        z = _sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
        n = np.tanh(gx[:, 2 * hidden :] + r * gh[:, 2 * hidden :])
        h = (1.0 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h
