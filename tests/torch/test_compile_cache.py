"""Static mode's compiled kernels are cached across runs (issue 30): with no TORCHINDUCTOR_CACHE_DIR,
inductor's caches go under the user's cache folder (``$XDG_CACHE_HOME/rlgraph/torchinductor``)
instead of torch's default in the temp folder, and a second process loads the compiled graph
from there (an FX graph cache hit) instead of compiling it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rlgraph_torch.compile import use_persistent_compile_cache

#: One process: compile a small function through rlgraph's try_compile, print inductor's cache counters.
COMPILE_ONCE = textwrap.dedent(
    """
    import json, torch
    from torch._dynamo.utils import counters
    from rlgraph_torch.compile import try_compile
    f = try_compile(lambda x: torch.tanh(x @ x.T).sum(dim=1) * 3.0 + 1.0)
    f(torch.ones(8, 8))
    print(json.dumps({k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}))
    """
)


def _compile_in_a_new_process(env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", COMPILE_ONCE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_try_compile_points_inductors_cache_at_the_users_cache_folder(tmp_path, monkeypatch):
    """Cheap (nothing is compiled): where inductor will write and look up its kernels."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

    from rlgraph_torch.compile import try_compile

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # as importing torch._dynamo leaves it
    try_compile(lambda x: x + 1)
    assert cache_dir() == str(tmp_path / "cache" / "rlgraph" / "torchinductor")


@pytest.mark.heavy  # two cold compiles: ~70 s on a loaded 2-core machine
def test_a_second_run_loads_the_compiled_graph_from_the_users_cache_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    first = _compile_in_a_new_process(env)
    folder = tmp_path / "cache" / "rlgraph" / "torchinductor"
    assert first.get("fxgraph_cache_miss", 0) >= 1 and not first.get("fxgraph_cache_hit"), first
    assert any(folder.rglob("*")), "nothing was cached under the user's cache folder"
    second = _compile_in_a_new_process(env)
    assert second.get("fxgraph_cache_hit", 0) >= 1 and not second.get("fxgraph_cache_miss"), second


def test_a_cache_folder_set_by_the_user_wins_and_an_unwritable_one_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert use_persistent_compile_cache() == str(tmp_path / "mine")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert use_persistent_compile_cache() is None and "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ok"))
    assert use_persistent_compile_cache() == str(tmp_path / "ok" / "rlgraph" / "torchinductor")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "ok" / "rlgraph" / "torchinductor")
    # torch's own default, filled in by importing torch._dynamo, is not the user's choice
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    assert use_persistent_compile_cache() == str(tmp_path / "ok" / "rlgraph" / "torchinductor")
