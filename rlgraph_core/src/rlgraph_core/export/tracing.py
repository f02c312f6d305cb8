"""Tracing a built agent's graph functions into an ONNX graph, from numpy weights.

Why a tracer rather than ``torch.onnx`` / ``tf2onnx``: a checkpoint is backend-neutral (numpy
weights plus the config), so the export must work from either backend's checkpoint and with
neither framework installed. The agent is rebuilt on :class:`ExportBackend` (the numpy test
backend with tracing ops), its checkpoint loaded, and its greedy policy
(:meth:`~rlgraph_core.agents.base.Agent.policy_outputs`) called once with a symbolic
observation: every op on a symbolic value appends ONNX nodes (built with ``onnx.helper``),
every numpy value it meets (a weight, a constant) becomes an initializer, and ops on numpy
values alone run in numpy (constant folding). The same component code that runs on torch or
TensorFlow therefore defines the exported graph: nothing is written twice.

Each op of the neutral ops contract has an emitter in :data:`EMITTERS`; an op without one (e.g.
a convolution added to the contract later) fails with an error naming it: add
``EMITTERS["conv2d"] = ...`` (a function of the :class:`OnnxGraph` and the op's arguments).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable

import numpy as np

from rlgraph_core.backend.ops import OPS_CONTRACT
from rlgraph_core.errors import RLGraphError
from rlgraph_core.testing.numpy_backend import LEAKY_RELU_SLOPE, NumpyBackend, NumpyOps

#: The ONNX opset of exported graphs (ReduceMean/ReduceMax take ``axes`` as an input from 18).
OPSET = 18


class ExportError(RLGraphError):
    """A policy cannot be exported (an op without an ONNX emitter, an agent without policy_outputs ...)."""


def _operator(op: str, reverse: bool = False):
    """A binary Python operator of :class:`Sym` that appends the ONNX node ``op`` (``reverse``: the
    reflected one, ``other op self``)."""

    def method(self, other):
        a, b = (other, self) if reverse else (self, other)
        return self.graph.binary(op, a, b)

    return method


class Sym:
    """A symbolic tensor: the name of an ONNX value, its numpy dtype and rank.

    Python arithmetic on it (``+ - * / **`` and negation, with numpy values or Python numbers
    on either side) appends nodes to its :class:`OnnxGraph`.
    """

    __array_ufunc__ = None  # numpy defers ``ndarray + Sym`` to Sym.__radd__

    def __init__(self, graph: "OnnxGraph", name: str, dtype, rank: int):
        self.graph, self.name, self.dtype, self.rank = graph, name, np.dtype(dtype), int(rank)

    __add__ = _operator("Add")
    __radd__ = _operator("Add", reverse=True)
    __sub__ = _operator("Sub")
    __rsub__ = _operator("Sub", reverse=True)
    __mul__ = _operator("Mul")
    __rmul__ = _operator("Mul", reverse=True)
    __truediv__ = _operator("Div")
    __rtruediv__ = _operator("Div", reverse=True)
    __pow__ = _operator("Pow")

    def __neg__(self):
        return self.graph.node("Neg", [self], self.dtype, self.rank)

    def __repr__(self) -> str:
        return f"Sym({self.name!r}, {self.dtype}, rank {self.rank})"


class OnnxGraph:
    """Nodes, initializers, inputs and outputs of the graph being traced.

    ``names`` maps ``id(array)`` of the agent's variables to their names, so weights keep their
    checkpoint names as initializer names.
    """

    def __init__(self, names: dict[int, str] | None = None):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.initializers: dict[str, Any] = {}
        self.inputs: list = []
        self._names = dict(names or {})
        self._by_id: dict[int, str] = {}
        self._ids = itertools.count()
        self._keep: list = []  # arrays referenced by id() stay alive while tracing

    # ------------------------------------------------------------------ values
    def fresh(self, prefix: str) -> str:
        """A new unique value name."""
        return f"{prefix}_{next(self._ids)}"

    def input(self, name: str, dtype, shape: list) -> Sym:
        """A graph input of ``dtype`` and ``shape`` (None or a string for a dynamic dimension)."""
        elem = self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.inputs.append(self.helper.make_tensor_value_info(name, elem, shape))
        return Sym(self, name, dtype, len(shape))

    def const(self, value, dtype=None) -> Sym:
        """A numpy value (or Python number) as an initializer: a weight keeps its variable's name."""
        if isinstance(value, Sym):
            return value
        arr = np.asarray(value, dtype=dtype)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        key = id(value)
        if isinstance(value, np.ndarray) and key in self._by_id and dtype in (None, value.dtype):
            name = self._by_id[key]
        else:
            name = self._names.get(key) if isinstance(value, np.ndarray) and dtype in (None, value.dtype) else None
            name = name or self.fresh("const")
            if name in self.initializers:
                name = self.fresh(name)
            self.initializers[name] = self.numpy_helper.from_array(arr, name)
            if isinstance(value, np.ndarray):
                self._by_id[key] = name
                self._keep.append(value)
        return Sym(self, name, arr.dtype, arr.ndim)

    def node(self, op: str, inputs: list, dtype, rank: int, **attrs) -> Sym:
        """Append ``op(inputs)`` (Sym, numpy values or numbers) with one output of ``dtype`` and ``rank``."""
        names = [("" if x is None else self.const(x).name) for x in inputs]
        out = self.fresh(op.lower())
        self.nodes.append(self.helper.make_node(op, names, [out], **attrs))
        return Sym(self, out, dtype, rank)

    def binary(self, op: str, a, b) -> Sym:
        """An elementwise op with numpy broadcasting; numbers and arrays take the Sym's dtype."""
        sym = a if isinstance(a, Sym) else b
        a = a if isinstance(a, Sym) else self.const(a, sym.dtype)
        b = b if isinstance(b, Sym) else self.const(b, sym.dtype)
        if a.dtype != b.dtype:
            raise ExportError(f"ONNX '{op}' of {a.dtype} and {b.dtype}: cast one side first (ops.cast).")
        return self.node(op, [a, b], a.dtype, max(a.rank, b.rank))

    def axes(self, axis, rank: int) -> np.ndarray:
        """``axis`` (int, sequence or None = all) as an int64 array of non-negative axes."""
        axes = range(rank) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
        return np.asarray([a % rank if rank else a for a in axes], np.int64)

    # ------------------------------------------------------------------ the model
    def model(self, outputs: dict[str, Sym], metadata: dict[str, str] | None = None, doc: str = ""):
        """The ONNX model whose named outputs are ``outputs`` (each an Identity of the traced value)."""
        helper = self.helper
        out_infos = []
        for name, sym in outputs.items():
            if not isinstance(sym, Sym):
                sym = self.const(sym)
            self.nodes.append(helper.make_node("Identity", [sym.name], [name]))
            elem = helper.np_dtype_to_tensor_dtype(sym.dtype)
            out_infos.append(helper.make_tensor_value_info(name, elem, ["batch", *[None] * (sym.rank - 1)]))
        graph = helper.make_graph(
            self.nodes, "rlgraph_policy", self.inputs, out_infos, initializer=list(self.initializers.values())
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rlgraph", doc_string=doc
        )
        model.ir_version = min(model.ir_version, 9)  # readable by onnxruntime releases of the last two years
        for key, value in (metadata or {}).items():
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
        return model


