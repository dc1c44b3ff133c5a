"""State and control containers."""

import numpy as np
import pytest

from oriented_strands.core import BaseMotion, InvalidInputError, StrandSpec, build_model
from oriented_strands.core.state import Control, State
from strands import polyline


def test_rest_state_and_default_control(backend):
    model = build_model([StrandSpec(polyline(4, 0.2))], backend=backend)
    state = State.at_rest(model)
    np.testing.assert_array_equal(backend.to_host(state.q), backend.to_host(model.rest_rotation))
    assert backend.to_host(state.w).shape == (3, 4)
    assert not backend.to_host(state.w).any()
    copy = state.copy()
    copy.w[0, 0] = 1.0
    assert not backend.to_host(state.w).any()
    control = Control.from_model(model, gravity=(0.0, -1.0, 0.0))
    np.testing.assert_array_equal(backend.to_host(control.gravity)[:, 0], (0.0, -1.0, 0.0))
    np.testing.assert_array_equal(
        backend.to_host(control.bend_stiffness), backend.to_host(model.parameters["bend_stiffness"])
    )


def test_control_refuses_bad_gravity_and_base_counts(backend):
    model = build_model([StrandSpec(polyline(2, 0.2))], backend=backend)
    with pytest.raises(InvalidInputError, match="gravity"):
        Control.from_model(model, gravity=(0.0, np.nan, 0.0))
    control = Control.from_model(model)
    with pytest.raises(InvalidInputError, match="2 base"):
        control.set_base_motion(model, BaseMotion.still(np.broadcast_to(np.eye(4), (2, 4, 4))))
    with pytest.raises(InvalidInputError, match="base poses"):
        State.at_rest(model, np.eye(4))


def test_control_counts_the_replacements_of_its_per_link_fields(backend):
    """Worker processes are sent a per-link field again when its revision moves on: every
    replacement counts, in-place writes do not, and a control of some links counts its own."""
    model = build_model([StrandSpec(polyline(4, 0.2))], backend=backend)
    control = Control.from_model(model)
    drag, wind = control.revision("drag"), control.revision("wind_velocity")
    control.drag = control.drag * 2.0
    control.drag = control.drag
    control.wind_velocity[...] = 1.0
    control.gravity = control.gravity * 2.0
    assert control.revision("drag") == drag + 2
    assert control.revision("wind_velocity") == wind
    part = control.at_links(backend.xp.arange(2))
    part.drag = part.drag * 3.0
    assert control.revision("drag") == drag + 2
