"""The optional tools as core sees them, with none of their extras needed: a command a plugin
provides (``tune``) names the extra when missing; a logger whose library is missing is refused at
validation; ``rlgraph graph --format dot`` needs nothing; video paths are checked up front."""

from __future__ import annotations

import contextlib
import importlib.util
import io

import pytest

from rlgraph_core.cli import main
from rlgraph_core.config.run import apply_overrides, validate_config
from rlgraph_core.errors import ConfigError, RLGraphError

from core_backend import load_shipped_config


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.skipif(importlib.util.find_spec("rlgraph_ray") is not None, reason="rlgraph-ray provides 'tune' here")
def test_tune_without_its_plugin_names_the_extra():
    code, _, stderr = run_cli("tune", "dqn_cartpole", "--space", "space.yaml")
    assert code == 2 and "rlgraph-core[tune]" in stderr and "Traceback" not in stderr


def test_a_logger_without_its_library_is_refused_at_validation(monkeypatch):
    import importlib.util as util

    real = util.find_spec
    monkeypatch.setattr(util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    raw = apply_overrides(load_shipped_config("dqn_cartpole"), ["train.loggers=[jsonl,wandb]"])
    with pytest.raises(ConfigError, match=r"rlgraph(-core|_core)\[wandb\]"):
        validate_config(raw)


def test_video_paths_are_checked_before_anything_runs(tmp_path):
    from rlgraph_core.integrations.video import check_video_path

    assert check_video_path(tmp_path / "a.mp4").name == "a.mp4"
    with pytest.raises(RLGraphError, match=r"\.mp4, a \.gif"):
        check_video_path(tmp_path / "a.avi")
    with pytest.raises(RLGraphError, match="does not exist"):
        check_video_path(tmp_path / "missing" / "a.gif")


def test_metric_scalars_keep_finite_numbers_only():
    from rlgraph_core.execution.loggers import metric_scalars

    row = {"a": 1, "b": 2.5, "c": None, "d": float("nan"), "e": "text", "f": True, "g": [1]}
    assert metric_scalars(row) == {"a": 1.0, "b": 2.5}


def test_dot_of_a_built_q_network_draws_every_component_and_call():
    from rlgraph_core.components.network import NetworkSpec
    from rlgraph_core.components.q_head import QNetwork
    from rlgraph_core.graph import build
    from rlgraph_core.graph.drawing import to_dot
    from rlgraph_core.spaces import FloatBox
    from rlgraph_core.testing.numpy_backend import NumpyBackend

    net = QNetwork(NetworkSpec(hidden=[5]), 3, dueling=True, name="q")
    report = build(net, {"call": {"obs": FloatBox(shape=(4,)).with_batch_rank()}}, NumpyBackend())
    dot = to_dot(report)
    assert dot.startswith("digraph rlgraph {") and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    assert (
        '"c:q/trunk/dense_0" [label="dense_0 (DenseLayer)  [25 params]\\l.call(x: float[B,4]) -> float[B,5]\\l"];'
        in dot
    )
    assert '"<user>" -> "c:q" [label="call"];' in dot
    assert '"c:q/head" -> "c:q/head/advantage" [label="call"];' in dot
    assert 'subgraph "cluster_q/head" {' in dot
