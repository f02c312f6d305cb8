"""The backend conformance suite: what every backend plugin runs on itself, in a few lines.

A backend plugin proves it fulfils the contract of :mod:`rlgraph_core.backend` by subclassing
:class:`BackendConformance` in its own tests::

    # tests/test_conformance.py of a backend plugin
    from rlgraph_core.testing.conformance import BackendConformance

    class TestConformance(BackendConformance):
        backend_name = "mybackend"          # its registry name; eager and static are both run

The suite checks, on the backend in each mode, against plain numpy: every op of
:data:`~rlgraph_core.backend.OPS_CONTRACT` (``CASES`` must cover the contract exactly, so a new op
cannot go untested) inside :meth:`Backend.function`, the in-place ops ``assign``/``polyak``
(float and tensor ``tau``), gradients through the differentiable ops, train steps against numpy
versions of torch's optimizer formulas (Adam, RMSprop, SGD, with and without momentum and
clipping), settable learning rates that never add a compiled program, optimizer state as numpy
under torch's key names (and a round trip through it), the split step (compute, then apply the
flat buffer) against the fused step, non-trainable variables never moving, and fused loops
against separate steps.

pytest is imported here (the module is a test harness); ``import rlgraph_core.testing`` does
not import this module.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.backend import OPS_CONTRACT, ops_contract_problems
from rlgraph_core.errors import NonFiniteError
from rlgraph_core.testing.harness import make_test_backend
from rlgraph_core.testing.op_cases import (
    ATOL,
    BIG,
    C0,
    CASES,
    FLAT,
    GRU_W,
    H0,
    LSTM_W,
    RESET,
    RTOL,
    SEQ,
    B,
    W,
    X,
    Y,
)
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm
from rlgraph_core.testing.optimizer_reference import (
    B0,
    OPT_ATOL,
    OPT_RTOL,
    SPECS,
    W0,
    XS,
    YS,
    NumpyTorchOptimizer,
    make_step,
    np_clip,
    np_loss_and_grads,
    spec,
)


class BackendConformance:
    """The contract tests; subclass as ``Test...`` and set :attr:`backend_name`.

    Attributes:
        backend_name: the registry name of the backend under test.
        modes: the modes to run (both by default).
    """

    backend_name: str = ""
    modes: tuple[str, ...] = ("eager", "static")

    @pytest.fixture(params=["eager", "static"])
    def backend(self, request):
        """The backend under test on the CPU, in each of :attr:`modes`."""
        if request.param not in self.modes:
            pytest.skip(f"{self.backend_name} is not tested in {request.param} mode")
        return make_test_backend(self.backend_name, request.param, device="cpu", seed=0)

    @pytest.fixture
    def run(self, backend):
        """``run(fn, *numpy_inputs)``: ``fn`` on tensors through ``backend.function``, numpy out."""

        def _run(fn, *inputs):
            out = backend.function(fn)(*[backend.to_tensor(x) for x in inputs])
            if isinstance(out, (tuple, list)):
                return [backend.to_numpy(o) for o in out]
            return None if out is None else backend.to_numpy(out)

        return _run

    # --- ops ------------------------------------------------------------------------------
    def test_ops_fulfil_the_protocol(self, backend):
        assert set(CASES) == set(OPS_CONTRACT)
        assert ops_contract_problems(backend.ops) == []

    @pytest.mark.parametrize("name,i", FLAT)
    def test_op_matches_numpy(self, backend, run, name, i):
        fn, inputs, expected = CASES[name][i]
        out = run(lambda *ts: fn(backend.ops, *ts), *inputs)
        expected = np.asarray(expected)
        assert out.shape == expected.shape
        if expected.dtype.kind == "f":
            assert out.dtype == np.float32
            np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)
        else:
            assert out.dtype == {"i": np.int64, "b": np.bool_}[expected.dtype.kind]
            np.testing.assert_array_equal(out, expected)

    def test_assign(self, backend):
        var = backend.variable("v", np.zeros((5, 3), np.float32))
        fn = backend.function(lambda x: backend.ops.assign(var, x * 2.0))
        fn(backend.to_tensor(X))
        np.testing.assert_allclose(backend.to_numpy(var), X * 2.0)
        fn(backend.to_tensor(Y))  # a second call reads the new input, not the first one
        np.testing.assert_allclose(backend.to_numpy(var), Y * 2.0)

    @pytest.mark.parametrize("tau", [1.0, 0.3])
    def test_polyak(self, backend, tau):
        targets = [backend.variable("t0", X.copy()), backend.variable("t1", B.copy())]
        sources = [backend.variable("s0", Y.copy()), backend.variable("s1", -B)]
        fn = backend.function(lambda: backend.ops.polyak(targets, sources, tau))
        fn()
        fn()
        exp0, exp1 = X.copy(), B.copy()
        for _ in range(2):
            exp0 = (1 - tau) * exp0 + tau * Y
            exp1 = (1 - tau) * exp1 + tau * (-B)
        np.testing.assert_allclose(backend.to_numpy(targets[0]), exp0, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(backend.to_numpy(targets[1]), exp1, rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(backend.to_numpy(sources[0]), Y)

    def test_polyak_with_a_tensor_tau(self, backend):
        targets = [backend.variable("t0", X.copy()), backend.variable("t1", B.copy())]
        sources = [backend.variable("s0", Y.copy()), backend.variable("s1", -B)]
        fn = backend.function(lambda tau: backend.ops.polyak(targets, sources, tau))
        fn(backend.to_tensor(np.float32(0.0)))
        np.testing.assert_array_equal(backend.to_numpy(targets[0]), X)
        fn(backend.to_tensor(np.float32(0.3)))
        np.testing.assert_allclose(backend.to_numpy(targets[0]), X + 0.3 * (Y - X), rtol=RTOL, atol=ATOL)
        fn(backend.to_tensor(np.float32(1.0)))
        np.testing.assert_array_equal(backend.to_numpy(targets[0]), Y)
        np.testing.assert_array_equal(backend.to_numpy(targets[1]), -B)

    # --- gradients ------------------------------------------------------------------------
    def test_stop_gradient_and_huber_gradients(self, backend):
        v = backend.variable("x", BIG)
        ops = backend.ops

        def loss(scale):
            return (ops.reduce_sum(ops.huber(v * scale, 1.0)) + ops.reduce_sum(ops.stop_gradient(v) * 100.0),)

        _, (g,) = backend.gradients(loss, [v], backend.to_tensor(np.float32(1.0)))
        np.testing.assert_allclose(g, np.clip(BIG, -1.0, 1.0), rtol=RTOL, atol=ATOL)

    def test_gather_last_and_dense_gradients(self, backend):
        w = backend.variable("w", W)
        b = backend.variable("b", B)
        unused = backend.variable("unused", B)
        frozen = backend.variable("frozen", B, trainable=False)
        ops = backend.ops
        idx = np.array([0, 3, 1, 2, 3], np.int64)

        def loss(x, i):
            return (ops.reduce_mean(ops.gather_last(ops.dense(x, w, b + frozen * 0.0), i)),)

        value, (gw, gb, gu, gf) = backend.gradients(
            loss, [w, b, unused, frozen], backend.to_tensor(X), backend.to_tensor(idx)
        )
        onehot = np.eye(4, dtype=np.float32)[idx] / len(idx)
        np.testing.assert_allclose(value, np.mean((X @ W + B)[np.arange(5), idx]), rtol=RTOL)
        np.testing.assert_allclose(gw, X.T @ onehot, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(gb, onehot.sum(0), rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(gu, 0.0)
        np.testing.assert_array_equal(gf, 0.0)

    @pytest.mark.parametrize("cell", ["lstm", "gru"])
    def test_recurrent_gradients_match_finite_differences(self, backend, cell):
        """Gradients of ``sum(y * R)`` through lstm / gru with resets, w.r.t. every weight and the
        initial state, against central differences of the float64 numpy reference."""
        weights = LSTM_W if cell == "lstm" else GRU_W
        state = [H0, C0] if cell == "lstm" else [H0]
        ref = reference_lstm if cell == "lstm" else reference_gru
        proj = np.random.default_rng(11).standard_normal((4, 3, 3))

        def ref_loss(values):
            return float(np.sum(ref(SEQ, *values, RESET)[0] * proj))

        values = [v.astype(np.float64) for v in (*state, *weights)]
        expected = []
        for k, value in enumerate(values):
            grad = np.zeros_like(value)
            for idx in np.ndindex(value.shape):
                plus = [v.copy() for v in values]
                minus = [v.copy() for v in values]
                plus[k][idx] += 1e-6
                minus[k][idx] -= 1e-6
                grad[idx] = (ref_loss(plus) - ref_loss(minus)) / 2e-6
            expected.append(grad)
        variables = [backend.variable(f"v{k}", v) for k, v in enumerate((*state, *weights))]
        ops = backend.ops

        def loss(x, reset, r):
            return (ops.reduce_sum(getattr(ops, cell)(x, *variables, reset=reset)[0] * r),)

        value, grads = backend.gradients(
            loss,
            variables,
            backend.to_tensor(SEQ),
            backend.to_tensor(RESET),
            backend.to_tensor(proj.astype(np.float32)),
        )
        np.testing.assert_allclose(value, ref_loss(values), rtol=1e-5)
        for k, (got, want) in enumerate(zip(grads, expected)):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=f"gradient of input {k}")

    # --- train steps ----------------------------------------------------------------------
    @pytest.mark.parametrize("name", list(SPECS))
    @pytest.mark.parametrize("clip", [None, 0.5], ids=["noclip", "clip"])
    def test_steps_match_torch_formulas(self, backend, name, clip):
        if backend.mode == "static" and clip is None:
            pytest.skip("static mode compiles one step per case: the clipped cases cover its update code")
        opt_spec = dict(SPECS[name], max_grad_norm=clip)
        step, w, b = make_step(backend, opt_spec)
        ref = NumpyTorchOptimizer(opt_spec, [W0.astype(np.float64), B0.astype(np.float64)])
        params = [W0.astype(np.float64), B0.astype(np.float64)]
        for k in range(5):
            x, y = XS[k : k + 8], YS[k : k + 8]
            loss_ref, grads = np_loss_and_grads(params[0], params[1], x, y)
            params = ref.step(params, np_clip(grads, clip))
            loss, td = step(backend.to_tensor(x), backend.to_tensor(y))
            np.testing.assert_allclose(backend.to_numpy(loss), loss_ref, rtol=OPT_RTOL)
            assert backend.to_numpy(td).shape == (8, 2)
            np.testing.assert_allclose(backend.to_numpy(w), params[0], rtol=OPT_RTOL, atol=OPT_ATOL)
            np.testing.assert_allclose(backend.to_numpy(b), params[1], rtol=OPT_RTOL, atol=OPT_ATOL)

    def test_learning_rate_is_settable_and_never_recompiles(self, backend):
        step, w, b = make_step(backend, spec("sgd", learning_rate=0.1))
        assert step.learning_rate == pytest.approx(0.1)
        counts = []
        for lr in (0.1, 0.0, 0.2):
            step.learning_rate = lr
            before = [backend.to_numpy(w).astype(np.float64), backend.to_numpy(b).astype(np.float64)]
            _, grads = np_loss_and_grads(*before, XS, YS)
            step(backend.to_tensor(XS), backend.to_tensor(YS))
            counts.append(step.trace_count)
            np.testing.assert_allclose(backend.to_numpy(w), before[0] - lr * grads[0], rtol=OPT_RTOL, atol=OPT_ATOL)
            np.testing.assert_allclose(backend.to_numpy(b), before[1] - lr * grads[1], rtol=OPT_RTOL, atol=OPT_ATOL)
        if backend.mode == "static":
            assert counts[0] is not None and counts[0] >= 1 and len(set(counts)) == 1, counts

    @pytest.mark.parametrize("name", ["adam", "rmsprop-momentum", "sgd-momentum"])
    def test_state_roundtrip(self, backend, name):
        a, wa, ba = make_step(backend, SPECS[name])
        for k in range(3):
            a(backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8]))
        state = a.get_state()
        assert all(isinstance(v, np.ndarray) for v in state.values())
        expected = {
            "adam": {"step", "exp_avg", "exp_avg_sq"},
            "rmsprop-momentum": {"step", "square_avg", "momentum_buffer"},
            "sgd-momentum": {"momentum_buffer"},
        }[name]
        assert {k.split("/", 1)[1] for k in state} == expected  # torch's state key names
        if "0/step" in state:
            assert float(state["0/step"]) == 3.0
        c, wc, bc = make_step(backend, SPECS[name])
        backend.assign_numpy(wc, backend.to_numpy(wa))
        backend.assign_numpy(bc, backend.to_numpy(ba))
        c.set_state(state)
        for s in (a, c):
            s(backend.to_tensor(XS[8:]), backend.to_tensor(YS[8:]))
        np.testing.assert_allclose(backend.to_numpy(wc), backend.to_numpy(wa), rtol=1e-6, atol=1e-7)
        with pytest.raises((ValueError, KeyError), match="not_a_slot"):
            c.set_state({"0/not_a_slot": np.zeros(2)})

    def test_split_step_equals_fused_step(self, backend):
        """compute_gradients, a hook that returns its input, apply_gradients == the fused step."""
        opt_spec = spec("adam", max_grad_norm=0.5)
        fused, wf, bf = make_step(backend, opt_spec)
        split, ws, bs = make_step(backend, opt_spec)
        seen = []
        split.gradient_hook = lambda flat: seen.append(flat.copy()) or flat
        for k in range(3):
            x, y = backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8])
            lf = fused(x, y)[0]
            ls = split(x, y)[0]
            np.testing.assert_allclose(backend.to_numpy(ls), backend.to_numpy(lf), rtol=1e-6)
        assert len(seen) == 3 and seen[0].shape == (split.num_parameters,) == (8,)
        np.testing.assert_allclose(backend.to_numpy(ws), backend.to_numpy(wf), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(bs), backend.to_numpy(bf), rtol=1e-5, atol=1e-6)

    def test_train_step_never_changes_non_trainable_or_unreached_variables(self, backend):
        w = backend.variable("w", W0)
        b = backend.variable("b", B0, trainable=False)
        unused = backend.variable("unused", B0)
        ops = backend.ops

        def loss_fn(x, y):
            return (ops.reduce_mean(ops.square(ops.dense(x, w, b) - y)),)

        step = backend.train_step(loss_fn, [w, b, unused], spec("adam"))
        for k in range(2):
            step(backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8]))
        assert not np.allclose(backend.to_numpy(w), W0)
        np.testing.assert_array_equal(backend.to_numpy(b), B0)
        np.testing.assert_array_equal(backend.to_numpy(unused), B0)
        state = step.get_state()
        for key in ("1/exp_avg", "2/exp_avg", "2/exp_avg_sq"):  # absent (never updated) or zeros
            np.testing.assert_array_equal(state.get(key, 0.0), 0.0, err_msg=key)

    # --- fused loops ----------------------------------------------------------------------
    def test_fused_loop_equals_separate_steps(self, backend):
        """K steps in one loop (inline step + polyak with a per-step tau) == K separate calls."""
        ops = backend.ops

        def model():
            w = backend.variable("w", W0)
            b = backend.variable("b", B0)
            tw = backend.variable("tw", W0, trainable=False)

            def loss_fn(x, y):
                err = ops.dense(x, w, b) + 0.5 * ops.stop_gradient(ops.dense(x, tw, b)) - y
                return ops.reduce_mean(ops.square(err)), ops.reduce_sum(err)

            return backend.train_step(loss_fn, [w, b], spec("adam", max_grad_norm=0.5)), w, tw

        idx = np.stack([np.arange(k, k + 8) for k in range(4)]).astype(np.int64)
        due = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
        x_all, y_all = backend.to_tensor(XS), backend.to_tensor(YS)

        step_a, wa, ta = model()
        losses = []
        for k in range(4):
            losses.append(backend.to_numpy(step_a(backend.to_tensor(XS[idx[k]]), backend.to_tensor(YS[idx[k]]))[0]))
            if due[k]:
                backend.function(lambda: ops.polyak([ta], [wa], 1.0))()

        step_b, wb, tb = model()

        def body(i, d, x, y):
            loss, s = step_b.inline(ops.take(x, i), ops.take(y, i))
            ops.polyak([tb], [wb], d)
            return loss, s

        loop = backend.fused_loop(body)
        out = loop([backend.to_tensor(idx), backend.to_tensor(due)], [x_all, y_all])
        assert backend.to_numpy(out[0]).shape == (4,) and backend.to_numpy(out[1]).shape == (4,)
        np.testing.assert_allclose(backend.to_numpy(out[0]), np.array(losses), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(wb), backend.to_numpy(wa), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(tb), backend.to_numpy(ta), rtol=1e-5, atol=1e-6)
        if backend.fuses_loops:
            count = loop.trace_count
            step_b.learning_rate = 0.01
            loop([backend.to_tensor(idx), backend.to_tensor(due)], [x_all, y_all])
            assert loop.trace_count == count  # a new learning rate is a value, never a program

    # --- non-finite updates (issue 19) ------------------------------------------------------
    @staticmethod
    def _snapshot(backend, step, variables):
        """Copies of the variables' values and the step's optimizer state (numpy)."""
        values = [np.array(backend.to_numpy(v), copy=True) for v in variables]
        return values, {k: np.array(v, copy=True) for k, v in step.get_state().items()}

    @staticmethod
    def _assert_unchanged(backend, step, variables, snapshot):
        values, state = snapshot
        for i, (v, before) in enumerate(zip(variables, values)):
            np.testing.assert_array_equal(backend.to_numpy(v), before, err_msg=f"variable {i} changed")
        after = step.get_state()
        assert sorted(after) == sorted(state)
        for key, before in state.items():
            np.testing.assert_array_equal(after[key], before, err_msg=f"optimizer state {key} changed")

    @pytest.mark.parametrize("name", ["adam-clip", "sgd-momentum"])
    @pytest.mark.parametrize("bad", ["loss", "gradient"])
    def test_a_non_finite_update_is_not_applied(self, backend, name, bad):
        """A NaN loss (a NaN input) or a NaN gradient (finite loss): the fused step raises
        NonFiniteError before anything moves: every variable and optimizer slot stays bit-identical,
        no program is added, and the next finite batch trains as usual."""

        opt_spec = spec("adam", max_grad_norm=0.5) if name == "adam-clip" else SPECS[name]
        w = backend.variable("w", W0)
        b = backend.variable("b", B0)
        ops = backend.ops

        def loss_fn(x, y, z):
            # d sqrt(z |b|) / db is finite for z = 1 and 0 * inf = NaN for z = 0 (the loss stays 0 there)
            err = ops.dense(x, w, b) - y
            return ops.reduce_mean(ops.square(err)) + ops.reduce_sum(ops.sqrt(ops.abs(b) * z)), ops.abs(err)

        step = backend.train_step(loss_fn, [w, b], opt_spec)
        ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)

        def call(x, y, z):
            return step(backend.to_tensor(x), backend.to_tensor(y), backend.to_tensor(z))

        for k in range(2):
            call(XS[k : k + 8], YS[k : k + 8], ones)
        count = step.trace_count
        snapshot = self._snapshot(backend, step, [w, b])
        x_bad = XS[2:10].copy()
        if bad == "loss":
            x_bad[3, 1] = np.nan
        with pytest.raises(NonFiniteError, match="not applied"):
            call(x_bad, YS[2:10], ones if bad == "loss" else zeros)
        self._assert_unchanged(backend, step, [w, b], snapshot)
        assert step.trace_count == count  # the check is part of the program: no recompile
        loss = call(XS[2:10], YS[2:10], ones)[0]
        assert np.isfinite(backend.to_numpy(loss))
        assert not np.array_equal(backend.to_numpy(w), snapshot[0][0])
        assert np.isfinite(backend.to_numpy(w)).all() and np.isfinite(backend.to_numpy(b)).all()
        assert step.trace_count == count

    def test_a_non_finite_step_stops_a_fused_loop(self, backend):
        """In a fused loop the first non-finite step and every later one are not applied (the
        steps before it are), and the error names the step of the round."""

        ops = backend.ops
        xs = XS.copy()
        xs[12, 0] = np.nan  # in rows 8..15 only

        def model():
            w = backend.variable("w", W0)
            b = backend.variable("b", B0)

            def loss_fn(x, y):
                err = ops.dense(x, w, b) - y
                return ops.reduce_mean(ops.square(err)), ops.reduce_sum(err)

            return backend.train_step(loss_fn, [w, b], spec("adam", max_grad_norm=0.5)), w, b

        ref, wr, br = model()
        for k in range(2):
            ref(backend.to_tensor(xs[k : k + 8]), backend.to_tensor(YS[k : k + 8]))

        step, w, b = model()

        def body(i, x, y):
            return tuple(step.inline(ops.take(x, i), ops.take(y, i)))

        loop = backend.fused_loop(body)
        x_all, y_all = backend.to_tensor(xs), backend.to_tensor(YS)
        starts = [[8, 0, 1, 2], [0, 1, 8, 2]]  # bad at step 1, then at step 3 of 4
        snapshot = self._snapshot(backend, step, [w, b])
        idx = np.stack([np.arange(s, s + 8) for s in starts[0]]).astype(np.int64)
        with pytest.raises(NonFiniteError, match="step 1 of 4.*not applied"):
            loop([backend.to_tensor(idx)], [x_all, y_all])
        self._assert_unchanged(backend, step, [w, b], snapshot)
        count = loop.trace_count
        idx = np.stack([np.arange(s, s + 8) for s in starts[1]]).astype(np.int64)
        with pytest.raises(NonFiniteError, match="step 3 of 4.*not applied"):
            loop([backend.to_tensor(idx)], [x_all, y_all])
        assert loop.trace_count == count
        np.testing.assert_allclose(backend.to_numpy(w), backend.to_numpy(wr), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(b), backend.to_numpy(br), rtol=1e-5, atol=1e-6)
        state, ref_state = step.get_state(), ref.get_state()
        assert sorted(state) == sorted(ref_state)
        for key, value in ref_state.items():
            np.testing.assert_allclose(state[key], value, rtol=1e-5, atol=1e-6, err_msg=key)
