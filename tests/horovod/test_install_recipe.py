"""``python -m rlgraph_horovod.install`` without building: the sdist edits, their checks, the
cache key and the build switches (the build itself runs in the nox session's install step)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlgraph_horovod import install

SDIST_TEXT = {
    "CMakeLists.txt": "project(horovod)\nset(CMAKE_CXX_STANDARD 14)\nset(CMAKE_CXX_STANDARD_REQUIRED ON)\n",
    "horovod/torch/CMakeLists.txt": 'if(NOT Pytorch_VERSION VERSION_LESS "1.5.0")\n    set(CMAKE_CXX_STANDARD 14)\nendif()\n',
    "horovod/tensorflow/CMakeLists.txt": (
        'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/mpi_ops.cc")\n'
        'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")\n'
    ),
    "horovod/common/util.py": "EXTENSIONS = ['tensorflow', 'torch', 'mxnet']\n\n\ndef gloo_built(verbose=False):\n",
}


def _sdist(root: Path, text=SDIST_TEXT) -> Path:
    for rel, body in text.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body)
    return root


def test_edits_apply_to_the_expected_text(tmp_path):
    src = _sdist(tmp_path)
    install.apply_edits(src)
    assert "set(CMAKE_CXX_STANDARD 17)\n" in (src / "CMakeLists.txt").read_text()
    assert "CMAKE_CXX_STANDARD 14" not in (src / "CMakeLists.txt").read_text()
    assert "    set(CMAKE_CXX_STANDARD 17)\n" in (src / "horovod/torch/CMakeLists.txt").read_text()
    tf = (src / "horovod/tensorflow/CMakeLists.txt").read_text()
    assert "xla_mpi_ops.cc" not in tf and "mpi_ops.cc" in tf
    # horovodrun's pre-launch check asks torch's extension first (the quicker import)
    assert (src / "horovod/common/util.py").read_text().startswith("EXTENSIONS = ['torch', 'tensorflow', 'mxnet']\n")


def test_an_sdist_that_changed_fails_naming_file_and_text(tmp_path):
    changed = dict(SDIST_TEXT, **{"horovod/torch/CMakeLists.txt": "set(CMAKE_CXX_STANDARD 17)\n"})
    with pytest.raises(install.InstallError, match=r"horovod/torch/CMakeLists.txt.*found it 0 times"):
        install.apply_edits(_sdist(tmp_path, changed))
    missing = {k: v for k, v in SDIST_TEXT.items() if not k.startswith("horovod/tensorflow")}
    with pytest.raises(install.InstallError, match=r"has no horovod/tensorflow/CMakeLists.txt"):
        install.apply_edits(_sdist(tmp_path / "other", missing))


@pytest.mark.parametrize(
    "torch,tf,on,off",
    [
        ("2.13.0", "2.21.0", {"HOROVOD_WITH_PYTORCH", "HOROVOD_WITH_TENSORFLOW"}, set()),
        ("2.13.0", None, {"HOROVOD_WITH_PYTORCH"}, {"HOROVOD_WITHOUT_TENSORFLOW"}),
        (None, "2.21.0", {"HOROVOD_WITH_TENSORFLOW"}, {"HOROVOD_WITHOUT_PYTORCH"}),
    ],
)
def test_build_switches_and_cache_key_follow_the_installed_frameworks(torch, tf, on, off):
    fw = install.Frameworks(torch=torch, tensorflow=tf)
    env = fw.build_env()
    assert {"HOROVOD_WITH_GLOO", "HOROVOD_WITHOUT_MPI", "HOROVOD_WITHOUT_MXNET"} <= set(env)
    assert on | off <= set(env)
    assert not ({"HOROVOD_WITH_PYTORCH", "HOROVOD_WITHOUT_PYTORCH"} <= set(env))
    key = fw.cache_key()
    assert key.startswith(f"horovod{install.HOROVOD_VERSION}-")
    assert (f"torch{torch}" if torch else "notorch") in key and (f"tf{tf}" if tf else "notf") in key
    assert f"py{sys.version_info.major}{sys.version_info.minor}" in key
    assert key.endswith(f"-edits{install.edits_digest()}")
    assert fw.modules() == [m for m, v in (("horovod.torch", torch), ("horovod.tensorflow", tf)) if v]


def test_a_changed_recipe_changes_the_cache_key(monkeypatch):
    """A wheel built by an older recipe (fewer or other edits) is never reused."""
    fw = install.Frameworks(torch="2.13.0", tensorflow="2.21.0")
    keys = {fw.cache_key()}
    *kept, last = install.EDITS
    monkeypatch.setattr(install, "EDITS", tuple(kept))  # an edit fewer
    keys.add(fw.cache_key())
    monkeypatch.setattr(install, "EDITS", (*kept, install.Edit(last.path, last.old, "other text\n", last.why)))
    keys.add(fw.cache_key())  # an edit that writes something else
    assert len(keys) == 3


def test_cache_location_is_overridable_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv(install.CACHE_ENV, str(tmp_path / "cache"))
    assert install.cache_root() == tmp_path / "cache"
    key_dir = install.cache_root() / install.Frameworks("2.13.0", None).cache_key()
    assert install.cached_wheel(key_dir) is None
    key_dir.mkdir(parents=True)
    (key_dir / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl.partial").write_bytes(b"half")
    assert install.cached_wheel(key_dir) is None  # a half-copied wheel is never used
    wheel = key_dir / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    assert install.cached_wheel(key_dir) == wheel


def test_no_framework_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(install.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(install.InstallError, match="Neither torch nor tensorflow is installed"):
        install.detect_frameworks()


class _Dist:
    """A stand-in for an installed distribution that holds only ``direct_url.json``."""

    def __init__(self, text):
        self.text = text

    def read_text(self, name):
        return self.text if name == "direct_url.json" else None


def test_a_wheel_already_installed_is_recognised_by_its_sha256(tmp_path, monkeypatch):
    import hashlib
    import json

    wheel = tmp_path / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"the wheel's bytes")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    record = {"url": wheel.as_uri(), "archive_info": {"hashes": {"sha256": digest}}}
    metadata = install.importlib.metadata
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(json.dumps(record)))
    assert install.installed_from(wheel)
    wheel.write_bytes(b"another build at the same path")
    assert not install.installed_from(wheel)
    for text in (None, "not json", json.dumps({"url": wheel.as_uri(), "dir_info": {}})):
        monkeypatch.setattr(metadata, "distribution", lambda name, text=text: _Dist(text))
        assert not install.installed_from(wheel)

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    assert not install.installed_from(wheel)
