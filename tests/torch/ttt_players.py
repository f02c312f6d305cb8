"""Scripted tic-tac-toe players for the self-play tests (``module:callable`` opponents)."""

import numpy as np

#: every (seat, board planes, mask) a recording player was asked about
SEEN: list = []


def first_legal(seat, obs, rows):
    """The lowest-numbered legal square of every game."""
    return np.argmax(np.asarray(obs["action_mask"]) != 0, axis=1)


def recording_first_legal(seat, obs, rows):
    """:func:`first_legal`, remembering what it was shown."""
    for i, row in enumerate(rows):
        SEEN.append((seat, int(row), np.array(obs["observation"][i]), np.array(obs["action_mask"][i])))
    return first_legal(seat, obs, rows)
