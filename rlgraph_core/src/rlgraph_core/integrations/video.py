"""Streaming evaluation videos to a file (extra ``render``: imageio-ffmpeg, gymnasium[classic-control]).

``rlgraph evaluate --video`` writes one with :class:`VideoWriter`; ``train.video_interval``
records one greedy episode periodically during training with :class:`TrainingVideos`.

:class:`VideoWriter` hands each frame to an ffmpeg process as it is rendered (imageio-ffmpeg's
``write_frames`` generator), so memory stays constant however long the video: ``.mp4``
(H.264) and ``.gif`` (a palette per frame, which ffmpeg computes frame by frame), and ``.png``
(the last frame only, through matplotlib, a core dependency).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlgraph_core.errors import RLGraphError
from rlgraph_core.evaluation import evaluate_policy
from rlgraph_core.integrations import missing_extra

#: File suffixes a video may be written to.
VIDEO_SUFFIXES = (".mp4", ".gif", ".png")

# ffmpeg settings per format. The gif palette is made per frame (stats_mode=single, new=1), so
# ffmpeg never buffers the stream (a global palette needs every frame before the first is written).
_FFMPEG = {
    ".mp4": {"codec": "libx264", "pix_fmt_out": "yuv420p", "output_params": ["-preset", "veryfast", "-crf", "23"]},
    ".gif": {
        "codec": "gif",
        "pix_fmt_out": "pal8",
        "output_params": [
            "-vf",
            "split[a][b];[a]palettegen=stats_mode=single:max_colors=64[p];[b][p]paletteuse=new=1:dither=none",
        ],
    },
}


def check_video_path(path: str | Path) -> Path:
    """``path`` if its suffix is a known video format (else an RLGraphError listing them)."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise RLGraphError(
            f"--video '{path}': unknown format '{path.suffix or '(no suffix)'}'; write a .mp4, a .gif, "
            f"or a .png (the last frame)."
        )
    if not path.parent.exists():
        raise RLGraphError(f"--video '{path}': the folder '{path.parent}' does not exist.")
    return path


class VideoWriter:
    """Frames (``uint8 [H, W, 3]``) streamed to ``path``: ``writer.add(frame)``, then ``close()``.

    Args:
        path: ``.mp4``, ``.gif`` or ``.png`` (see :data:`VIDEO_SUFFIXES`).
        fps: frames per second (the env's ``render_fps`` is a good choice).
    """

    def __init__(self, path: str | Path, fps: float = 30.0):
        self.path = check_video_path(path)
        self.suffix = self.path.suffix.lower()
        self.fps = float(fps)
        self.frames = 0
        self._gen = None
        self._last = None
        self._size = None
        if self.suffix != ".png":
            try:
                import imageio_ffmpeg
            except ImportError as exc:
                raise missing_extra(f"Writing a {self.suffix} video", "imageio-ffmpeg", "render", exc) from None
            self._ffmpeg = imageio_ffmpeg

    def add(self, frame) -> None:
        """Append one RGB frame (every frame must have the first one's size)."""
        frame = np.ascontiguousarray(np.asarray(frame, np.uint8)[..., :3])
        self.frames += 1
        if self.suffix == ".png":
            self._last = frame
            return
        if self._gen is None:
            self._size = (frame.shape[1], frame.shape[0])
            self._gen = self._ffmpeg.write_frames(
                str(self.path), self._size, fps=self.fps, macro_block_size=1, quality=None, **_FFMPEG[self.suffix]
            )
            self._gen.send(None)  # start ffmpeg
        elif (frame.shape[1], frame.shape[0]) != self._size:
            raise RLGraphError(f"video frames changed size from {self._size} to {(frame.shape[1], frame.shape[0])}.")
        self._gen.send(frame)

    def close(self) -> None:
        """Finish the file (waits for ffmpeg)."""
        if self.suffix == ".png":
            if self._last is not None:
                import matplotlib

                matplotlib.use("Agg")
                import matplotlib.pyplot as plt

                plt.imsave(self.path, self._last)
            return
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TrainingVideos:
    """Periodic evaluation videos during training (``train.video_interval``).

    Every ``train.video_interval`` env steps the run recorder calls :meth:`record`: one greedy
    episode on a separate ``rgb_array`` env, each frame streamed to
    ``<run folder>/videos/step_<env steps>.<train.video_format>`` as it is rendered (constant
    memory, as ``rlgraph evaluate --video``). Only the process that owns the run folder records.

    Args:
        make_env: makes the rendering env (``assembly.make_eval_env(render_mode="rgb_array")``).
        folder: where the videos go (created).
        video_format: ``mp4`` or ``gif``.
        seed: episode ``k`` (the k-th video) is reset with ``seed + k``.
        env_id: named in errors.
    """

    def __init__(self, make_env, folder: str | Path, video_format: str = "mp4", seed: int = 0, env_id: str = "?"):
        self.folder = Path(folder)
        self.suffix = "." + video_format.lower().lstrip(".")
        self.seed = seed
        self.env_id = env_id
        self.written: list[Path] = []
        if self.suffix not in (".mp4", ".gif"):
            raise RLGraphError(f"train.video_format '{video_format}': write mp4 or gif.")
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError as exc:
            raise missing_extra("train.video_interval", "imageio-ffmpeg", "render", exc) from None
        self.env = make_env()
        try:  # fail before training when the env cannot draw (e.g. pygame missing for classic control)
            self.env.reset(seed=seed)
            self._frame(self.env.render())
        except BaseException:
            self.env.close()
            raise

    def _frame(self, frame):
        if frame is None:
            self.env.close()
            raise RLGraphError(
                f"train.video_interval: '{self.env_id}' rendered no frame in render_mode='rgb_array'; "
                f"record videos of an env that supports rgb_array rendering, or unset train.video_interval."
            )
        return frame

    def record(self, policy, timesteps: int) -> Path:
        """Stream one greedy episode of ``policy`` (batch in, batch out) to ``videos/step_<timesteps>``."""

        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"step_{int(timesteps)}{self.suffix}"
        fps = (getattr(self.env, "metadata", None) or {}).get("render_fps") or 30
        with VideoWriter(path, fps=fps) as writer:
            evaluate_policy(policy, self.env, 1, self.seed + len(self.written), lambda f: writer.add(self._frame(f)))
        self.written.append(path)
        return path

    def close(self) -> None:
        """Close the rendering env."""
        self.env.close()
