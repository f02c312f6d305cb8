"""Build one component on one backend from spaces and drive it with numpy.

:class:`ComponentTest` is how a component is tested alone: give it the component, the input
spaces of every root API method and a backend (an instance, or a ``(name, mode)`` pair as made
by :func:`backend_params`); it builds the component with :func:`rlgraph_core.graph.build` and
then takes numpy in and gives numpy out::

    test = ComponentTest(DenseLayer(3), {"call": {"x": FloatBox(shape=(4,)).with_batch_rank()}},
                         ("numpy", "eager"))
    test.set_weights({"W": w, "b": b})
    y = test.call("call", x)                      # numpy in, numpy out
    loss, grads = test.gradients("call", x, objective=lambda ops, y: ops.reduce_sum(y))

:func:`backend_params` gives pytest parameters for every available ``(backend, mode)`` pair so
one test runs on the numpy harness, and on every installed framework backend in both modes.
"""

from __future__ import annotations

import os
import types
from typing import Any, Callable, Iterable

import numpy as np

from rlgraph_core.backend.contract import Backend
from rlgraph_core.backend.settings import backend_entry
from rlgraph_core.errors import BuildError
from rlgraph_core.graph import Component, build
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.spaces import Dict, Space
from rlgraph_core.testing.numpy_backend import NumpyBackend

#: ``objective(ops, outputs) -> scalar tensor``: turns an API method's outputs into the scalar
#: whose gradients :meth:`ComponentTest.gradients` computes.
Objective = Callable[[Any, Any], Any]

#: Key prefix of gradients taken with respect to API inputs (see :meth:`ComponentTest.gradients`).
INPUT_PREFIX = "input:"


def available_backends() -> dict[str, Callable[..., Backend]]:
    """Every backend a test may run on: ``{"numpy": NumpyBackend, **registered backends}``.

    The numpy harness comes first; the others are whatever the plugin manager finds installed
    (e.g. ``torch`` when rlgraph-torch is installed). A plugin that registers the name ``numpy``
    itself is ignored here so the harness stays available.
    """

    out: dict[str, Callable[..., Backend]] = {"numpy": NumpyBackend}

    for name, entry in get_plugin_manager().names("backends").items():
        if name != "numpy":
            out[name] = backend_entry(entry.obj)[0]
    return out


#: Environment variable restricting the pairs tests run on, e.g. ``numpy`` (what a core-only
#: venv runs), ``numpy,torch-eager`` or ``torch`` (both modes). Unset: every available pair.
SELECT_ENV = "RLGRAPH_TEST_BACKENDS"


def backend_pairs() -> list[tuple[str, str]]:
    """Every available ``(backend, mode)`` pair: numpy eager, then each plugin backend in both modes.

    When the environment variable ``RLGRAPH_TEST_BACKENDS`` is set (comma-separated ``name`` or
    ``name-mode`` entries), only the matching pairs are returned; plugin backends are not even
    loaded when it names only ``numpy``.
    """
    selected = [s.strip() for s in os.environ.get(SELECT_ENV, "").split(",") if s.strip()]
    names = ["numpy"] if selected and all(s.split("-")[0] == "numpy" for s in selected) else list(available_backends())
    pairs = [("numpy", "eager")]
    for name in names:
        if name != "numpy":
            pairs += [(name, "eager"), (name, "static")]
    if not selected:
        return pairs
    known = {f"{n}-{m}" for n, m in pairs} | {n for n, _ in pairs}
    unknown = [s for s in selected if s not in known]
    if unknown:
        raise KeyError(f"{SELECT_ENV} names {unknown}, which are not available; available: {sorted(known)}.")
    return [(n, m) for n, m in pairs if n in selected or f"{n}-{m}" in selected]


def backend_params(modes: Iterable[str] = ("eager", "static")) -> list:
    """pytest parameters (ids like ``torch-static``) for every pair of :func:`backend_pairs`.

    Args:
        modes: keep only plugin-backend pairs in these modes; the numpy pair is always kept.

    Use as ``@pytest.fixture(params=backend_params())`` and pass ``request.param`` (a
    ``(name, mode)`` tuple) to :class:`ComponentTest` or :func:`make_test_backend`.
    pytest is imported only when this is called, so rlgraph-core does not depend on it.
    """
    import pytest

    modes = tuple(modes)
    return [
        pytest.param(pair, id=f"{pair[0]}-{pair[1]}")
        for pair in backend_pairs()
        if pair[0] == "numpy" or pair[1] in modes
    ]