# ---------------------------------------------------------------------- emitters of the ops
_FLOAT_UNARY = {"abs": "Abs", "sqrt": "Sqrt", "exp": "Exp", "log": "Log"}
_ACTIVATIONS = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "softplus": "Softplus"}
_DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def _sym_of(args) -> "OnnxGraph":
    for a in args:
        if isinstance(a, Sym):
            return a.graph
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Sym):
                    return b.graph
    raise AssertionError("no symbolic argument")


def _dense(g, x, w, b):
    y = g.node("MatMul", [x, w], x.dtype, x.rank)
    return g.binary("Add", y, b)


def _activation(g, name, x):
    if name == "linear":
        return x
    if name in _ACTIVATIONS:
        return g.node(_ACTIVATIONS[name], [x], x.dtype, x.rank)
    if name == "elu":
        return g.node("Elu", [x], x.dtype, x.rank, alpha=1.0)
    if name == "leaky_relu":
        return g.node("LeakyRelu", [x], x.dtype, x.rank, alpha=LEAKY_RELU_SLOPE)
    raise ExportError(f"activation '{name}' has no ONNX emitter")


def _reduce(op):
    def emit(g, x, axis=None, keepdims=False):
        axes = g.axes(axis, x.rank)
        rank = x.rank if keepdims else x.rank - len(axes)
        return g.node(op, [x, axes], x.dtype, rank, keepdims=int(bool(keepdims)))

    return emit


