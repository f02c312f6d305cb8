"""Static-mode functions pass only the cells they read and return only those they assign
(``rlgraph_jax.state.StatefulFunction``), and stay right when a trace for new shapes reaches more."""

import numpy as np
import pytest

pytest.importorskip("jax")

from rlgraph_jax.backend import JaxBackend  # noqa: E402


@pytest.fixture
def backend():
    return JaxBackend("static")


def test_an_untouched_cell_is_neither_passed_nor_replaced(backend):
    w = backend.variable("w", np.full((3, 2), 2.0, np.float32))
    out = backend.variable("out", np.zeros((2,), np.float32))
    idle = backend.variable("idle", np.ones((4,), np.float32))
    fn = backend.function(lambda x: backend.ops.assign(out, backend.ops.reduce_sum(x @ w, axis=0)))
    before_w, before_idle = w.value, idle.value
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    fn(backend.to_tensor(x))
    fn(backend.to_tensor(x))
    np.testing.assert_allclose(backend.to_numpy(out), (x @ np.full((3, 2), 2.0)).sum(0))
    # read, not assigned: the same array object; never read: the same too (the program saw neither)
    assert w.value is before_w and idle.value is before_idle
    read, wrote, _ = fn._pruned[len(backend._cells.cells)]
    cells = backend._cells.cells
    assert [cells[i] for i in read] == [w] and [cells[i] for i in wrote] == [out]


def test_a_cell_read_only_for_other_shapes_is_read_fresh_not_baked_in(backend):
    scale = backend.variable("scale", np.float32(3.0))

    def f(x):
        return x * scale if x.ndim == 2 else x  # the first trace (1-d) does not read scale

    fn = backend.function(f)
    np.testing.assert_allclose(backend.to_numpy(fn(backend.to_tensor(np.ones(2, np.float32)))), np.ones(2))
    backend.assign_numpy(scale, np.float32(5.0))
    got = backend.to_numpy(fn(backend.to_tensor(np.ones((2, 2), np.float32))))
    np.testing.assert_allclose(got, np.full((2, 2), 5.0))
    backend.assign_numpy(scale, np.float32(7.0))
    got = backend.to_numpy(fn(backend.to_tensor(np.ones((2, 2), np.float32))))
    np.testing.assert_allclose(got, np.full((2, 2), 7.0))


def test_a_cell_assigned_only_for_other_shapes_keeps_the_assignment(backend):
    seen = backend.variable("seen", np.zeros((), np.float32))

    def f(x):
        if x.ndim == 2:  # the first trace (1-d) assigns nothing
            backend.ops.assign(seen, backend.ops.reduce_sum(x))
        return x + 1.0

    fn = backend.function(f)
    fn(backend.to_tensor(np.ones(3, np.float32)))
    assert float(backend.to_numpy(seen)) == 0.0
    fn(backend.to_tensor(np.ones((2, 2), np.float32)))
    assert float(backend.to_numpy(seen)) == 4.0
    fn(backend.to_tensor(np.ones(3, np.float32)))  # the 1-d shape again, now through the full program
    assert float(backend.to_numpy(seen)) == 4.0


def test_a_cell_given_another_cells_value_is_read_by_the_pruned_program(backend):
    source = backend.variable("source", np.arange(3, dtype=np.float32))
    target = backend.variable("target", np.zeros(3, np.float32))

    def sync():  # one cell handed another's array as it is (no op between: the jaxpr forwards it)
        target.value = source.value

    fn = backend.function(sync)
    fn()
    np.testing.assert_array_equal(backend.to_numpy(target), np.arange(3))
    read, wrote, _ = fn._pruned[len(backend._cells.cells)]  # still pruned, not fallen back
    cells = backend._cells.cells
    assert [cells[i] for i in read] == [source] and [cells[i] for i in wrote] == [target]
    backend.assign_numpy(source, np.full(3, 7.0, np.float32))
    fn()
    np.testing.assert_array_equal(backend.to_numpy(target), np.full(3, 7.0))
