"""rlgraph-core imports no deep-learning or distributed framework, at import time or on use.

A fresh interpreter (the *probe*) finds every module of ``rlgraph_core`` with
:func:`pkgutil.walk_packages`, imports each one, optionally runs code, and reports which
frameworks ended up in ``sys.modules``. In CI this runs in a venv without torch/tensorflow (an
import would fail outright); here, where they are installed, the ``sys.modules`` check is what
catches an import.

``walk_packages`` does not descend into implicit namespace packages (folders without an
``__init__.py``, such as ``rlgraph_core/agents`` and ``rlgraph_core/components``), so the probe
also walks each such folder; a test checks the walked modules against the ``.py`` files on disk,
so a module the walk misses fails the test instead of going unchecked.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

FRAMEWORKS = ("torch", "tensorflow", "ray", "horovod", "jax")

# Finds and imports every rlgraph_core module, runs EXTRA, then reports. ``__main__`` modules
# would run a program when imported: they are listed but not imported.
PROBE = """
import importlib, json, os, pkgutil, sys
import rlgraph_core

def _fail(name):
    raise ImportError(f"pkgutil.walk_packages could not import the package {name}")

def core_modules():
    root = list(rlgraph_core.__path__)
    found = ["rlgraph_core"] + [m.name for m in pkgutil.walk_packages(root, "rlgraph_core.", onerror=_fail)]
    for base in root:
        for folder, subdirs, files in os.walk(base):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            rel = os.path.relpath(folder, base)
            if rel == "." or "__init__.py" in files or not any(f.endswith(".py") for f in files):
                continue
            name = "rlgraph_core." + rel.replace(os.sep, ".")  # an implicit namespace package
            found.append(name)
            found += [m.name for m in pkgutil.walk_packages([folder], name + ".", onerror=_fail)]
    return found

modules = core_modules()
for m in modules:
    if not m.endswith(".__main__"):
        importlib.import_module(m)
EXTRA
print(json.dumps({"modules": modules,
                  "not_imported": [m for m in modules if m not in sys.modules and not m.endswith(".__main__")],
                  "frameworks": sorted({k.split('.')[0] for k in sys.modules} & set(FRAMEWORKS))}))
"""


def run_probe(extra: str = "") -> dict:
    """Run the probe in a fresh interpreter and return its report."""
    code = PROBE.replace("EXTRA", extra).replace("FRAMEWORKS", repr(FRAMEWORKS))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def modules_on_disk() -> set[str]:
    """Module names of every ``.py`` file of the rlgraph_core package, from the file system."""
    roots = importlib.util.find_spec("rlgraph_core").submodule_search_locations
    names = set()
    for root in map(Path, roots):
        for path in root.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = ("rlgraph_core",) + path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.add(".".join(parts))
            # every folder between the root and the file is a package (regular or namespace)
            names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return names


def test_importing_every_core_module_imports_no_framework():
    report = run_probe()
    walked = report["modules"]
    assert len(walked) == len(set(walked)), "a module was walked twice"
    assert set(walked) == modules_on_disk(), "the walk and the files on disk disagree"
    # the namespace packages are really walked (walk_packages alone skips them)
    for module in (
        "rlgraph_core.agents.dqn",
        "rlgraph_core.agents.ppo",
        "rlgraph_core.agents.sac",
        "rlgraph_core.components.sac_loss",
        "rlgraph_core.memories.segment_tree",
        "rlgraph_core.cli",
    ):
        assert module in walked
    assert report["not_imported"] == []
    assert report["frameworks"] == []


# Code paths beyond imports: components built and run on the numpy harness (DQN, actor-critic
# with GAE and the PPO loss, the SAC graph), memories, configs, spaces and the plugin listing.
CODE_PATHS = """
import contextlib, io
import numpy as np
import gymnasium as gym
from rlgraph_core.agents.dqn import DQNConfig, DQNGraph
from rlgraph_core.agents.ppo import PPOConfig
from rlgraph_core.agents.sac import SACConfig, SACGraph
from rlgraph_core.cli import main
from rlgraph_core.components.actor_critic import ActorCritic
from rlgraph_core.components.gae import GAE
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.agents.ppo import PPOLoss
from rlgraph_core.components.q_head import QNetwork
from rlgraph_core.memories import NStepAssembler, PrioritizedReplay, ReplayMemory, RolloutBuffer
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox, from_gym
from rlgraph_core.testing import ComponentTest, NumpyBackend

f = lambda *s: FloatBox(shape=s).with_batch_rank()
obs = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)

q = ComponentTest(QNetwork(NetworkSpec(hidden=[4]), 2), {"call": {"obs": f(3)}}, NumpyBackend())
assert q.call("call", obs).shape == (5, 2)

