"""The engine's input contract: whatever a script or a pipeline passes to the constructors of
the public API, the answer is a working object or one of the documented ``StrandError``
subclasses, never another exception (property-based, with a fixed seed)."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oriented_strands.core import (
    Simulation,
    SolverSettings,
    StrandError,
    StrandParameters,
    StrandSpec,
    build_model,
)
from strands import STILL

# Values a caller may pass by mistake: non-finite, huge, negative, of the wrong kind.
MISTAKES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e300, max_value=1e300),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.complex_numbers(),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
    st.lists(st.floats(allow_nan=True), max_size=4),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
CONTRACT = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# Every field of each record: a field added later is checked too.
PARAMETERS = [field.name for field in dataclasses.fields(StrandParameters)]
STRAND_FIELDS = [field.name for field in dataclasses.fields(StrandSpec)]
SOLVER_FIELDS = [field.name for field in dataclasses.fields(SolverSettings)]


def _points(links=3):
    return np.stack(
        [np.zeros(links + 1), np.zeros(links + 1), -np.linspace(0.0, 0.2, links + 1)], 1
    )


def _answers_by_the_contract(make):
    """Call ``make``; a model it returns is usable (finite mass), an error is a StrandError."""
    try:
        result = make()
    except StrandError:
        return None
    return result


@CONTRACT
@given(name=st.sampled_from(PARAMETERS), value=MISTAKES)
def test_any_parameter_value_builds_a_model_or_is_refused(name, value):
    model = _answers_by_the_contract(
        lambda: build_model([StrandSpec(_points())], StrandParameters(**{name: value}))
    )
    if model is not None:
        assert np.isfinite(model.backend.to_host(model.mass)).all()
        assert np.isfinite(model.backend.to_host(model.inertia)).all()


@CONTRACT
@given(field=st.sampled_from(STRAND_FIELDS), value=MISTAKES)
def test_any_strand_field_builds_a_model_or_is_refused(field, value):
    specs = [StrandSpec(_points())]
    branch = {"points": _points() + [0.1, 0.0, 0.0], "parent": None}
    branch[field] = value
    specs.append(StrandSpec(**branch))
    model = _answers_by_the_contract(lambda: build_model(specs))
    if model is not None:
        assert model.n_strands == 2
        assert model.n_bases <= 2


@CONTRACT
@given(field=st.sampled_from(SOLVER_FIELDS), value=MISTAKES)
def test_any_solver_setting_is_taken_or_refused(field, value):
    solver = _answers_by_the_contract(lambda: SolverSettings(**{field: value}))
    if solver is not None:
        # Taken as given: a whole number where one is counted, a finite one where measured.
        value = getattr(solver, field)
        if field in ("substeps", "newton_max_iterations", "max_subdivision_depth", "workers"):
            assert value is None or isinstance(value, int | np.integer)
        elif field in ("newton_tolerance", "subdivision_threshold"):
            assert math.isfinite(value)
            assert value > 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"strands": StrandSpec(_points())}, "strands must be a sequence of StrandSpec"),
        ({"strands": [_points()]}, "strands[0] must be a StrandSpec"),
        ({"parameters": {"radius": 0.001}}, "parameters must be a StrandParameters"),
        (
            {"base_rest_poses": np.diag([1.0, 1.0, -1.0, 1.0])[None]},
            "base_rest_poses[0] is not a rotation",
        ),
        ({"parameters": StrandParameters(radius=1e200)}, "too large to represent"),
    ],
)
def test_malformed_arguments_name_what_is_wrong(arguments, message):
    call = {"strands": [StrandSpec(_points())], **arguments}
    with pytest.raises(StrandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_model(**call)


def test_whole_numbers_are_not_rounded():
    """A base of 0.5, a parent link of 0.5 or 2.7 substeps are refused, not truncated."""
    with pytest.raises(StrandError, match="base must be a whole number"):
        build_model([StrandSpec(_points(), base=0.5)])
    with pytest.raises(StrandError, match="two whole numbers"):
        build_model([StrandSpec(_points()), StrandSpec(_points()[1:], parent=(0, 0.5))])
    with pytest.raises(StrandError, match="substeps must be a whole number"):
        SolverSettings(substeps=2.7)
    assert not math.isnan(SolverSettings(substeps=np.int64(3)).substeps)


def test_a_simulation_runs_with_settings_taken_as_whole_numbers():
    sim = Simulation(build_model([StrandSpec(_points())]), SolverSettings(substeps=np.int64(2)))
    sim.advance(1 / 24, STILL)
    assert np.isfinite(sim.points()).all()
