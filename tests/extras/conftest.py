"""Setup of the optional-tools tests (extras tensorboard, wandb, onnx, render; nox session ``extras``
installs ``rlgraph_core[tensorboard,wandb,onnx,render]`` with both backends): wandb stays offline."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _wandb_offline(monkeypatch):
    """wandb never reaches the network in tests."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    os.environ.setdefault("WANDB_CONSOLE", "off")
