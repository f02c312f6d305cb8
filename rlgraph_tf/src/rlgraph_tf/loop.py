"""The fused update loop of the tf backend's static mode: K steps as one program.

:meth:`rlgraph_tf.backend.TFBackend.fused_loop` returns a :class:`TFFusedLoop`. Each distinct
input signature (dtypes and shapes of the per-step tensors and the constants) gets its own
program: a ``tf.function`` whose ``tf.while_loop`` runs the body once per step, in order
(``parallel_iterations=1``: step ``k + 1`` reads the variables step ``k`` wrote), and collects
every output in a ``tf.TensorArray``, returned stacked ``[K, ...]``. The program is compiled with
XLA where XLA accepts it and otherwise runs as a plain graph (:class:`CompiledFunction`'s
fallback, with a ``RuntimeWarning``).

XLA is the default (``TFBackend(jit_compile=True)``) because it was the faster program on both
representative workloads, measured with ``benchmarks/bench_tf_fused_loop.py`` (one CPU
thread, shared and heavily loaded machine, process CPU time per gradient step, median of 5):
PPO CartPole round (two 64-64 tanh trunks, minibatch 256, 20 steps, Adam, clip 0.5): XLA loop
390 us, plain-graph loop 1030 us (static single step 1275 us, eager 14900 us); DQN CartPole round
(256-256 relu, batch 64, double-Q Huber, 128 steps, hard target copy): XLA loop 900 us,
plain-graph loop 1520 us (static single step 2300 us, eager 15600 us).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

import tensorflow as tf

from rlgraph_tf.optim import CompiledFunction, new_guard, raise_non_finite


def _as_tensor(x: Any) -> tf.Tensor:
    """A tensor for ``x`` (variables are read: the loop takes values, not handles)."""
    if isinstance(x, tf.Variable):
        return x.read_value()
    return x if isinstance(x, tf.Tensor) else tf.convert_to_tensor(x)


def _signature(tensors: Sequence[tf.Tensor]) -> tuple:
    return tuple((t.dtype, tuple(t.shape)) for t in tensors)


class TFFusedLoop:
    """``loop(per_step, constants)``: ``body`` once per leading index of ``per_step``, compiled.

    See :meth:`rlgraph_core.backend.Backend.fused_loop` for the contract. The body's output
    dtypes and shapes, which the ``TensorArray`` s need before the loop runs, are read from a
    trace of one step of the body that is never executed (so the body's Python code runs
    twice per new signature; the program itself holds the body once).

    Args:
        body: ``body(*per_step_slices, *constants) -> tuple of tensors`` (fixed shapes).
        jit_compile: try XLA first for each new signature (after one XLA failure, later
            signatures start as plain graphs).
        device: TensorFlow device string to run under, or None for TF's default placement.
        guard: the backend's non-finite guard ``[ok, loss, norm]`` (a ``tf.Variable``) that its
            train steps' inline updates read and write; None: a new one (a body without steps).

    Non-finite updates: the guard is reset before each call; a train step's inline update
    clears ``ok`` on the first non-finite loss or gradient and applies nothing while it is clear,
    so that step and every later one leave the variables and optimizer state as they were. The
    program also stacks ``ok`` after every step (one more output, not shown to the caller); one
    read of the guard after the call decides whether to raise NonFiniteError naming the step.
    """

    def __init__(
        self,
        body: Callable[..., Sequence[Any]],
        jit_compile: bool,
        device: str | None = None,
        guard: tf.Variable | None = None,
    ):
        self.body = body
        self.guard = new_guard(device or "/CPU:0") if guard is None else guard
        self.jit_compile = bool(jit_compile)
        self.device = device
        self._programs: dict[tuple, CompiledFunction] = {}

    def __call__(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Run the body for every leading index of ``per_step``; its outputs stacked ``[K, ...]``."""
        scope = tf.device(self.device) if self.device is not None else contextlib.nullcontext()
        with scope:
            xs = [_as_tensor(x) for x in per_step]
            consts = [_as_tensor(c) for c in constants]
            if not xs:
                raise ValueError("fused_loop needs at least one per-step tensor (its leading dimension is K).")
            steps = {t.shape[0] for t in xs}
            if len(steps) != 1 or None in steps or any(t.shape.rank == 0 for t in xs):
                raise ValueError(
                    "fused_loop: every per-step tensor needs the same leading dimension K, got shapes "
                    f"{[tuple(t.shape) for t in xs]}."
                )
            key = (_signature(xs), _signature(consts))
            program = self._programs.get(key)
            if program is None:
                program = self._programs[key] = self._program(xs, consts)
            self.guard.assign([1.0, 0.0, 0.0])  # reset: no step of this round has failed yet
            *outputs, ok = program(*xs, *consts)
            if not program.jit_compile:
                self.jit_compile = False  # XLA refused this body: do not retry it per signature
            guard = self.guard.numpy()  # one host read per round, after the program
            if guard[0] < 0.5:
                flags = ok.numpy()
                raise_non_finite(guard[1:], int((flags < 0.5).argmax()) + 1, int(flags.shape[0]))
        return tuple(outputs)

    def _output_specs(self, xs: Sequence[tf.Tensor], consts: Sequence[tf.Tensor]) -> list[tf.TensorSpec]:
        """Dtype and shape of each body output, from an unexecuted trace of one step."""
        specs = [tf.TensorSpec(t.shape[1:], t.dtype) for t in xs] + [tf.TensorSpec(t.shape, t.dtype) for t in consts]
        probe = tf.function(lambda *args: tuple(self.body(*args))).get_concrete_function(*specs)
        out = []
        for i, o in enumerate(probe.structured_outputs):
            if not isinstance(o, tf.Tensor):
                raise TypeError(
                    f"fused_loop: the body's output {i} is {type(o).__name__}; it must return a tuple of tensors."
                )
            if not o.shape.is_fully_defined():
                raise ValueError(f"fused_loop: the body's output {i} has no fixed shape ({o.shape}).")
            out.append(tf.TensorSpec(o.shape, o.dtype))
        return out

    def _program(self, xs: Sequence[tf.Tensor], consts: Sequence[tf.Tensor]) -> CompiledFunction:
        """The compiled K-step loop for the signature of ``xs`` and ``consts``."""
        out_specs = self._output_specs(xs, consts)
        count, steps = len(xs), int(xs[0].shape[0])
        body = self.body

        def fused_loop(*args):
            per_step, constants = args[:count], args[count:]

            def step(k, *arrays):
                outputs = tuple(body(*(x[k] for x in per_step), *constants))
                outputs = (*outputs, self.guard.read_value()[0])  # the guard's ok after this step
                return (k + 1, *(a.write(k, tf.stop_gradient(o)) for a, o in zip(arrays, outputs)))

            specs = [*out_specs, tf.TensorSpec([], tf.float32)]
            arrays = [tf.TensorArray(s.dtype, size=steps, element_shape=s.shape) for s in specs]
            _, *arrays = tf.while_loop(
                lambda k, *_: k < steps, step, (tf.constant(0, tf.int32), *arrays), parallel_iterations=1
            )
            return tuple(a.stack() for a in arrays)

        return CompiledFunction(fused_loop, self.jit_compile, "fused loop", self.device)

    @property
    def trace_count(self) -> int:
        """Programs traced so far: one per distinct input signature (probe traces not counted)."""
        return sum(int(p.experimental_get_tracing_count()) for p in self._programs.values())

    @property
    def jit_compiled(self) -> bool:
        """Whether new signatures are compiled with XLA (False once XLA refused the body)."""
        return self.jit_compile
