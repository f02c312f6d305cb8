"""Test sessions: each installs only what its packages need, so hidden imports show up.

Run the default set with ``nox``; one with ``nox -s torch-3.11``; ``nox -l`` lists them all.
Set ``RLGRAPH_NOX_ENVDIR`` to keep the virtual environments outside the clone (CI does, and
reuses them between runs).

Environments are made by uv (``venv_backend="uv"``): every venv links its packages from uv's
shared cache, so torch, TensorFlow and Ray are downloaded and unpacked once per machine, not once
per session. uv does not read pip's configuration; :func:`_uv_settings_from_pip` passes this
machine's pip settings (extra wheel folders, indexes, constraints, certificates) to uv so both
resolve the same packages (otherwise torch may resolve to a multi-GB CUDA build).

Every session installs against ``requirements/test.lock`` (regenerate with ``nox -s lock``);
the ``latest`` session (not in the default set) runs core, torch and tf against the newest
resolvable versions, so dependency drift is seen on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
LOCK = "requirements/test.lock"
LOCK_INPUT = "requirements/test.in"
#: versions that win over a dependency's own cap (gymnax 1.0.1 caps gymnasium below the 1.4 that
#: rlgraph uses; its envs run on 1.4): passed to the lock and to every install of such a package
OVERRIDES = "requirements/overrides.txt"
#: the ``stats`` session's own lock (rliable needs pandas<3; test.lock holds pandas 3): see requirements/stats.in
STATS_LOCK = "requirements/stats.lock"
STATS_INPUT = "requirements/stats.in"

nox.options.envdir = os.environ.get("RLGRAPH_NOX_ENVDIR", ".nox")
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv"
# A Python that is not installed here is skipped with nox's "interpreter not found" message
# (nox turns this on by itself under CI=true; we want the skip there too).
nox.options.error_on_missing_interpreters = False

#: The interpreter every default session uses; the others run where installed (and in the
#: GitHub workflow's matrix), never in the default set, to keep the local matrix inside its budget.
PYTHON = "3.11"
PYTHONS = ["3.11", "3.12", "3.13"]
nox.options.sessions = [
    "lint",
    f"core-{PYTHON}",
    f"torch-{PYTHON}",
    f"tf-{PYTHON}",
    "integration",
    "extras",
    "jax",
    "ray",
    "horovod",
    "docs",
    "stats",
]

#: Caches kept between runs, beside the nox venvs: compiled kernels of torch static (Inductor's FX
#: graph cache) and jax static (XLA's persistent compilation cache). With them warm, a torch-static
#: test spends ~5x less time compiling (measured: tests/core/test_conv_ops.py -k torch-static 58 s ->
#: 11 s); both frameworks key their entries by version and graph, so a stale entry is never used.
#: Inductor's default is /tmp (wiped between CI runs); jax caches nothing on disk unless told.
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "rlgraph"
ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "MPLBACKEND": "Agg",
    "RAY_AUTH_MODE": "disabled",
    "TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(CACHE_ROOT / "torchinductor"),
    "JAX_COMPILATION_CACHE_DIR": os.environ.get("JAX_COMPILATION_CACHE_DIR") or str(CACHE_ROOT / "jax-compile"),
    # jax only writes compiles slower than 1 s by default; the tests' many small ones add up
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
}
#: Bytecode caches. uv installs packages without compiling their ``.pyc`` (pip compiles them), and
#: container images often set ``PYTHONDONTWRITEBYTECODE=1``; together every process then compiled
#: torch and TensorFlow from source on import (measured here: ``import tensorflow`` 11.9 -> 4.6 CPU-s,
#: ``import torch`` 2.8 -> 1.7, a bare ``horovodrun -np 2`` launch 13.9 -> 5.1 s wall once cached).
#: The tests start hundreds of processes (xdist workers, CLI runs, Ray actors, Horovod ranks), so
#: Python writes each module's cache on its first import into the venv, and reuses it from then on.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
#: How many of the slowest tests each session prints (``RLGRAPH_TEST_DURATIONS=0``: every test
#: over a second, for finding what to make cheaper).
DURATIONS = os.environ.get("RLGRAPH_TEST_DURATIONS", "15")
#: pytest-xdist workers for the sessions whose tests are independent processes' worth of work
#: (learning runs use one thread each): one per core, at most 4. ``RLGRAPH_TEST_WORKERS=0``
#: runs them in one process. The Ray and Horovod sessions stay serial: each test there already
#: starts several processes (a private Ray session, two Horovod ranks).
WORKERS = os.environ.get("RLGRAPH_TEST_WORKERS", str(min(4, os.cpu_count() or 1)))


def _pip_config() -> dict[str, str]:
    """pip's effective settings (``pip config list``), highest-priority scope per key."""
    pip = [sys.executable, "-m", "pip"]
    try:
        out = subprocess.run([*pip, "config", "list"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    # pip's own precedence: environment variables over site over user over global.
    rank = {"global": 0, "user": 1, "site": 2, ":env:": 3}
    best: dict[str, tuple[int, str]] = {}
    for line in out.splitlines():
        scoped, sep, value = line.partition("=")
        scope, dot, key = scoped.rpartition(".")
        if not (sep and dot):
            continue
        level = rank.get(scope, 0)
        if key not in best or level >= best[key][0]:
            best[key] = (level, value.strip().strip("'\""))
    return {key: value for key, (_, value) in best.items()}


def _uv_settings_from_pip() -> dict[str, str]:
    """uv environment variables that reproduce this machine's pip configuration."""
    pip = _pip_config()
    env: dict[str, str] = {}
    mapping = {
        "index-url": "UV_DEFAULT_INDEX",
        "extra-index-url": "UV_INDEX",
        "find-links": "UV_FIND_LINKS",
        "constraint": "UV_CONSTRAINT",
        "cert": "SSL_CERT_FILE",
    }
    for key, var in mapping.items():
        if key in pip and var not in os.environ:
            value = pip[key]
            # pip separates list values with whitespace; uv wants spaces for indexes and
            # constraints, commas for find-links.
            env[var] = ",".join(value.split()) if var == "UV_FIND_LINKS" else " ".join(value.split())
    if env:
        # pip takes the best version across every index; uv's default takes the first index
        # that has the package at all. Match pip.
        env.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
    if pip.get("no-index", "").lower() in ("1", "true", "yes"):
        env["UV_NO_INDEX"] = "1"
    return env


UV_SETTINGS = _uv_settings_from_pip()
os.environ.update(UV_SETTINGS)


def _install(session: nox.Session, *folders: str, locked: bool = True) -> None:
    """Install local distributions (editable) with their dependencies, pinned by the lock."""
    args: list[str] = []
    for folder in folders:
        args += ["-e", folder]
    pins = ("-c", LOCK) if locked else ("-c", "constraints.txt")
    session.install(*pins, "pytest>=8", "pytest-xdist", *args)


def _build_horovod(session: nox.Session) -> None:
    """Build and install Horovod itself with ``rlgraph_horovod.install``, which drives pip."""
    session.install("-c", LOCK, "pip", "setuptools", "wheel")
    session.run("python", "-m", "rlgraph_horovod.install", env=ENV)


def _pytest(session: nox.Session, *paths: str, env: dict[str, str] | None = None, parallel: bool = False) -> None:
    workers = ["-n", WORKERS, "--dist", "worksteal"] if parallel and WORKERS not in ("0", "1") else []
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--durations={DURATIONS}",
        "--durations-min=1.0",
        *workers,
        *paths,
        *session.posargs,
        env={**ENV, **(env or {})},
    )


def _core_alone(session: nox.Session) -> None:
    session.run(
        "python",
        "-c",
        "import importlib.util as u, sys; "
        "bad=[m for m in ('torch','tensorflow','ray','horovod','jax') if u.find_spec(m)]; "
        "sys.exit(f'core venv must not contain {bad}') if bad else None",
    )


@nox.session(python=PYTHONS)
def core(session: nox.Session) -> None:
    """rlgraph-core alone: no deep-learning framework in the venv at all."""
    _install(session, "./rlgraph_core")
    _core_alone(session)
    _pytest(session, "tests/core", parallel=True)


@nox.session(python=PYTHONS)
def torch(session: nox.Session) -> None:
    """Core + the torch backend + the env extras (Atari, MiniGrid, MuJoCo, Box2D, PettingZoo, POPGym) + the offline
    extra (Minari): core tests again (now also on torch and with the env families) and torch tests
    (MiniGrid learning, HalfCheetah smoke, the POPGym memory config, offline RL from recorded datasets)."""
    _install(
        session, "./rlgraph_core[atari,minigrid,mujoco,box2d,envpool,offline,pettingzoo,popgym]", "./rlgraph_torch"
    )
    _pytest(session, "tests/core", "tests/torch", parallel=True)


@nox.session(python=PYTHONS)
def tf(session: nox.Session) -> None:
    """Core + the TensorFlow backend + the offline extra (Minari: CQL against BC on TensorFlow)."""
    _install(session, "./rlgraph_core[offline,pettingzoo]", "./rlgraph_tf")
    _pytest(session, "tests/core", "tests/tf", parallel=True)


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """torch + tf together, plus the third-party example plugin: parity and learning tests."""
    _install(session, "./rlgraph_core", "./rlgraph_torch", "./rlgraph_tf", "./plugins/rlgraph-example-components")
    _pytest(session, "tests/integration", parallel=True)


@nox.session(python=PYTHON)
def jax(session: nox.Session) -> None:
    """The outside jax backend plugin: its own tests (the core's conformance harness, learning),
    then the integration parity tests, which pick jax up because it is installed (narrowed to the
    jax comparisons: jax against torch eager, jax static against jax eager) and the CNN agents on
    image observations, then the Ray executors with jax on one side and torch on the other
    (serial: the module starts its own Ray session; the ray session, which has no jax, skips that
    module)."""
    _install(
        session,
        "./rlgraph_core[offline,pettingzoo]",
        "./rlgraph_torch",
        "./rlgraph_tf",
        "./rlgraph_ray",
        "./plugins/rlgraph-jax",
    )
    # gymnax for the compiled executor's tests (its gymnasium cap overridden, see OVERRIDES)
    session.install("-c", LOCK, "--override", OVERRIDES, "-e", "./plugins/rlgraph-jax[gymnax]")
    _pytest(session, "plugins/rlgraph-jax/tests", parallel=True)
    _pytest(
        session,
        "tests/integration/test_parity_components.py",
        "tests/integration/test_parity_agent.py",
        "tests/integration/test_parity_ppo_sac.py",
        "tests/integration/test_parity_impala.py",
        "tests/integration/test_parity_offline.py",
        "tests/integration/test_fused_rounds.py",
        "tests/integration/test_static_compile_counts.py",
        "tests/integration/test_gradient_hook_agents.py",
        env={"RLGRAPH_TEST_BACKENDS": "torch-eager,jax"},
        parallel=True,
    )
    # DQN, PPO and SAC with the Nature CNN on Atari-shaped frames (a few updates and a checkpoint
    # round trip each) in both jax modes; the torch cases run in the integration session.
    _pytest(
        session,
        "tests/integration/test_image_agents.py",
        "-k",
        "jax",
        env={"RLGRAPH_TEST_BACKENDS": "torch-eager,jax"},
        parallel=True,
    )
    _pytest(session, "tests/ray/test_jax_pairs.py")


@nox.session(python=PYTHON)
def extras(session: nox.Session) -> None:
    """The optional tools: rlgraph-core's extras tensorboard, wandb (offline), onnx and render, with
    both backends (checkpoints of each are exported) and atari (image policies export and evaluate
    on the real ALE); pydot parses the drawn component graph."""
    _install(
        session, "./rlgraph_core[tensorboard,wandb,onnx,render,atari,pettingzoo]", "./rlgraph_torch", "./rlgraph_tf"
    )
    session.install("-c", LOCK, "pydot")
    _pytest(session, "tests/extras", env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"}, parallel=True)


@nox.session(python=PYTHON)
def stats(session: nox.Session) -> None:
    """rlgraph-core's extra ``stats`` (rliable: interquartile mean and stratified-bootstrap
    confidence intervals across seeds, for benchmarks/zoo.py and compare.py), in a venv of its own
    pinned by ``requirements/stats.lock``: rliable 1.2 needs arch<8, which does not import with the
    shared lock's pandas 3. No framework: the statistics are numpy's and rliable's."""
    session.install("-c", STATS_LOCK, "pytest>=8", "-e", "./rlgraph_core[stats]")
    _pytest(session, "tests/stats")


@nox.session(python=PYTHON)
def ray(session: nox.Session) -> None:
    """Core + both backends + rlgraph-ray: the Ray executors (one private Ray session per test module)."""
    # rlgraph_ray[tune] (ray[tune], optuna) for tests/ray/test_tune.py (rlgraph tune)
    _install(
        session, "./rlgraph_core[atari,offline,pettingzoo]", "./rlgraph_torch", "./rlgraph_tf", "./rlgraph_ray[tune]"
    )
    # Two xdist workers, a whole module each (--dist loadfile: one private Ray session per module,
    # started by the module's fixture): a Ray test spends much of its wall time waiting (ray.init,
    # actor start-up, restarts after injected faults), so two modules at a time fill CI's two cores
    # (measured on an idle 2-core machine: 561 s serial, 401 s with every module in two workers).
    # The signal tests (they signal and look for the processes of their session, and time a
    # dashboard agent's death) and the cluster tests (an existing cluster, whose socket paths under
    # an xdist worker's longer temp folder pass the 107-byte AF_UNIX limit) run alone after them.
    alone = ["tests/ray/test_ray_signals.py", "tests/ray/test_cluster.py"]
    together = [a for path in alone for a in ("--deselect", path)]
    workers = ["-n", "2", "--dist", "loadfile"] if WORKERS not in ("0", "1") else []
    _pytest(session, "tests/ray", *workers, *together)
    _pytest(session, *alone)


@nox.session(python=PYTHON)
def horovod(session: nox.Session) -> None:
    """Core + both backends + the jax plugin + rlgraph-horovod; Horovod itself is built by
    ``rlgraph_horovod.install`` (minutes on an empty cache; seconds when its wheel cache, outside the
    clone, has the wheel; it prints the cache hit or miss and the build time), then the executor's
    tests under ``horovodrun -np 2 --gloo``. The jax plugin is there so a backend that Horovod has no
    module of its own for is run under the launcher too. The installer drives pip, so pip is
    installed into this uv venv."""
    _install(
        session,
        "./rlgraph_core[offline]",
        "./rlgraph_torch",
        "./rlgraph_tf",
        "./plugins/rlgraph-jax",
        "./rlgraph_horovod",
    )
    _build_horovod(session)
    _pytest(session, "tests/horovod", env={"RLGRAPH_REQUIRE_HOROVOD": "1"})


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The API reference of rlgraph-core's public names, generated by pdoc into ``build/api``; it
    fails on a broken reference in a docstring or a pdoc warning (``docs/build_api.py``, whose
    check tests/docs tests first)."""
    _install(session, "./rlgraph_core")
    session.install("-c", LOCK, "pdoc")
    _pytest(session, "tests/docs")
    session.run("python", "docs/build_api.py", "build/api", env=ENV)


@nox.session(python=PYTHON, default=False)
def heavy(session: nox.Session) -> None:
    """The ``heavy`` tests, which the default sessions skip to keep CI within its 20-minute warm
    budget: learning runs that take minutes on two cores (the jax plugin's eager runs and static
    DQN, DQN on two Horovod ranks) and full-budget versions of tests whose cheaper variant CI runs.
    One venv with every backend, Ray, the jax plugin and Horovod; run by hand (``nox -s heavy``)."""
    _install(
        session,
        "./rlgraph_core[atari,minigrid,mujoco,box2d,offline,pettingzoo,popgym]",
        "./rlgraph_torch",
        "./rlgraph_tf",
        "./rlgraph_ray[tune]",
        "./plugins/rlgraph-jax",
        "./rlgraph_horovod",
    )
    _build_horovod(session)
    _pytest(
        session,
        "tests",
        "plugins/rlgraph-jax/tests",
        "-m",
        "heavy",
        "-rP",  # each learning run's steps and return (the tests print them)
        env={"RLGRAPH_HEAVY_TESTS": "1", "RLGRAPH_REQUIRE_HOROVOD": "1"},
    )


@nox.session(python=PYTHON, default=False)
def latest(session: nox.Session) -> None:
    """core, torch and tf tests against the newest resolvable versions (not the lock), so drift
    shows up on purpose. torch stays at ``constraints.txt``'s CPU build: its newest release here
    is a multi-GB CUDA build."""
    session.install("--upgrade", "--resolution", "highest", "-c", "constraints.txt", "pytest", "-e", "./rlgraph_core")
    session.install("--resolution", "highest", "-c", "constraints.txt", "-e", "./rlgraph_torch", "-e", "./rlgraph_tf")
    session.run("uv", "pip", "list", external=True, silent=False)
    _pytest(session, "tests/core", "tests/torch", "tests/tf")


@nox.session(python=PYTHON, venv_backend="none", default=False)
def lock(session: nox.Session) -> None:
    """Regenerate ``requirements/test.lock`` from ``requirements/test.in`` (every Python, every
    platform), then the stats session's ``requirements/stats.lock`` from ``requirements/stats.in``,
    with this machine's pip settings passed to uv."""
    local = [
        "rlgraph-core",
        "rlgraph-torch",
        "rlgraph-tf",
        "rlgraph-ray",
        "rlgraph-horovod",
        "rlgraph-example-components",
        "rlgraph-jax",
    ]
    no_emit = [arg for name in local for arg in ("--no-emit-package", name)]
    session.run(
        "uv",
        "pip",
        "compile",
        LOCK_INPUT,
        "--universal",
        "--python-version",
        PYTHON,
        "--custom-compile-command",
        "nox -s lock",
        "--override",
        OVERRIDES,
        *no_emit,
        "-o",
        LOCK,
        external=True,
    )
    # The stats lock prefers the shared lock's versions (uv keeps the pins of the file it rewrites);
    # only what rliable's arch<8 rules out (pandas 3) moves.
    shared = Path(LOCK).read_text().splitlines(keepends=True)
    Path(STATS_LOCK).write_text("".join(line for line in shared if not line.startswith("pandas==")))
    session.run(
        "uv",
        "pip",
        "compile",
        STATS_INPUT,
        "--universal",
        "--python-version",
        PYTHON,
        "--custom-compile-command",
        "nox -s lock",
        "--no-emit-package",
        "rlgraph-core",
        "-o",
        STATS_LOCK,
        external=True,
    )


#: rlgraph-core's public contracts, type-checked by the lint session.
TYPED_CONTRACTS = (
    "rlgraph_core/backend/contract.py",
    "rlgraph_core/backend/ops.py",
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
    "rlgraph_core/execution/run_state.py",
    "rlgraph_core/execution/run_loggers.py",
    "rlgraph_core/execution/summary.py",
    "rlgraph_core/execution/env_runner.py",
    "rlgraph_core/execution/counters.py",
    "rlgraph_core/callbacks.py",
    "rlgraph_core/training.py",
    "rlgraph_core/api.py",
    "rlgraph_core/facade_config.py",
)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy on rlgraph-core's public contracts, and the GitHub
    workflow against the schema check-jsonschema ships (offline)."""
    session.install("-c", LOCK, "ruff", "mypy", "check-jsonschema", "-e", "./rlgraph_core")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", ".github/workflows/ci.yml")
    with session.chdir("rlgraph_core/src"):
        session.run(
            "mypy", "--follow-imports=silent", "--ignore-missing-imports", "--python-version", "3.11", *TYPED_CONTRACTS
        )


def _pyenv_pythons_on_path() -> None:
    """Let nox and uv find interpreters that pyenv installed but did not put on PATH."""
    pyenv = shutil.which("pyenv")
    root = os.environ.get("PYENV_ROOT") or (
        subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip() if pyenv else ""
    )
    if not root:
        return
    bins = sorted(str(p) for p in Path(root, "versions").glob("3.*/bin") if p.is_dir())
    extra = [b for b in bins if b not in os.environ.get("PATH", "").split(os.pathsep)]
    if extra:
        os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), *extra])


_pyenv_pythons_on_path()
