"""Build, cache and install Horovod for this interpreter: ``python -m rlgraph_horovod.install``.

Horovod 0.28.1 is the latest release; it ships only as an sdist and does not build unmodified
against torch 2.13 / TensorFlow 2.21. This module fetches the sdist through pip, applies three
edits to its CMake files (C++14 -> C++17 at the top and for torch, drop the XLA op that no longer
compiles against TF 2.21's headers) and one to its launcher (``horovodrun``'s pre-launch check
imports torch, not TensorFlow: 2.6 s less per launch), builds a wheel for exactly the frameworks
installed in this interpreter, caches it outside the clone, and installs it. A second run finds
the cached wheel and installs it in seconds.

Only the standard library is used, so this runs before Horovod (or anything else) exists.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HOROVOD_VERSION = "0.28.1"
CACHE_ENV = "RLGRAPH_HOROVOD_WHEEL_CACHE"
DEFAULT_CACHE = Path("~/.cache/rlgraph/horovod-wheels")
# Pure-Python runtime/build needs of horovod's setup.py (its install_requires plus wheel).
BUILD_REQUIREMENTS = ["setuptools", "wheel", "packaging", "cloudpickle", "psutil", "pyyaml"]


class InstallError(RuntimeError):
    """A step of the Horovod install failed; the message says which and what to do."""


@dataclass(frozen=True)
class Edit:
    """One exact textual edit of a file in the sdist: ``old`` must occur exactly once."""

    path: str
    old: str
    new: str
    why: str


EDITS = (
    Edit(
        "CMakeLists.txt",
        "set(CMAKE_CXX_STANDARD 14)\n",
        "set(CMAKE_CXX_STANDARD 17)\n",
        "torch 2.13 and TF 2.21 headers need C++17",
    ),
    Edit(
        "horovod/torch/CMakeLists.txt",
        "    set(CMAKE_CXX_STANDARD 14)\n",
        "    set(CMAKE_CXX_STANDARD 17)\n",
        "torch 2.13 headers need C++17",
    ),
    Edit(
        "horovod/tensorflow/CMakeLists.txt",
        'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")\n',
        "",
        "the XLA custom-call op does not compile against TF 2.21 (rlgraph does not use XLA ops)",
    ),
    Edit(
        "horovod/common/util.py",
        "EXTENSIONS = ['tensorflow', 'torch', 'mxnet']\n",
        "EXTENSIONS = ['torch', 'tensorflow', 'mxnet']\n",
        "before every launch horovodrun asks the first framework extension that imports, in a forked "
        "process, whether Horovod was built with Gloo; every extension of one build gives the same "
        "answer, and importing torch takes 1.7 CPU-s here against TensorFlow's 4.6 (a bare "
        "`horovodrun -np 2 --gloo` launch: 4.5 -> 1.9 s)",
    ),
)


def edits_digest() -> str:
    """Eight hex digits of a hash over every edit's file, old and new text."""
    text = "\0".join(f"{e.path}\0{e.old}\0{e.new}" for e in EDITS)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class Frameworks:
    """Versions of the frameworks Horovod is built for (``None`` = not installed)."""

    torch: str | None
    tensorflow: str | None

    def cache_key(self) -> str:
        """Directory name that identifies a wheel: Horovod, torch, TF and Python versions, the
        platform, and a digest of :data:`EDITS` (a changed recipe never reuses an older build)."""
        py = f"py{sys.version_info.major}{sys.version_info.minor}"
        torch = f"torch{self.torch}" if self.torch else "notorch"
        tf = f"tf{self.tensorflow}" if self.tensorflow else "notf"
        plat = sysconfig.get_platform().replace("-", "_")
        return f"horovod{HOROVOD_VERSION}-{torch}-{tf}-{py}-{plat}-edits{edits_digest()}"

    def build_env(self) -> dict[str, str]:
        """Horovod's build switches for exactly these frameworks (Gloo on, MPI and MXNet off)."""
        env = {
            "HOROVOD_WITH_GLOO": "1",
            "HOROVOD_WITHOUT_MPI": "1",
            "HOROVOD_WITHOUT_MXNET": "1",
        }
        env["HOROVOD_WITH_PYTORCH" if self.torch else "HOROVOD_WITHOUT_PYTORCH"] = "1"
        env["HOROVOD_WITH_TENSORFLOW" if self.tensorflow else "HOROVOD_WITHOUT_TENSORFLOW"] = "1"
        return env

    def modules(self) -> list[str]:
        """Horovod's framework modules that must import after the install."""
        mods = []
        if self.torch:
            mods.append("horovod.torch")
        if self.tensorflow:
            mods.append("horovod.tensorflow")
        return mods


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def detect_frameworks() -> Frameworks:
    """Find torch and TensorFlow in this interpreter without importing them (that is slow)."""
    torch = _dist_version("torch") if importlib.util.find_spec("torch") else None
    tf = None
    if importlib.util.find_spec("tensorflow"):
        tf = _dist_version("tensorflow-cpu", "tensorflow", "tensorflow-gpu")
    if torch:
        torch = torch.split("+")[0]
    if not torch and not tf:
        raise InstallError(
            f"Neither torch nor tensorflow is installed in {sys.executable}, so there is nothing to "
            "build Horovod for. Install a backend first, e.g. `pip install -c constraints.txt "
            "-e ./rlgraph_torch` (torch) or `-e ./rlgraph_tf` (TensorFlow), then rerun "
            "`python -m rlgraph_horovod.install`."
        )
    return Frameworks(torch=torch, tensorflow=tf)


