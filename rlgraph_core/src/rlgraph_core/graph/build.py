"""Build a component tree on a backend: infer spaces, create variables, validate, compile.

``build(root, input_spaces, backend)`` runs each root API method once on a small zero batch
made from the given input spaces. Every API call made during that pass is intercepted: the
callee's input spaces are inferred from the actual tensors and checked by the callee
(:meth:`Component.check_input_spaces`), its variables are created on its first call, and the
call is recorded as an edge of the component graph. Afterwards every component must have been
reached, the interception is removed, and in static mode the root's API methods are compiled.
"""

from __future__ import annotations

import inspect
import time
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlgraph_core.errors import BuildError
from rlgraph_core.graph.component import Component
from rlgraph_core.spaces import Dict, Space, SpaceError, space_from_value

_BUILD_BATCH = 2
_BUILD_TIME = 3


@dataclass
class CallRecord:
    """One API call seen during the build."""

    caller: str
    callee: str
    method: str
    inputs: dict[str, Any]
    outputs: Any


@dataclass
class BuildReport:
    """What a build did: the component tree, the calls between components, and its cost."""

    root: Component
    backend: str
    calls: list[CallRecord] = field(default_factory=list)
    build_seconds: float = 0.0
    num_variables: int = 0
    num_parameters: int = 0

    def render(self) -> str:
        """A readable text rendering of the component graph (tree, spaces, API edges)."""
        lines = [
            f"component graph of '{self.root.scope}' on {self.backend} "
            f"({self.num_variables} variables, {self.num_parameters} parameters, "
            f"built in {self.build_seconds * 1000:.1f} ms)"
        ]
        called: dict[str, list[CallRecord]] = {}
        for rec in self.calls:
            called.setdefault(rec.callee, []).append(rec)

        def visit(comp: Component, depth: int) -> None:
            pad = "  " * depth
            nparams = sum(int(np.prod(np.shape(v))) for v in comp._variables.values())
            extra = f" [{nparams} params]" if nparams else ""
            lines.append(f"{pad}{comp.name} ({type(comp).__name__}){extra}")
            seen = set()
            for rec in called.get(comp.scope, []):
                key = (rec.method, rec.caller)
                if key in seen:
                    continue
                seen.add(key)
                ins = ", ".join(f"{k}: {_short(v)}" for k, v in rec.inputs.items())
                lines.append(f"{pad}  .{rec.method}({ins}) -> {_short(rec.outputs)}   <- {rec.caller}")
            for sub in comp.sub_components.values():
                visit(sub, depth + 1)

        visit(self.root, 0)
        return "\n".join(lines)


def _short(space: Any) -> str:
    if isinstance(space, tuple):
        return "(" + ", ".join(_short(s) for s in space) + ")"
    if space is None:
        return "None"
    return repr(space)


