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


@pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="needs Graphviz's 'dot' program (Debian package graphviz; .ci/run installs it where it can)",
)
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_svg_png_through_graphviz(fmt, tmp_path):
    out = tmp_path / f"g.{fmt}"
    code, stdout, stderr = run_cli("graph", "--set", "agent.dueling=true", "--format", fmt, "--out", str(out))
    assert code == 0, stderr
    assert f"wrote the component graph ({fmt})" in stdout
    data = out.read_bytes()
    if fmt == "png":
        import numpy as np
        from PIL import Image

        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        with Image.open(out) as img:
            pixels = np.asarray(img.convert("L"))
        # a drawing, not an empty canvas: a tree of 10+ boxes is wide and has dark (text, edge) pixels
        assert pixels.shape[1] > 500 and (pixels < 128).mean() > 0.001, pixels.shape
    else:
        import xml.etree.ElementTree as ET

        root = ET.fromstring(data)
        ns = "{http://www.w3.org/2000/svg}"
        titles = {t.text for t in root.iter(f"{ns}title")}
        # Graphviz gives every node and edge a <title>: the components and the data between them
        assert {"c:dqn", "c:dqn/policy", "c:dqn/policy/head/advantage"} <= titles, sorted(titles)[:20]
        assert any("->" in (t or "") for t in titles)
        texts = "".join(t.text or "" for t in root.iter(f"{ns}text"))
        assert "greedy(obs: float[B,4]) -> int[B]" in texts  # API methods with their spaces


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_svg_png_without_graphviz_name_the_package(fmt, tmp_path, monkeypatch):
    import rlgraph_core.graph.drawing as drawing

    monkeypatch.setattr(drawing.shutil, "which", lambda name: None)  # as where graphviz is not installed
    out = tmp_path / f"g.{fmt}"
    code, _, stderr = run_cli("graph", "--format", fmt, "--out", str(out))
    assert code == 2 and "Graphviz 'dot' program" in stderr and "apt-get install graphviz" in stderr
    assert "Traceback" not in stderr and not out.exists()


def test_svg_needs_out():
    code, _, stderr = run_cli("graph", "--format", "svg")
    assert code == 2 and "--out FILE.svg" in stderr