def _argmax(g, x, axis=-1):
    return g.node("ArgMax", [x], np.int64, x.rank - 1, axis=int(axis), keepdims=0, select_last_index=0)


def _clip(g, x, lo, hi):
    # Max/Min rather than Clip: the bounds may be tensors (per-dimension action bounds).
    return g.binary("Min", g.binary("Max", x, lo), hi)


def _minmax(op):
    return lambda g, a, b: g.binary(op, a, b)


def _cast(g, x, dtype):
    dt = np.dtype(_DTYPES[dtype])
    return g.node("Cast", [x], dt, x.rank, to=g.helper.np_dtype_to_tensor_dtype(dt))


def _softmax(op):
    return lambda g, x, axis=-1: g.node(op, [x], x.dtype, x.rank, axis=int(axis))


def _concat(g, xs, axis=-1):
    syms = [g.const(x) for x in xs]
    return g.node("Concat", syms, syms[0].dtype, syms[0].rank, axis=int(axis))


def _reshape(g, x, shape):
    return g.node("Reshape", [x, np.asarray(shape, np.int64)], x.dtype, len(shape))


def _expand_dims(g, x, axis):
    return g.node("Unsqueeze", [x, np.asarray([axis], np.int64)], x.dtype, x.rank + 1)


def _squeeze(g, x, axis):
    return g.node("Squeeze", [x, np.asarray([axis % x.rank], np.int64)], x.dtype, x.rank - 1)


def _where(g, cond, a, b):
    ref = a if isinstance(a, Sym) else b
    if not isinstance(ref, Sym):
        return g.node("Where", [cond, a, b], np.asarray(a).dtype, cond.rank)
    return g.node("Where", [cond, g.const(a, ref.dtype), g.const(b, ref.dtype)], ref.dtype, ref.rank)


def _one_hot(g, idx, depth):
    values = np.asarray([0.0, 1.0], np.float32)
    return g.node("OneHot", [idx, np.asarray(depth, np.int64), values], np.float32, idx.rank + 1, axis=-1)


def _gather_last(g, x, idx):
    picked = g.node("GatherElements", [x, _expand_dims(g, idx, -1)], x.dtype, x.rank, axis=-1)
    return _squeeze(g, picked, -1)


def _image_to_float(g, x, scale=1.0 / 255.0):
    # uint8 pixels stay uint8 up to here (the graph input is the env's own observation dtype)
    return g.binary("Mul", _cast(g, x, "float32"), np.float32(scale))


def _transpose(g, x, perm):
    return g.node("Transpose", [x], x.dtype, x.rank, perm=[int(p) for p in perm])


def _pair(v) -> list[int]:
    return [int(v), int(v)] if isinstance(v, (int, np.integer)) else [int(a) for a in v]


def _window_attrs(padding: str) -> dict:
    # TensorFlow's 'same' puts the odd padding pixel after (bottom/right): ONNX's SAME_UPPER
    return {"auto_pad": "SAME_UPPER" if padding == "same" else "VALID"}


def _conv2d(g, x, w, b, strides=1, padding="valid"):
    # ops.conv2d is NHWC x HWIO (as the backends' ops); ONNX Conv is NCHW x OIHW: transpose around it
    w = g.const(w) if not isinstance(w, Sym) else w
    kernel = g.node("Transpose", [w], w.dtype, 4, perm=[3, 2, 0, 1])
    nchw = _transpose(g, x, (0, 3, 1, 2))
    y = g.node("Conv", [nchw, kernel, b], np.dtype(np.float32), 4, strides=_pair(strides), **_window_attrs(padding))
    return _transpose(g, y, (0, 2, 3, 1))


