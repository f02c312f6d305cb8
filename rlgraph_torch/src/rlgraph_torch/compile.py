"""The torch backend's compile helpers: ``torch.compile`` with an eager fallback.

Static mode compiles train steps, fused loop bodies and (with ``compile_inference``) inference
functions through :func:`try_compile`; a compiled call that fails is rerun eagerly by
:func:`call_compiled_or_eager` / :func:`with_eager_fallback`, which tell a compiler failure from
the user's own bug.
"""

from __future__ import annotations

import contextlib
import os
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch


def fresh_code(fn):
    """A trampoline calling ``fn`` whose code object is unique to this call.

    Dynamo keeps its compiled-graph cache per *code object* and gives up (silently running
    eager) after ``recompile_limit`` (8) entries. Every function compiled here would otherwise
    share one code object (``torch.no_grad``'s wrapper, or ``TorchTrainStep._eager_step``), so
    the ninth compiled function in a process would run uncompiled. A copied code object gives
    each compiled function its own cache.
    """

    def call(*args):
        return fn(*args)

    return types.FunctionType(
        call.__code__.replace(), call.__globals__, call.__name__, call.__defaults__, call.__closure__
    )


def call_compiled_or_eager(compiled: Callable, eager: Callable, args: tuple, what: str) -> tuple[Any, bool]:
    """``(compiled(*args), True)``; if that raises, ``(eager(*args), False)`` with a warning.

    A compiled call fails for two kinds of reasons: the compiler cannot handle the code (no C++
    compiler, an unsupported op) or the code itself is wrong (a shape or dtype bug). Rerunning
    eagerly tells them apart: if the eager call raises too, its error (the user's real bug, with
    the framework's own message) propagates with no compilation warning and no traceback of the
    compiler attached. Only when eager succeeds is compilation to blame: then a RuntimeWarning
    says so and the caller should stay eager. (Compilation fails before the compiled code runs,
    so nothing was updated twice.)
    """
    try:
        return compiled(*args), True
    except Exception as exc:  # which kind of failure is decided below, outside this block (no chain)
        failure = exc
    outputs = eager(*args)
    message = str(failure).splitlines()[0] if str(failure) else ""
    warnings.warn(
        f"torch.compile of {what} failed ({type(failure).__name__}: {message}); running it eagerly from now on.",
        RuntimeWarning,
        stacklevel=4,
    )
    return outputs, False


def counting_backend(counter: list[int]) -> Callable:
    """A ``torch.compile`` backend: inductor, adding 1 to ``counter[0]`` for every graph dynamo
    hands it (so a step or loop counts its own compiled programs, not the process's)."""
    from torch._inductor.compile_fx import compile_fx

    def backend(graph_module, example_inputs):
        counter[0] += 1
        return compile_fx(graph_module, example_inputs)

    return backend


@contextlib.contextmanager
def traced_autograd() -> Iterator[None]:
    """Dynamo's ``trace_autograd_ops`` on for the block, so ``torch.autograd.grad`` compiles into
    the same graph as the forward and the update (off, dynamo breaks the graph there). Dynamo
    reads the flag only while it compiles and does not guard on it, so it is set just around
    compiled calls and restored after: other code in the process sees torch's default."""
    config = torch._dynamo.config
    if config.trace_autograd_ops:
        yield
        return
    config.trace_autograd_ops = True
    try:
        yield
    finally:
        config.trace_autograd_ops = False


def with_traced_autograd(compiled: Callable) -> Callable:
    """``compiled`` called inside :func:`traced_autograd` (a plain try/finally: this runs on
    every step, and a generator context manager costs several microseconds more)."""
    config = torch._dynamo.config

    def call(*args):
        if config.trace_autograd_ops:
            return compiled(*args)
        config.trace_autograd_ops = True
        try:
            return compiled(*args)
        finally:
            config.trace_autograd_ops = False

    return call


#: Inductor's cache folder when ``TORCHINDUCTOR_CACHE_DIR`` is unset, under the user's cache folder
#: (``$XDG_CACHE_HOME``, default ``~/.cache``); the nox sessions use the same one.
CACHE_SUBDIR = ("rlgraph", "torchinductor")


def _torchs_default_cache_dir() -> str | None:
    """torch's own default folder (importing ``torch._dynamo`` writes it into the variable, so a
    set variable holding it is torch's choice, not the user's)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # a torch without that module: every set value counts as the user's
        return None
    return os.path.abspath(default_cache_dir())


def use_persistent_compile_cache() -> str | None:
    """Point inductor's on-disk caches (its FX graph cache and AOTAutograd's, both on by default)
    at ``~/.cache/rlgraph/torchinductor`` instead of torch's default under the temp folder, which
    reboots and temp cleaners empty: a later run then loads the compiled kernels instead of
    compiling them again (ppo_atari's first update: ~41 CPU-s cold, ~3 warm; dynamo's tracing is
    not cached by torch). A ``TORCHINDUCTOR_CACHE_DIR`` the user set wins; an unwritable cache
    folder leaves torch's default. Returns the folder in use, or None for torch's default."""
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current and os.path.abspath(current) != _torchs_default_cache_dir():
        return current
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").joinpath(*CACHE_SUBDIR)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return str(folder)


def try_compile(fn, counter: list[int] | None = None, trace_autograd: bool = False):
    """torch.compile ``fn`` if this torch build can; else warn and return ``fn`` (eager).

    ``counter``: count the compiled graphs there (see :func:`counting_backend`);
    ``trace_autograd``: compile ``torch.autograd.grad`` calls into the graph (see
    :func:`with_traced_autograd`). Compiled kernels are cached across runs
    (:func:`use_persistent_compile_cache`).
    """
    use_persistent_compile_cache()
    try:
        backend = "inductor" if counter is None else counting_backend(counter)
        compiled = torch.compile(fresh_code(fn), dynamic=False, backend=backend)
    except Exception as exc:
        warnings.warn(
            f"torch.compile is unavailable ({type(exc).__name__}: {exc}); running eager.", RuntimeWarning, stacklevel=3
        )
        return fn
    return with_traced_autograd(compiled) if trace_autograd else compiled


def with_eager_fallback(compiled, eager):
    """Call ``compiled``; if a call fails, rerun it with ``eager``: when eager fails too, that
    error (the user's bug) is raised as is; when eager succeeds, compilation was to blame, so
    warn once and run ``eager`` from then on (static mode degrades instead of failing)."""
    if compiled is eager:
        return eager
    current = [compiled]

    def call(*args):
        if current[0] is eager:
            return eager(*args)
        outputs, compiled_ok = call_compiled_or_eager(current[0], eager, args, "an inference function")
        if not compiled_ok:
            current[0] = eager
        return outputs

    return call
