"""Executors run training jobs; the local one lives here, others arrive as plugins."""
