"""Test sessions: each installs only what its packages need, so hidden imports show up.

Run all with ``nox``; one with ``nox -s torch``. Set ``RLGRAPH_NOX_ENVDIR`` to keep the
virtual environments outside the clone (CI does, and reuses them between runs).
"""

import os

import nox

nox.options.envdir = os.environ.get("RLGRAPH_NOX_ENVDIR", ".nox")
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "core", "torch", "tf", "integration", "extras", "ray", "horovod"]
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints.txt")
TEST_DEPS = ("pytest>=8",)
ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "MPLBACKEND": "Agg", "RAY_AUTH_MODE": "disabled"}


def _install(session, *folders):
    """Install local distributions (editable) together with their dependencies."""
    args = []
    for folder in folders:
        args += ["-e", folder]
    session.install(*CONSTRAINTS, *TEST_DEPS, *args)


def _pytest(session, *paths, env=None):
    session.run(
        "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths, *session.posargs, env={**ENV, **(env or {})}
    )


@nox.session(python=PYTHON)
def core(session):
    """rlgraph-core alone: no deep-learning framework in the venv at all."""
    _install(session, "./rlgraph_core")
    session.run(
        "python",
        "-c",
        "import importlib.util as u, sys; "
        "bad=[m for m in ('torch','tensorflow','ray','horovod') if u.find_spec(m)]; "
        "sys.exit(f'core venv must not contain {bad}') if bad else None",
    )
    _pytest(session, "tests/core")


@nox.session(python=PYTHON)
def torch(session):
    """Core + the torch backend: core tests again (now also on torch) and torch tests."""
    _install(session, "./rlgraph_core", "./rlgraph_torch")
    _pytest(session, "tests/core", "tests/torch")


@nox.session(python=PYTHON)
def tf(session):
    """Core + the TensorFlow backend."""
    _install(session, "./rlgraph_core", "./rlgraph_tf")
    _pytest(session, "tests/core", "tests/tf")


@nox.session(python=PYTHON)
def integration(session):
    """torch + tf together, plus the third-party example plugin: parity and learning tests."""
    _install(session, "./rlgraph_core", "./rlgraph_torch", "./rlgraph_tf", "./plugins/rlgraph-example-components")
    _pytest(session, "tests/integration")


@nox.session(python=PYTHON)
def extras(session):
    """The optional tools: rlgraph-core's extras tensorboard, wandb (offline), onnx and render, with
    both backends (checkpoints of each are exported); pydot parses the drawn component graph."""
    session.install(
        *CONSTRAINTS,
        *TEST_DEPS,
        "pydot",
        "-e",
        "./rlgraph_core[tensorboard,wandb,onnx,render]",
        "-e",
        "./rlgraph_torch",
        "-e",
        "./rlgraph_tf",
    )
    _pytest(session, "tests/extras", env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"})


@nox.session(python=PYTHON)
def ray(session):
    """Core + both backends + rlgraph-ray: the Ray executors (one private Ray session per test module)."""
    # rlgraph_ray[tune] (ray[tune], optuna) for tests/ray/test_tune.py (rlgraph tune)
    _install(session, "./rlgraph_core", "./rlgraph_torch", "./rlgraph_tf", "./rlgraph_ray[tune]")
    _pytest(session, "tests/ray")


@nox.session(python=PYTHON)
def horovod(session):
    """Core + both backends + rlgraph-horovod; Horovod itself is built by ``rlgraph_horovod.install``
    (minutes on an empty cache; seconds when its wheel cache, outside the clone, has the wheel),
    then the executor's tests under ``horovodrun -np 2 --gloo``."""
    _install(session, "./rlgraph_core", "./rlgraph_torch", "./rlgraph_tf", "./rlgraph_horovod")
    session.run("python", "-m", "rlgraph_horovod.install", env=ENV)
    _pytest(session, "tests/horovod", env={"RLGRAPH_REQUIRE_HOROVOD": "1"})


#: rlgraph-core's public contracts, type-checked by the lint session.
TYPED_CONTRACTS = (
    "rlgraph_core/backend/contract.py",
    "rlgraph_core/agents/base.py",
    "rlgraph_core/plugins",
    "rlgraph_core/memories/protocol.py",
    "rlgraph_core/memories/settings.py",
    "rlgraph_core/assemble.py",
    "rlgraph_core/components/settings.py",
    "rlgraph_core/components/exploration.py",
    "rlgraph_core/config/slots.py",
    "rlgraph_core/agents/slots.py",
    "rlgraph_core/execution/base.py",
    "rlgraph_core/execution/settings.py",
    "rlgraph_core/execution/recorder.py",
)


@nox.session(python=PYTHON)
def lint(session):
    """ruff check, ruff format --check, and mypy on rlgraph-core's public contracts."""
    session.install(*CONSTRAINTS, "ruff==0.17.6", "mypy==2.4.1", "-e", "./rlgraph_core")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.chdir("rlgraph_core/src")
    session.run(
        "mypy", "--follow-imports=silent", "--ignore-missing-imports", "--python-version", "3.11", *TYPED_CONTRACTS
    )