def _max_pool2d(g, x, size, strides=None, padding="valid"):
    nchw = _transpose(g, x, (0, 3, 1, 2))
    y = g.node(
        "MaxPool",
        [nchw],
        x.dtype,
        4,
        kernel_shape=_pair(size),
        strides=_pair(size if strides is None else strides),
        **_window_attrs(padding),
    )
    return _transpose(g, y, (0, 2, 3, 1))


def _flatten(g, x, axis=1):
    # Reshape's 0 copies that input dimension: the leading ``axis`` dims stay, the rest merge
    return g.node("Reshape", [x, np.asarray([0] * axis + [-1], np.int64)], x.dtype, axis + 1)


def _split_leading(g, x, like):
    # [T * B, ...] -> [T, B, ...]: like's two leading dims, then x's trailing ones, as Reshape's shape
    x, like = g.const(x), g.const(like)
    lead = g.node("Shape", [like], np.int64, 1, start=0, end=2)
    tail = g.node("Shape", [x], np.int64, 1, start=1)
    shape = g.node("Concat", [lead, tail], np.int64, 1, axis=0)
    return g.node("Reshape", [x, shape], x.dtype, x.rank + 1)


def _one_step(g, x, state, reset):
    """``(x_0 [B, F], the state zeroed where reset_0)`` of a one-step sequence ``x [1, B, F]``: an
    exported recurrent policy takes one step per call (its state is an input and an output), so
    the time axis is squeezed (onnxruntime refuses a longer sequence there)."""
    x0 = _squeeze(g, x, 0)
    if reset is None:
        return x0, state
    keep = g.binary("Sub", np.float32(1.0), _cast(g, _squeeze(g, reset, 0), "float32"))
    keep = _expand_dims(g, keep, -1)
    return x0, [g.binary("Mul", s, keep) for s in state]


def _gates(g, z, count: int, units: int) -> list:
    return [
        g.node(
            "Slice",
            [z, np.asarray([k * units], np.int64), np.asarray([(k + 1) * units], np.int64), np.asarray([-1], np.int64)],
            z.dtype,
            z.rank,
        )
        for k in range(count)
    ]


def _lstm(g, x, h, c, w_x, w_h, b, reset=None):
    # one step of the contract's LSTM (ops.lstm; gate blocks i, f, g, o), from MatMul/Sigmoid/Tanh:
    # the same math as rlgraph_core.testing.recurrent_reference, with the reset as a mask
    x0, (h, c) = _one_step(g, x, [g.const(h), g.const(c)], reset)
    units = int(np.shape(w_h)[0])
    z = g.binary(
        "Add", g.binary("Add", g.node("MatMul", [x0, w_x], x0.dtype, 2), g.node("MatMul", [h, w_h], h.dtype, 2)), b
    )
    i, f, cand, o = _gates(g, z, 4, units)
    sig = lambda v: g.node("Sigmoid", [v], v.dtype, 2)  # noqa: E731
    tanh = lambda v: g.node("Tanh", [v], v.dtype, 2)  # noqa: E731
    c = g.binary("Add", g.binary("Mul", sig(f), c), g.binary("Mul", sig(i), tanh(cand)))
    h = g.binary("Mul", sig(o), tanh(c))
    return _expand_dims(g, h, 0), h, c


def _gru(g, x, h, w_x, w_h, b_x, b_h, reset=None):
    # one step of the contract's GRU (ops.gru; gate blocks r, z, n, torch's reset-after form)
    x0, (h,) = _one_step(g, x, [g.const(h)], reset)
    units = int(np.shape(w_h)[0])
    gx = _gates(g, g.binary("Add", g.node("MatMul", [x0, w_x], x0.dtype, 2), b_x), 3, units)
    gh = _gates(g, g.binary("Add", g.node("MatMul", [h, w_h], h.dtype, 2), b_h), 3, units)
    r = g.node("Sigmoid", [g.binary("Add", gx[0], gh[0])], h.dtype, 2)
    z = g.node("Sigmoid", [g.binary("Add", gx[1], gh[1])], h.dtype, 2)
    n = g.node("Tanh", [g.binary("Add", gx[2], g.binary("Mul", r, gh[2]))], h.dtype, 2)
    h = g.binary("Add", g.binary("Mul", g.binary("Sub", np.float32(1.0), z), n), g.binary("Mul", z, h))
    return _expand_dims(g, h, 0), h


