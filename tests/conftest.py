"""Shared test setup: quiet TensorFlow, headless matplotlib, no progress bars."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
