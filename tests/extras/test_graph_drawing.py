"""``rlgraph graph --format dot|svg|png``: the drawn component graph from the build record."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from extras_helpers import has_backend, run_cli

pytestmark = pytest.mark.skipif(not has_backend("torch"), reason="builds an agent on torch")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pydot uses old pyparsing names
def test_dot_has_every_component_and_call(tmp_path):
    out = tmp_path / "g.dot"
    code, stdout, stderr = run_cli(
        "graph", "dqn_cartpole", "--set", "agent.dueling=true", "--format", "dot", "--out", str(out)
    )
    assert code == 0, stderr
    text = out.read_text()
    # Components as boxes with their parameter counts and API methods with compact spaces.
    assert '"c:dqn/policy/head/advantage" [label="advantage (DenseLayer)  [' in text
    assert ".greedy(obs: float[B,4]) -> int[B]" in text
    assert '"<user>" -> "c:dqn" [label="act, greedy, q_values, loss, sync_target"]' in text
    assert '"c:dqn/policy/head" -> "c:dqn/policy/head/value" [label="call"]' in text
    if importlib.util.find_spec("pydot"):
        import pydot  # a real dot parser: the text is valid Graphviz

        (graph,) = pydot.graph_from_dot_data(text)
        edges = {(e.get_source().strip('"'), e.get_destination().strip('"')) for e in graph.get_edges()}
        assert ("c:dqn", "c:dqn/policy") in edges and ("c:dqn/policy/trunk", "c:dqn/policy/trunk/dense_0") in edges


def test_text_stays_the_default():
    code, stdout, stderr = run_cli("graph")
    assert code == 0, stderr
    assert stdout.startswith("component graph of 'dqn'")


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_svg_png_through_graphviz(fmt, tmp_path, monkeypatch):
    out = tmp_path / f"g.{fmt}"
    if shutil.which("dot") is None:
        code, _, stderr = run_cli("graph", "--format", fmt, "--out", str(out))
        assert code == 2 and "Graphviz 'dot' program" in stderr and "apt-get install graphviz" in stderr
        assert not out.exists()
        return
    code, _, stderr = run_cli("graph", "--format", fmt, "--out", str(out))
    assert code == 0, stderr
    head = out.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in out.read_bytes()


def test_svg_needs_out():
    code, _, stderr = run_cli("graph", "--format", "svg")
    assert code == 2 and "--out FILE.svg" in stderr