#: ``{op name: emitter(graph, *args)}`` for ops called with at least one symbolic argument.
EMITTERS: dict[str, Callable] = {
    "dense": _dense,
    "activation": _activation,
    "reduce_sum": _reduce("ReduceSum"),
    "reduce_mean": _reduce("ReduceMean"),
    "reduce_max": _reduce("ReduceMax"),
    "argmax": _argmax,
    "gather_last": _gather_last,
    "one_hot": _one_hot,
    "where": _where,
    **{op: (lambda onnx_op: lambda g, x: g.node(onnx_op, [x], x.dtype, x.rank))(o) for op, o in _FLOAT_UNARY.items()},
    "square": lambda g, x: g.binary("Mul", x, x),
    "minimum": _minmax("Min"),
    "maximum": _minmax("Max"),
    "clip": _clip,
    "stop_gradient": lambda g, x: x,
    "cast": _cast,
    "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"),
    "concat": _concat,
    "reshape": _reshape,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
    "zeros_like": lambda g, x: g.binary("Mul", x, 0),
    "image_to_float": _image_to_float,
    "transpose": _transpose,
    "conv2d": _conv2d,
    "max_pool2d": _max_pool2d,
    "flatten": _flatten,
    "split_leading": _split_leading,
    "lstm": _lstm,
    "gru": _gru,
}


def _traced(name: str, numpy_op: Callable) -> Callable:
    """``ops.<name>``: numpy on numpy values, the ONNX emitter when any argument is symbolic."""

    @functools.wraps(numpy_op)
    def op(*args, **kwargs):
        symbolic = any(
            isinstance(a, Sym) or (isinstance(a, (list, tuple)) and any(isinstance(b, Sym) for b in a))
            for a in (*args, *kwargs.values())
        )
        if not symbolic:
            return numpy_op(*args, **kwargs)
        emitter = EMITTERS.get(name)
        if emitter is None:
            raise ExportError(
                f"The op '{name}' has no ONNX emitter, so a policy using it cannot be exported yet; add one to "
                f"rlgraph_core.export.tracing.EMITTERS['{name}'] (a function of the OnnxGraph and the op's arguments)."
            )
        return emitter(_sym_of((*args, *kwargs.values())), *args, **kwargs)

    return op


class TracingOps(NumpyOps):
    """The numpy ops, each of which emits ONNX nodes when given a symbolic value (:class:`Sym`)."""

    def __init__(self):
        super().__init__()
        for name in OPS_CONTRACT:
            numpy_op = getattr(super(), name, None)
            if numpy_op is not None:
                setattr(self, name, _traced(name, numpy_op))


class _InferenceOnlyStep:
    """Stands in for a train step on :class:`ExportBackend`: building is allowed, training is not."""

    def __getattr__(self, name):
        raise ExportError("The export backend is inference-only: an exported agent cannot train.")

    def __call__(self, *args, **kwargs):
        raise ExportError("The export backend is inference-only: an exported agent cannot train.")


class ExportBackend(NumpyBackend):
    """The numpy backend with :class:`TracingOps`, able to build (not train) any agent.

    Agents make their train steps when built; here those are inert placeholders, since an
    export only loads weights and traces the greedy policy.
    """

    name = "export"

    def __init__(self, mode: str = "eager", device: str = "auto", seed: int | None = None):
        super().__init__("eager", "cpu", seed)
        self._ops = TracingOps()

    def train_step(self, loss_fn, variables, optimizer):
        """An inert placeholder (see the class docstring)."""
        return _InferenceOnlyStep()