def make_test_backend(name: str, mode: str = "eager", device: str = "cpu", seed: int | None = 0) -> Backend:
    """Instantiate the available backend ``name`` (numpy included) in ``mode`` on ``device``."""
    backends = available_backends()
    if name not in backends:
        raise KeyError(f"Backend '{name}' is not available for tests; available: {', '.join(backends)}.")
    return backends[name](mode=mode, device=device, seed=seed)


def _as_backend(backend: Backend | str | tuple[str, str]) -> Backend:
    if isinstance(backend, Backend):
        return backend
    if isinstance(backend, str):
        return make_test_backend(backend)
    name, mode = backend
    return make_test_backend(name, mode)


class ComponentTest:
    """A component built alone on one backend, driven with numpy.

    Args:
        component: the component to test (becomes the root of the build).
        input_spaces: ``{api_method: {arg_name: Space}}`` for every API method of
            ``component`` (as :func:`rlgraph_core.graph.build` requires).
        backend: a backend instance, a backend name (eager), or a ``(name, mode)`` pair.
        compile_apis: passed to ``build``; None compiles every listed API in static mode.

    Attributes:
        component: the built component.
        backend: the backend instance.
        report: the :class:`~rlgraph_core.graph.BuildReport` of the build.
    """

    def __init__(
        self,
        component: Component,
        input_spaces: dict[str, dict[str, Space]],
        backend: Backend | str | tuple[str, str],
        compile_apis: tuple[str, ...] | None = None,
    ):
        self.component = component
        self.backend = _as_backend(backend)
        self.input_spaces = input_spaces
        self.report = build(component, input_spaces, self.backend, compile_apis)
        # The undecorated API methods: used for gradients and train steps, which must not run
        # inside the no-gradient wrapper that ``build`` puts around (compiled) root methods.
        self._raw = {name: types.MethodType(raw, component) for name, raw in type(component).api_methods().items()}

    # --- conversions -----------------------------------------------------------------------
    def _inputs(self, method: str, args: tuple) -> list:
        """Check ``args`` against the method's input spaces and convert them to tensors."""
        if method not in self.input_spaces:
            raise BuildError(
                f"'{method}' was not built on '{self.component.scope}'; built API methods: {sorted(self.input_spaces)}."
            )
        spaces = self.input_spaces[method]
        if len(args) != len(spaces):
            raise TypeError(
                f"'{self.component.scope}.{method}' takes {len(spaces)} inputs ({', '.join(spaces)}), got {len(args)}."
            )
        return [
            self._tensor(space, value, f"{method}({arg_name})")
            for (arg_name, space), value in zip(spaces.items(), args)
        ]

    def _tensor(self, space: Space, value: Any, name: str) -> Any:
        """``value`` checked against ``space`` and converted (a dict of tensors for a Dict space)."""
        if isinstance(space, Dict):
            if not isinstance(value, dict) or set(value) != set(space.keys()):
                space.check(value, name=name)  # raises, naming the keys expected
            return {k: self._tensor(child, value[k], f"{name}[{k!r}]") for k, child in space.items()}
        arr = np.asarray(value)
        if space.dtype is not None and arr.dtype.kind == np.dtype(space.dtype).kind:
            arr = arr.astype(space.dtype)
        space.check(arr, name=name)
        return self.backend.to_tensor(arr)

    def to_numpy(self, value: Any) -> Any:
        """Backend outputs to numpy copies, keeping tuples/lists (as tuples), dicts and None."""
        if value is None:
            return None
        if isinstance(value, (tuple, list)):
            return tuple(self.to_numpy(v) for v in value)
        if isinstance(value, dict):
            return {k: self.to_numpy(v) for k, v in value.items()}
        return np.array(self.backend.to_numpy(value), copy=True)

    # --- running ---------------------------------------------------------------------------
    def call(self, method: str, *args: Any) -> Any:
        """Run the built API ``method`` (compiled in static mode) on numpy inputs; numpy outputs.

        Inputs are cast to their space's dtype when of the same kind (float64 -> float32) and
        checked against the space, so a wrong test input fails with a clear SpaceError.
        """
        tensors = self._inputs(method, args)
        return self.to_numpy(getattr(self.component, method)(*tensors))

    def get_weights(self) -> dict[str, np.ndarray]:
        """Every variable as a numpy copy, keyed by its scope path relative to the component."""
        return {k: np.array(self.backend.to_numpy(v), copy=True) for k, v in self.component.variables().items()}

    def set_weights(self, weights: dict[str, np.ndarray], strict: bool = True) -> None:
        """Overwrite variables from numpy.

        Args:
            weights: ``{name: array}`` with names as :meth:`get_weights` gives them.
            strict: require exactly the component's variable names (else only those given).
        """
        own = self.component.variables()
        unknown = sorted(set(weights) - set(own))
        missing = sorted(set(own) - set(weights)) if strict else []
        if unknown or missing:
            raise KeyError(
                f"Weights do not match '{self.component.scope}': unknown {unknown}, "
                f"missing {missing}; its variables are {sorted(own)}."
            )
        for name, value in weights.items():
            current = self.backend.to_numpy(own[name])
            value = np.asarray(value)
            if value.shape != current.shape:
                raise ValueError(f"Weight '{name}' has shape {value.shape}; the variable has {current.shape}.")
            self.backend.assign_numpy(own[name], value.astype(current.dtype))

    # --- gradients and training ------------------------------------------------------------
    def _loss_fn(self, method: str, objective: Objective | None) -> Callable:
        raw = self._raw[method]
        ops = self.backend.ops

        def loss_fn(*inputs):
            out = raw(*inputs)
            if objective is not None:
                return (objective(ops, out),)
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)

        return loss_fn

    def _require_autodiff(self, what: str) -> None:
        if not getattr(self.backend, "supports_autodiff", True):
            raise NotImplementedError(
                f"Backend '{self.backend.name}' has no automatic differentiation, so {what} is not available on it."
            )

    def gradients(
        self, method: str, *args: Any, objective: Objective | None = None, wrt_inputs: Iterable[str] = ()
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Loss and gradients of the component's trainable variables, as numpy.

        The loss is ``objective(ops, outputs)`` if given, else the method's first output (which
        must then be a scalar). The undecorated method runs (never the compiled one), so this
        works in either mode. Non-trainable variables get no gradient.

        Args:
            method: a built API method.
            *args: numpy inputs, as for :meth:`call`.
            objective: optional ``(ops, outputs) -> scalar`` written with the neutral ops.
            wrt_inputs: argument names whose gradients to return too, keyed
                ``"input:<arg_name>"`` (the inputs must be float).

        Returns:
            ``(loss, {variable_name or "input:<arg>": gradient})``.

        Raises:
            NotImplementedError: on a backend without autodiff (the numpy harness).
        """
        self._require_autodiff("gradients")
        tensors = self._inputs(method, args)
        variables = self.component.variables(trainable_only=True)
        names, targets = list(variables), list(variables.values())
        arg_names = list(self.input_spaces[method])
        for arg in wrt_inputs:
            if arg not in arg_names:
                raise KeyError(f"'{method}' has no input '{arg}'; its inputs are {arg_names}.")
            i = arg_names.index(arg)
            tensors[i] = self.backend.variable(f"{INPUT_PREFIX}{arg}", self.backend.to_numpy(tensors[i]))
            names.append(f"{INPUT_PREFIX}{arg}")
            targets.append(tensors[i])
        loss, grads = self.backend.gradients(self._loss_fn(method, objective), targets, *tensors)
        return np.asarray(loss), {n: np.asarray(g) for n, g in zip(names, grads)}

    def train_step(self, method: str, optimizer: dict, objective: Objective | None = None) -> "HarnessTrainStep":
        """A backend train step minimising ``method``'s loss over the trainable variables.

        Args:
            method: a built API method returning the loss first (or see ``objective``).
            optimizer: optimizer spec dict (``type``, ``learning_rate``, ``max_grad_norm`` ...,
                see :meth:`rlgraph_core.backend.Backend.train_step`).
            objective: optional ``(ops, outputs) -> scalar`` (as in :meth:`gradients`).
        """
        self._require_autodiff("train_step")
        variables = list(self.component.variables(trainable_only=True).values())
        step = self.backend.train_step(self._loss_fn(method, objective), variables, optimizer)
        return HarnessTrainStep(self, method, step)


class HarnessTrainStep:
    """A backend :class:`~rlgraph_core.backend.TrainStep` that takes and returns numpy.

    Attributes:
        step: the backend's train step (for ``learning_rate``, ``get_state`` ...).
    """

    def __init__(self, test: ComponentTest, method: str, step):
        self._test = test
        self._method = method
        self.step = step

    def __call__(self, *args: Any) -> Any:
        """Run one update on numpy inputs; returns the step's outputs (loss first) as numpy."""
        return self._test.to_numpy(self.step(*self._test._inputs(self._method, args)))