class _Tracer:
    """Intercepts API calls during a build (see module docstring)."""

    def __init__(self, backend):
        self.backend = backend
        self.stack: list[str] = ["<user>"]
        self.calls: list[CallRecord] = []
        #: id(tensor) -> (tensor, declared space) of the root inputs: a component handed a root
        #: input unchanged sees its declared space (a Discrete stays Discrete, bounds are kept),
        #: where a computed tensor's space can only be inferred from its value.
        self.declared: dict[int, tuple[Any, Space]] = {}

    def declare(self, tensor: Any, space: Space) -> None:
        """Record the declared space of a root input tensor (a dict of tensors for a Dict space)."""
        if isinstance(tensor, dict):
            for key, child in space.items():
                self.declare(tensor[key], child)
        else:
            self.declared[id(tensor)] = (tensor, space)

    def space_of(self, value: Any) -> Any:
        known = self.declared.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        if isinstance(value, (tuple, list)):
            return tuple(self.space_of(v) for v in value)
        if isinstance(value, dict):
            return Dict({k: self.space_of(v) for k, v in value.items()})
        if value is None:
            return None
        array = self.backend.to_numpy(value)
        return space_from_value(array, has_batch_rank=np.ndim(array) > 0)

    def call(self, comp: Component, fn, args: tuple) -> Any:
        params = list(inspect.signature(fn).parameters)[1:]
        spaces = {params[i] if i < len(params) else f"arg{i}": self.space_of(a) for i, a in enumerate(args)}
        method = fn.__name__
        try:
            comp.check_input_spaces(method, spaces)
        except (SpaceError, ValueError) as exc:
            given = ", ".join(f"{k}={_short(v)}" for k, v in spaces.items())
            raise BuildError(
                f"Build failed at component '{comp.scope}' ({type(comp).__name__}), API method "
                f"'{method}', called from '{self.stack[-1]}': {exc} Given input spaces: {given}."
            ) from None
        comp.input_spaces.setdefault(method, spaces)
        if not comp.variables_created and (comp.variables_from in (None, method)):
            comp.create_variables(spaces)
            comp.variables_created = True
        self.stack.append(comp.scope)
        try:
            out = fn(comp, *args)
        except BuildError:
            raise
        except Exception as exc:
            given = ", ".join(f"{k}={_short(v)}" for k, v in spaces.items())
            raise BuildError(
                f"Build failed inside component '{comp.scope}' ({type(comp).__name__}), API "
                f"method '{method}', with input spaces {given}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self.stack.pop()
        self.calls.append(CallRecord(self.stack[-1], comp.scope, method, spaces, self.space_of(out)))
        return out


def _zeros_for(space: Space, backend) -> Any:
    """A zero batch of ``space`` as backend tensors: a dict of tensors for a :class:`Dict` space
    (components such as ``dict_encoder`` take a Dict observation whole)."""
    if isinstance(space, Dict):
        return {k: _zeros_for(child, backend) for k, child in space.items()}
    # a batch axis of _BUILD_BATCH, and a time axis (sequences: recurrent cores) of _BUILD_TIME
    leading = space._leading_dims(_BUILD_BATCH, _BUILD_TIME)
    value = space.zeros(leading) if leading else space.zeros()
    if isinstance(value, tuple):
        raise BuildError(f"Tuple input spaces must be flattened before build; got {space!r}.")
    return backend.to_tensor(value)


def build(
    root: Component, input_spaces: dict[str, dict[str, Space]], backend, compile_apis: tuple[str, ...] | None = None
) -> BuildReport:
    """Build ``root`` and its sub-components on ``backend``.

    Args:
        root: the root component.
        input_spaces: for every root API method to build, ``{arg_name: Space}`` in argument
            order. Every root API method must be listed: an unlisted one could never get its
            input spaces, which is a wiring error.
        backend: a :class:`rlgraph_core.backend.Backend` instance.
        compile_apis: root API methods to wrap with ``backend.function`` (compiled in static
            mode). None: every root API method listed in ``input_spaces``.

    Returns:
        A :class:`BuildReport`; the root is ready to call afterwards.
    """
    start = time.perf_counter()
    apis = type(root).api_methods()
    unknown = sorted(set(input_spaces) - set(apis))
    if unknown:
        raise BuildError(
            f"Input spaces were given for {unknown}, which are not API methods of "
            f"'{root.scope}' ({type(root).__name__}); its API methods are {sorted(apis)}."
        )
    missing = sorted(set(apis) - set(input_spaces))
    if missing:
        raise BuildError(
            f"Root component '{root.scope}' has API methods {missing} with no input spaces; "
            f"every root API method needs them to be built. Give spaces for: {sorted(apis)}."
        )
    tracer = _Tracer(backend)
    for comp in root.walk():
        comp.backend = backend
        comp.ops = backend.ops
        comp._tracer = tracer
    try:
        for method, spaces in input_spaces.items():
            signature = list(inspect.signature(apis[method]).parameters.values())[1:]
            params = [p.name for p in signature]
            # Trailing arguments with defaults (a legal-action mask ...) may be left out.
            required = sum(1 for p in signature if p.default is inspect.Parameter.empty)
            if list(spaces) != params[: len(spaces)] or not required <= len(spaces) <= len(params):
                raise BuildError(
                    f"Input spaces for '{root.scope}.{method}' name {list(spaces)} but the method "
                    f"takes {params}; name every argument, in order (trailing ones with defaults may be left out)."
                )
            args = [_zeros_for(s, backend) for s in spaces.values()]
            for arg, space in zip(args, spaces.values()):
                tracer.declare(arg, space)
            getattr(root, method)(*args)
    finally:
        for comp in root.walk():
            comp._tracer = None
    unreached = [c.scope for c in root.walk() if not c.input_spaces and type(c).api_methods()]
    if unreached:
        raise BuildError(
            f"Components {unreached} were never called from any API method of '{root.scope}', "
            f"so their input spaces (and variables) are unknown. Call them from an API method "
            f"or remove them."
        )
    # Remove the build-time interception: built components run with no rlgraph overhead.
    for comp in root.walk():
        for name, raw in type(comp).api_methods().items():
            setattr(comp, name, types.MethodType(raw, comp))
    to_compile = input_spaces.keys() if compile_apis is None else compile_apis
    for name in to_compile:
        setattr(root, name, backend.function(getattr(root, name)))
    report = BuildReport(root=root, backend=backend.describe(), calls=tracer.calls)
    variables = root.variables()
    report.num_variables = len(variables)
    report.num_parameters = int(sum(np.prod(np.shape(backend.to_numpy(v))) for v in variables.values()))
    report.build_seconds = time.perf_counter() - start
    return report
