"""Drawing a build record: the component graph as Graphviz dot text, and as SVG/PNG through ``dot``.

Components are boxes (a component with sub-components is a cluster around its own box and its
children's), each listing its parameter count and the API methods the build called with their
input and output spaces; an edge goes from caller to callee for every API method called, labelled
with the method. ``<user>`` is the caller of the root's API methods. The dot text is written here
by hand (it is a few lines of a plain format; no package needed); rendering to SVG or PNG runs
the Graphviz ``dot`` program.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from rlgraph_core.errors import RLGraphError

#: Formats of :func:`write_graph` (besides the text rendering).
GRAPH_FORMATS = ("text", "dot", "svg", "png")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label_lines(lines: list[str]) -> str:
    """A left-justified multi-line dot label (each line ends with dot's ``\\l``)."""
    escaped = (line.replace("\\", "\\\\").replace('"', '\\"') for line in lines)
    return '"' + "".join(line + "\\l" for line in escaped) + '"'


def compact(space) -> str:
    """A short form of a space for drawings: ``float[B,4]``, ``int[B]``, ``(float[B], float[B])``."""
    if isinstance(space, tuple):
        return "(" + ", ".join(compact(s) for s in space) + ")"
    if space is None:
        return "None"
    shape = getattr(space, "shape", None)
    kind = type(space).__name__
    prefix = {"FloatBox": "float", "IntBox": "int", "BoolBox": "bool"}.get(kind)
    if prefix is None or shape is None:
        return repr(space)
    dims = (["B"] if getattr(space, "has_batch_rank", False) else []) + [str(d) for d in shape]
    return f"{prefix}[{','.join(dims)}]"


def _node_id(scope: str) -> str:
    return _quote("c:" + scope)


def to_dot(report) -> str:
    """The component graph of a :class:`~rlgraph_core.graph.build.BuildReport` as dot text."""
    methods: dict[str, dict[str, str]] = {}
    edges: dict[tuple[str, str], list[str]] = {}
    for rec in report.calls:
        ins = ", ".join(f"{k}: {compact(v)}" for k, v in rec.inputs.items())
        methods.setdefault(rec.callee, {}).setdefault(rec.method, f".{rec.method}({ins}) -> {compact(rec.outputs)}")
        names = edges.setdefault((rec.caller, rec.callee), [])
        if rec.method not in names:
            names.append(rec.method)

    out = [
        "digraph rlgraph {",
        "  rankdir=LR; compound=true;",
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9, color="#5a6b86"];',
        f"  label={_quote(f'{report.root.scope} on {report.backend}: {report.num_parameters} parameters, built in {report.build_seconds * 1000:.1f} ms')};",
        '  "<user>" [shape=ellipse, fillcolor="#ffffff"];',
    ]

    def box(comp, pad: str) -> None:
        nparams = sum(int(np.prod(np.shape(v))) for v in comp._variables.values())
        lines = [f"{comp.name} ({type(comp).__name__})" + (f"  [{nparams} params]" if nparams else "")]
        lines += list(methods.get(comp.scope, {}).values())
        out.append(f"{pad}{_node_id(comp.scope)} [label={_label_lines(lines)}];")

    def visit(comp, pad: str) -> None:
        if not comp.sub_components:
            box(comp, pad)
            return
        out.append(f"{pad}subgraph {_quote('cluster_' + comp.scope)} {{")
        out.append(f'{pad}  label={_quote(comp.scope)}; style="rounded"; color="#9aa9c2";')
        box(comp, pad + "  ")
        for sub in comp.sub_components.values():
            visit(sub, pad + "  ")
        out.append(f"{pad}}}")

    visit(report.root, "  ")
    for (caller, callee), names in edges.items():
        src = _quote(caller) if caller == "<user>" else _node_id(caller)
        out.append(f"  {src} -> {_node_id(callee)} [label={_quote(', '.join(names))}];")
    out.append("}")
    return "\n".join(out) + "\n"


def write_graph(report, fmt: str, out: str | Path | None) -> str:
    """Write the graph as ``fmt`` (see :data:`GRAPH_FORMATS`) to ``out``; return what to print.

    ``text`` and ``dot`` go to standard output without ``out``; ``svg`` and ``png`` need ``out``
    and the Graphviz ``dot`` program (an RLGraphError naming the package otherwise).
    """
    if fmt not in GRAPH_FORMATS:
        raise RLGraphError(f"--format '{fmt}' is not a graph format; use one of {', '.join(GRAPH_FORMATS)}.")
    text = report.render() + "\n" if fmt == "text" else to_dot(report)
    if fmt in ("text", "dot"):
        if out is None:
            return text
        Path(out).write_text(text)
        return f"wrote the component graph ({fmt}) to {out}"
    if out is None:
        raise RLGraphError(f"--format {fmt} writes a file: pass --out FILE.{fmt}.")
    dot = shutil.which("dot")
    if dot is None:
        raise RLGraphError(
            f"--format {fmt} needs the Graphviz 'dot' program, which is not installed (package 'graphviz': "
            f"apt-get install graphviz, brew install graphviz or conda install graphviz); --format dot writes "
            f"the graph's dot text without it."
        )
    done = subprocess.run([dot, f"-T{fmt}", "-o", str(out)], input=text, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RLGraphError(f"Graphviz 'dot -T{fmt}' failed: {done.stderr.strip()[:300]}")
    return f"wrote the component graph ({fmt}) to {out}"