dqn = ComponentTest(DQNGraph(DQNConfig(network={"hidden": [4]}), FloatBox(shape=(3,)), 2, seed=0), {
    "q_values": {"obs": f(3)}, "greedy": {"obs": f(3)},
    "loss": {"obs": f(3), "actions": IntBox(0, 1, shape=()).with_batch_rank(), "rewards": f(),
             "next_obs": f(3), "terminals": BoolBox().with_batch_rank(), "discounts": f(), "weights": f()},
    "act": {"obs": f(3), "noise": f(2), "value": FloatBox(shape=())}, "sync_target": {}}, NumpyBackend())
loss, td = dqn.call("loss", obs, np.zeros(5, np.int64), np.ones(5, np.float32), obs, np.zeros(5, bool),
                    np.full(5, 0.9, np.float32), np.ones(5, np.float32))
assert np.isfinite(loss) and td.shape == (5,)

ac = ComponentTest(ActorCritic(NetworkSpec(hidden=[4]), FloatBox(-1.0, 1.0, shape=(2,)), seed=0),
                   {"act": {"obs": f(3), "noise": f(2)}, "deterministic": {"obs": f(3)}, "value": {"obs": f(3)},
                    "evaluate": {"obs": f(3), "actions": f(2)}}, NumpyBackend())
actions, log_probs, values = ac.call("act", obs, np.zeros((5, 2), np.float32))
gae = ComponentTest(GAE(0.99, 0.95), {"advantages": {
    "rewards": f(5), "values": f(5), "next_values": f(5),
    "terminated": BoolBox(shape=(5,)).with_batch_rank(), "truncated": BoolBox(shape=(5,)).with_batch_rank()},
    "discounted_returns": {"rewards": f(5), "next_values": f(5), "terminated": BoolBox(shape=(5,)).with_batch_rank(),
                           "truncated": BoolBox(shape=(5,)).with_batch_rank()}}, NumpyBackend())
adv, ret = gae.call("advantages", np.ones((4, 5), np.float32), np.zeros((4, 5), np.float32),
                    np.zeros((4, 5), np.float32), np.zeros((4, 5), bool), np.zeros((4, 5), bool))
ppo = ComponentTest(PPOLoss(0.5, 0.0, None, True), {"loss": {
    "log_probs": f(), "old_log_probs": f(), "entropy": f(), "values": f(), "old_values": f(),
    "advantages": f(), "returns": f(), "clip_range": FloatBox(shape=())}}, NumpyBackend())
assert np.isfinite(ppo.call("loss", log_probs, log_probs, np.ones(5, np.float32), values, values,
                            adv[0], ret[0], np.float32(0.2))[0])

sac_spaces = {"act": {"obs": f(3), "noise": f(1)}, "greedy": {"obs": f(3)}, "alpha": {},
              "critic_loss": {"obs": f(3), "actions": FloatBox(-1, 1, shape=(1,)).with_batch_rank(), "rewards": f(),
                              "next_obs": f(3), "terminals": BoolBox().with_batch_rank(), "discounts": f(),
                              "weights": f(), "next_noise": f(1)},
              "actor_loss": {"obs": f(3), "noise": f(1)}, "temperature_loss": {"log_probs": f()}, "sync_target": {}}
sac = ComponentTest(SACGraph(SACConfig(actor_network={"hidden": [4]}, critic_network={"hidden": [4]}),
                             FloatBox(-2.0, 2.0, shape=(1,)), seed=0), sac_spaces, NumpyBackend())
critic_loss, _ = sac.call("critic_loss", obs, np.zeros((5, 1), np.float32), np.ones(5, np.float32), obs,
                          np.zeros(5, bool), np.full(5, 0.99, np.float32), np.ones(5, np.float32),
                          np.zeros((5, 1), np.float32))
assert np.isfinite(critic_loss)

memory = PrioritizedReplay(16, seed=0)
nstep = NStepAssembler(1, 3, 0.9)
for t in range(10):
    out = nstep.add(obs[:1], np.zeros(1, np.int64), np.ones(1, np.float32), obs[1:2], np.array([t == 6]),
                    np.zeros(1, bool))
    if out is not None:
        memory.insert(out)
memory.update_priorities(memory.sample(4)["indices"], np.ones(4))
ReplayMemory(8, seed=0).insert({"x": obs})
RolloutBuffer(2, 5, seed=0).add(obs=obs, rewards=np.ones(5, np.float32))

PPOConfig.model_validate({"type": "ppo", "n_steps": 8})
assert from_gym(gym.spaces.Box(-1.0, 1.0, (3,))) == FloatBox(-1.0, 1.0, shape=(3,))
assert from_gym(gym.spaces.Discrete(2)) == Discrete(2)
with contextlib.redirect_stdout(io.StringIO()) as listing:
    assert main(["plugins"]) == 0
assert "rlgraph-core" in listing.getvalue()
"""


def test_running_core_code_on_the_numpy_harness_imports_no_framework():
    assert run_probe(CODE_PATHS)["frameworks"] == []


def test_probe_detects_a_framework_import():
    """Control: the probe is not blind (a stand-in for an imported submodule shows up)."""
    report = run_probe("import types; sys.modules['ray.util'] = types.ModuleType('ray.util')")
    assert report["frameworks"] == ["ray"]
