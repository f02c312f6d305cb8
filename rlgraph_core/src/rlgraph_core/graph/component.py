"""Components: objects with sub-components, variables and API methods.

An API method (decorated with :func:`api`) takes and returns backend tensors. Its body composes
calls to sub-components' API methods and numeric code written against ``self.ops`` (the
backend's neutral ops namespace). Components never import a framework.

Variables are created once, at build time, when the component's input spaces are known
(:meth:`Component.create_variables`). Until then a component is only a description.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from rlgraph_core.errors import BuildError


def api(fn: Callable) -> Callable:
    """Mark a method as an API method of its component.

    During a build the call is intercepted to infer and check input spaces, create variables
    and record the component graph; after the build the interception is removed, so a built
    component calls its methods with no rlgraph overhead.
    """

    @functools.wraps(fn)
    def wrapper(self, *args):
        tracer = self._tracer
        if tracer is None:
            return fn(self, *args)
        return tracer.call(self, fn, args)

    wrapper._rlgraph_api = fn
    return wrapper


class Component:
    """Base class of every component.

    Args:
        name: the component's name; its scope (used in variable names) is the path of names
            from the root, joined by ``/``.
    """

    #: Name of the API method whose first call's input spaces create the variables
    #: (None: whichever API method is called first).
    variables_from: str | None = None

    def __init__(self, name: str):
        if not name or "/" in name:
            raise BuildError(f"Component name '{name}' is invalid: use a non-empty name without '/'.")
        self.name = name
        self.parent: Component | None = None
        self.sub_components: dict[str, Component] = {}
        self.backend = None
        self.ops = None
        self.input_spaces: dict[str, dict[str, Any]] = {}
        self.variables_created = False
        self._variables: dict[str, Any] = {}
        #: names (relative to this component) of variables made with ``trainable=False``
        self._non_trainable_variables: set[str] = set()
        self._tracer = None

    # --- structure -------------------------------------------------------------------------
    def add_components(self, *components: "Component") -> None:
        """Attach sub-components; their names must be unique among this component's children."""
        for comp in components:
            if comp.name in self.sub_components:
                raise BuildError(
                    f"Component '{self.scope}' already has a sub-component named '{comp.name}'; "
                    f"give each child a unique name."
                )
            if comp.parent is not None:
                raise BuildError(
                    f"Component '{comp.name}' already belongs to '{comp.parent.scope}'; create a "
                    f"new instance (or use copy()) to put the same kind of component in two places."
                )
            comp.parent = self
            self.sub_components[comp.name] = comp

    @property
    def scope(self) -> str:
        """The path of names from the root to this component, e.g. ``dqn/policy/network``."""
        return self.name if self.parent is None else f"{self.parent.scope}/{self.name}"

    def walk(self):
        """Yield this component and every descendant, parents before children."""
        yield self
        for sub in self.sub_components.values():
            yield from sub.walk()

    @classmethod
    def api_methods(cls) -> dict[str, Callable]:
        """Names and raw functions of this class's API methods."""
        out = {}
        for klass in reversed(cls.__mro__):
            for key, value in vars(klass).items():
                raw = getattr(value, "_rlgraph_api", None)
                if raw is not None:
                    out[key] = raw
        return out

    # --- variables -------------------------------------------------------------------------
    def create_variables(self, input_spaces: dict[str, Any]) -> None:
        """Create this component's variables from the input spaces of its first API call.

        Override in components that hold variables; use :meth:`make_variable`.
        """

    def freeze(self) -> "Component":
        """Make every variable of this component and its descendants non-trainable.

        Call before the build. Target networks are frozen: they change only by
        synchronisation, so backends need not record gradients through them.
        """
        self.frozen = True
        return self

    def _is_frozen(self) -> bool:
        comp = self
        while comp is not None:
            if getattr(comp, "frozen", False):
                return True
            comp = comp.parent
        return False

    def make_variable(self, name: str, value: np.ndarray, trainable: bool = True) -> Any:
        """Create a backend variable named ``<scope>/<name>`` from a numpy initial value.

        ``trainable=False`` (or a frozen component, see :meth:`freeze`) is the one way to mark
        a variable non-trainable: the name is recorded here, so :meth:`variables` with
        ``trainable_only=True`` leaves it out, and the backend creates a variable that never
        receives gradients or optimizer updates (even when handed to a train step).
        """
        full = f"{self.scope}/{name}"
        trainable = trainable and not self._is_frozen()
        var = self.backend.variable(full, np.asarray(value), trainable=trainable)
        self._variables[name] = var
        if trainable:
            self._non_trainable_variables.discard(name)
        else:
            self._non_trainable_variables.add(name)
        return var

    def is_trainable(self, name: str) -> bool:
        """Whether this component's own variable ``name`` is trainable (False when frozen)."""
        if name not in self._variables:
            raise KeyError(
                f"Component '{self.scope}' has no variable '{name}'; its variables are {sorted(self._variables)}."
            )
        return name not in self._non_trainable_variables and not self._is_frozen()

    def variables(self, trainable_only: bool = False) -> dict[str, Any]:
        """All variables of this component and its descendants, keyed by full scope path.

        ``trainable_only=True`` leaves out variables made with ``trainable=False`` and those of
        frozen components. Keys are relative to this component (so a policy and its target copy have equal keys).
        """
        out: dict[str, Any] = {}
        prefix_len = len(self.scope) + 1
        for comp in self.walk():
            for name, var in comp._variables.items():
                if trainable_only and not comp.is_trainable(name):
                    continue
                out[f"{comp.scope}/{name}"[prefix_len:]] = var
        return out

    def keep_space(self, value: Any, space: Any) -> Any:
        """``value``, which during a build is taken to have ``space`` (a dict of tensors: a Dict space).

        A component that passes a computed tensor on (e.g. an input reshaped) calls this so that the
        components it is handed to see ``space`` rather than one inferred from its value: a
        ``Discrete`` stays ``Discrete``, bounds are kept. Outside a build it does nothing.
        """
        if self._tracer is not None:
            self._tracer.declare(value, space)
        return value

    def check_input_spaces(self, method: str, spaces: dict[str, Any]) -> None:
        """Raise :class:`rlgraph_core.spaces.SpaceError` if ``spaces`` cannot feed ``method``.

        Override to declare what a component accepts; the build turns the error into a
        BuildError naming this component, the method, and the expected vs given space.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}('{self.scope}')"
