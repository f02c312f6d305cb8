"""rlgraph-core imports no deep-learning or distributed framework, at import time or on use."""

from __future__ import annotations

import json
import subprocess
import sys


FRAMEWORKS = ("torch", "tensorflow", "ray", "horovod")

CORE_MODULES = (
    "rlgraph_core",
    "rlgraph_core.spaces",
    "rlgraph_core.graph",
    "rlgraph_core.backend",
    "rlgraph_core.components.network",
    "rlgraph_core.components.q_head",
    "rlgraph_core.components.dqn_loss",
    "rlgraph_core.components.exploration",
    "rlgraph_core.components.target_sync",
    "rlgraph_core.components.preprocessors",
    "rlgraph_core.components.schedules",
    "rlgraph_core.components.initializers",
    "rlgraph_core.agents.dqn",
    "rlgraph_core.memories",
    "rlgraph_core.config.run",
    "rlgraph_core.execution.local",
    "rlgraph_core.cli",
    "rlgraph_core.builtins",
    "rlgraph_core.plugins",
    "rlgraph_core.testing",
)

# Imports the modules, optionally runs code, then reports which frameworks got imported.
PROBE = """
import importlib, json, sys
mods = {modules!r}
for m in mods:
    importlib.import_module(m)
{extra}
print(json.dumps({{"imported": [m for m in mods if m in sys.modules],
                   "frameworks": sorted({{k.split('.')[0] for k in sys.modules}} & set({frameworks!r}))}}))
"""


def run_probe(modules, extra: str = "") -> dict:
    """Run the probe in a fresh interpreter and return its report."""
    code = PROBE.format(modules=tuple(modules), extra=extra, frameworks=FRAMEWORKS)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_core_imports_no_framework():
    report = run_probe(CORE_MODULES)
    assert report["imported"] == list(CORE_MODULES)
    assert report["frameworks"] == []


def test_building_and_running_a_component_on_the_numpy_harness_imports_no_framework():
    extra = """
import numpy as np
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.components.q_head import QNetwork
from rlgraph_core.spaces import FloatBox
from rlgraph_core.testing import ComponentTest, NumpyBackend
t = ComponentTest(QNetwork(NetworkSpec(hidden=[4]), 2), {"call": {"obs": FloatBox(shape=(3,)).with_batch_rank()}},
                  NumpyBackend())
assert t.call("call", np.zeros((2, 3), np.float32)).shape == (2, 2)
"""
    assert run_probe(("rlgraph_core",), extra)["frameworks"] == []


def test_probe_detects_a_framework_import():
    """Control: the probe is not blind (a stand-in for an imported submodule shows up)."""
    report = run_probe(("rlgraph_core",), "import types; sys.modules['ray.util'] = types.ModuleType('ray.util')")
    assert report["frameworks"] == ["ray"]
