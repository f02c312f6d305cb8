"""train.video_interval: a greedy episode streamed to videos/step_N.<format> during training (extra
``render``), by the process that owns the run folder; a missing writer is named before training."""

from __future__ import annotations

import sys

import pytest
from extras_helpers import TINY_DQN, has_backend, run_cli

pytest.importorskip("imageio_ffmpeg")
pytest.importorskip("pygame")  # classic-control rendering
pytestmark = pytest.mark.skipif(not has_backend("torch"), reason="trains a tiny torch DQN")


def test_periodic_videos_are_written_next_to_the_run(tmp_path):
    import imageio.v3 as iio

    out = tmp_path / "run"
    code, _, stderr = run_cli(
        "train", *TINY_DQN, "--set", "train.video_interval=200", "--set", "train.video_format=gif", "--out", str(out)
    )
    assert code == 0, stderr
    videos = sorted(p.name for p in (out / "videos").iterdir())
    assert videos == ["step_200.gif", "step_400.gif"]
    for name in videos:
        props = iio.improps(out / "videos" / name, index=None)
        frames, height, width = props.shape[:3]
        # one CartPole episode: the reset frame and one per step (an episode lasts at least 8 steps)
        assert frames >= 9 and (height, width) == (400, 600), (name, props.shape)


def test_periodic_video_mp4_and_the_missing_writer_error(tmp_path, monkeypatch):
    import imageio.v3 as iio

    out = tmp_path / "mp4"
    code, _, stderr = run_cli(
        "train", *TINY_DQN, "--set", "train.total_timesteps=200", "--set", "train.video_interval=200", "--out", str(out)
    )
    assert code == 0, stderr
    assert iio.improps(out / "videos" / "step_200.mp4", index=None).shape[0] >= 9
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if the render extra were missing
    code, _, stderr = run_cli("train", *TINY_DQN, "--set", "train.video_interval=200", "--out", str(tmp_path / "no"))
    assert code == 2 and "Traceback" not in stderr
    from rlgraph_core.install_hints import extra_install_command

    assert "train.video_interval" in stderr and extra_install_command("render") in stderr


def test_rendering_without_a_runtime_dir_prints_no_sdl_error(tmp_path):
    """A headless process without XDG_RUNTIME_DIR renders silently (SDL gets a private one)."""
    import os
    import subprocess

    code = (
        "from rlgraph_core.config.sections import EnvConfig\n"
        "from rlgraph_core.envs import make_eval_env\n"
        "env = make_eval_env(EnvConfig(id='CartPole-v1', num_envs=1), 'rgb_array')\n"
        "env.reset(seed=0)\n"
        "assert env.render().shape == (400, 600, 3)\n"
        "env.close()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "XDG_RUNTIME_DIR" not in proc.stderr + proc.stdout