def cache_root() -> Path:
    """Wheel cache: ``$RLGRAPH_HOROVOD_WHEEL_CACHE`` or ``~/.cache/rlgraph/horovod-wheels``."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def cached_wheel(cache_dir: Path) -> Path | None:
    """The wheel stored under ``cache_dir`` (one per key), or ``None``."""
    wheels = sorted(cache_dir.glob("horovod-*.whl")) if cache_dir.is_dir() else []
    return wheels[0] if wheels else None


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    print(f"[rlgraph_horovod.install] {what}: {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise InstallError(
            f"{what} failed (exit code {proc.returncode}); the command was `{' '.join(cmd)}`. Its output is above."
        )


def apply_edits(src: Path) -> None:
    """Apply :data:`EDITS` to an unpacked sdist; fail clearly if its text no longer matches."""
    for edit in EDITS:
        path = src / edit.path
        if not path.is_file():
            raise InstallError(
                f"The Horovod {HOROVOD_VERSION} sdist has no {edit.path}; the build recipe in "
                "rlgraph_horovod/install.py no longer matches this sdist and must be updated."
            )
        text = path.read_text()
        count = text.count(edit.old)
        if count != 1:
            raise InstallError(
                f"Expected the text {edit.old.strip()!r} exactly once in {edit.path} of the "
                f"Horovod {HOROVOD_VERSION} sdist but found it {count} times; the sdist changed and "
                "the edit in rlgraph_horovod/install.py (needed because "
                f"{edit.why}) must be updated."
            )
        path.write_text(text.replace(edit.old, edit.new))


def fetch_sdist(workdir: Path) -> Path:
    """Download the Horovod sdist through pip and unpack it; returns the source directory."""
    _run(
        [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            f"horovod=={HOROVOD_VERSION}", "-d", str(workdir),
        ],
        "download the Horovod sdist",
    )  # fmt: skip
    archives = list(workdir.glob(f"horovod-{HOROVOD_VERSION}.tar.gz"))
    if not archives:
        raise InstallError(f"pip download left no horovod-{HOROVOD_VERSION}.tar.gz in {workdir}.")
    with tarfile.open(archives[0]) as tar:
        tar.extractall(workdir, filter="data")
    src = workdir / f"horovod-{HOROVOD_VERSION}"
    if not (src / "setup.py").is_file():
        raise InstallError(f"The unpacked sdist has no setup.py under {src}.")
    return src


def build_wheel(frameworks: Frameworks, cache_dir: Path, jobs: int | None = None) -> Path:
    """Fetch, edit and build the Horovod wheel, then store it atomically under ``cache_dir``."""
    _run(
        [sys.executable, "-m", "pip", "install", "-q", *BUILD_REQUIREMENTS],
        "install build requirements",
    )
    with tempfile.TemporaryDirectory(prefix="rlgraph-horovod-build-") as tmp:
        work = Path(tmp)
        src = fetch_sdist(work)
        apply_edits(src)
        env = dict(os.environ)
        env.update(frameworks.build_env())
        if "MAKEFLAGS" not in env:
            # Horovod's setup.py defaults to -j8, which overcommits small machines.
            env["MAKEFLAGS"] = f"-j{jobs or os.cpu_count() or 2}"
        out = work / "wheel"
        started = time.monotonic()
        _run(
            [
                sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                "-w", str(out), str(src),
            ],
            "build the Horovod wheel",
            env=env,
        )  # fmt: skip
        wheels = list(out.glob("horovod-*.whl"))
        if not wheels:
            raise InstallError(f"pip wheel produced no horovod wheel in {out}.")
        print(
            f"[rlgraph_horovod.install] built {wheels[0].name} in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        cache_dir.mkdir(parents=True, exist_ok=True)
        target = cache_dir / wheels[0].name
        partial = cache_dir / (wheels[0].name + ".partial")
        shutil.copyfile(wheels[0], partial)
        os.replace(partial, target)  # atomic: a concurrent reader never sees half a wheel
        return target


def installed_from(wheel: Path) -> bool:
    """Whether the Horovod installed in this interpreter is ``wheel`` itself: pip records the
    archive's sha256 in the distribution's ``direct_url.json`` (PEP 610). Read without importing
    Horovod, so a later run that finds its wheel installed skips the reinstall and import checks."""
    try:
        record = importlib.metadata.distribution("horovod").read_text("direct_url.json")
        installed = json.loads(record or "{}").get("archive_info", {}).get("hashes", {}).get("sha256")
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        return False
    with open(wheel, "rb") as f:
        return bool(installed) and installed == hashlib.file_digest(f, "sha256").hexdigest()


def install_wheel(wheel: Path, frameworks: Frameworks, verify: bool = True) -> None:
    """Install ``wheel`` (replacing any other Horovod build) and check its framework modules load."""
    _run(
        [sys.executable, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(wheel)],
        "install the Horovod wheel",
    )
    _run(
        [sys.executable, "-m", "pip", "install", "-q", "cloudpickle", "psutil", "pyyaml", "packaging"],
        "install Horovod's runtime requirements",
    )
    if verify:
        for module in frameworks.modules():
            _run([sys.executable, "-c", f"import {module}"], f"check that {module} imports")


def main(argv: list[str] | None = None) -> int:
    """Command line: build (or reuse) and install the Horovod wheel for this interpreter."""
    parser = argparse.ArgumentParser(prog="python -m rlgraph_horovod.install", description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="ignore the cached wheel")
    parser.add_argument("--no-install", action="store_true", help="only build/cache the wheel")
    parser.add_argument("--no-verify", action="store_true", help="skip the import check")
    parser.add_argument("--jobs", type=int, default=None, help="parallel compile jobs")
    parser.add_argument("--print-cache-key", action="store_true", help="print the wheel's cache path and exit")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        frameworks = detect_frameworks()
        cache_dir = cache_root() / frameworks.cache_key()
        if args.print_cache_key:
            print(cache_dir)
            return 0
        wheel = None if args.rebuild else cached_wheel(cache_dir)
        if wheel is None:
            print(
                f"[rlgraph_horovod.install] wheel cache miss: no wheel in {cache_dir}; building Horovod "
                f"{HOROVOD_VERSION} for torch={frameworks.torch} tensorflow={frameworks.tensorflow} "
                "(several minutes)",
                flush=True,
            )
            wheel = build_wheel(frameworks, cache_dir, jobs=args.jobs)
        else:
            print(f"[rlgraph_horovod.install] wheel cache hit: reusing {wheel}", flush=True)
        if not args.no_install:
            if not args.rebuild and installed_from(wheel):
                print(f"[rlgraph_horovod.install] already installed from this wheel (same sha256): {wheel}", flush=True)
            else:
                install_wheel(wheel, frameworks, verify=not args.no_verify)
    except InstallError as exc:
        print(f"rlgraph_horovod.install: error: {exc}", file=sys.stderr)
        return 1
    print(f"[rlgraph_horovod.install] done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
