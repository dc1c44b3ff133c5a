"""The artist's values as the engine's per-link parameters: closed forms of a round rod by
hand, the engine's own material presets, root-to-tip profiles, gravity and substeps."""

import math
from dataclasses import replace

import numpy as np
import pytest

from oriented_strands.core import PRESETS
from oriented_strands.strands_io.errors import SceneInputError
from oriented_strands.strands_io.layout import convert
from oriented_strands.strands_io.parameters import (
    engine_parameters,
    gravity_vector,
    link_radius,
    point_radius,
    preset_names,
    preset_property_values,
    steps_per_frame,
    strand_interaction,
    strand_parameters,
)
from strand_systems import INTERACTION, MODEL, VALUES, conversion, drawn, settings

LINKS = 4
# Link centres of a straight strand of 4 equal segments: 1/8, 3/8, 5/8, 7/8 of its length.
S = (np.arange(LINKS) + 0.5) / LINKS


def _layout():
    curves = drawn([[(0.0, 0.0, 0.0), (1.0, 0.0, 0.0)]])
    return convert(
        curves,
        np.zeros(1, int),
        np.eye(4)[None],
        conversion(segment_count=LINKS),
        allow_branches=True,
    )


def _values(**changes):
    return {**VALUES, **changes}


def test_a_round_rod_has_the_rigidities_of_its_second_moments():
    """r = 1 mm, E = 2 GPa, G = 0.8 GPa: I = π r⁴/4 = 7.854e-13 m⁴, J = π r⁴/2."""
    model = MODEL
    values = _values(youngs_modulus=2.0, shear_modulus=0.8, bend_damping_time=0.1)

    parameters = engine_parameters(_layout(), model, values)

    bend, twist = 2e9 * math.pi * 1e-12 / 4, 0.8e9 * math.pi * 1e-12 / 2
    np.testing.assert_allclose(parameters["bend_stiffness"], np.full((LINKS, 2), bend))
    np.testing.assert_allclose(parameters["twist_stiffness"], np.full(LINKS, twist))
    np.testing.assert_allclose(parameters["bend_damping"], np.full(LINKS, 0.1 * bend))
    np.testing.assert_allclose(parameters["twist_damping"], np.full(LINKS, 0.02 * twist))
    # 0.05 mN·s/m² of drag per metre at the rod's full width.
    np.testing.assert_allclose(parameters["drag"], np.full(LINKS, 0.05e-3))


def test_profiles_run_from_the_root_value_to_tip_times_it():
    model = replace(MODEL, thickness_tip=0.5)
    values = _values(stiffness_tip=0.1, stiffness_shape=2.0, pose_strength=3.0, pose_tip=0.0)
    layout = _layout()

    parameters = engine_parameters(layout, model, values)

    radius = 1e-3 * (1.0 - 0.5 * S)  # thickness: linear (shape 1) from 1 mm to 0.5 mm
    np.testing.assert_allclose(link_radius(layout, model), radius)
    np.testing.assert_allclose(point_radius(layout, model), 1e-3 * (1.0 - 0.5 * np.arange(5) / 4))
    stiffness = 1.0 - 0.9 * S**2
    bend = 0.05e9 * math.pi * radius**4 / 4 * stiffness
    np.testing.assert_allclose(parameters["bend_stiffness"][:, 0], bend)
    np.testing.assert_allclose(parameters["pose_strength"], 3.0 * bend * (1.0 - S))
    np.testing.assert_allclose(parameters["pose_damping"], 0.01 * 3.0 * bend * (1.0 - S))
    # A thinner tip catches less air.
    np.testing.assert_allclose(parameters["drag"], 0.05e-3 * (1.0 - 0.5 * S))


def test_a_branch_starts_as_thick_as_its_parent_where_it_grows_from():
    """A trunk of 1 m tapering linearly from 1 mm to half that, a branch from its third link
    (centre at 5/8) and a twig from the branch's second link (centre at 3/8): each starts with
    the radius its parent has there and tapers to half of that."""
    trunk = [(0.0, 0.0, 0.0), (0.0, 0.0, 1.0)]
    branch = [(0.0, 0.0, 0.6), (0.5, 0.0, 0.6)]
    twig = [(0.2, 0.0, 0.6), (0.2, 0.3, 0.6)]
    layout = convert(
        drawn([trunk, branch, twig]),
        np.zeros(3, int),
        np.eye(4)[None],
        conversion(segment_count=LINKS),
        allow_branches=True,
    )
    assert [spec.parent for spec in layout.specs] == [None, (0, 2), (1, 1)]
    model = replace(MODEL, thickness_tip=0.5)

    branch_root = 1e-3 * (1.0 - 0.5 * 5 / 8)
    twig_root = branch_root * (1.0 - 0.5 * 3 / 8)
    roots = np.array([1e-3, branch_root, twig_root])
    np.testing.assert_allclose(
        link_radius(layout, model), np.repeat(roots, LINKS) * np.tile(1.0 - 0.5 * S, 3)
    )
    tips = point_radius(layout, model)[LINKS :: LINKS + 1]
    np.testing.assert_allclose(tips, 0.5 * roots)


def test_mass_follows_the_cross_section_and_its_own_profile():
    model = replace(MODEL, density=1000.0, mass_tip=20.0)

    parameters = strand_parameters(_layout(), model, VALUES)

    # ρ π r² = 1000 kg/m³ × π × 1 mm² = 3.14 g/m, 20 times that at the tip, linear between.
    np.testing.assert_allclose(parameters.mass_per_length, 1e3 * math.pi * 1e-6 * (1 + 19 * S))
    np.testing.assert_allclose(parameters.collision_weight, np.ones(LINKS))


@pytest.mark.parametrize("name", preset_names())
def test_a_preset_applied_as_property_values_gives_the_presets_own_parameters(name):
    preset = PRESETS[name]
    values = _values(**preset_property_values(name))
    model = replace(MODEL, radius=values.pop("radius"), density=values.pop("density"))

    ours = strand_parameters(_layout(), model, values)
    theirs = preset.strand_parameters()

    for field in ("bend_stiffness", "twist_stiffness", "bend_damping", "twist_damping", "drag"):
        expected = np.broadcast_to(getattr(theirs, field), np.shape(getattr(ours, field)))
        np.testing.assert_allclose(getattr(ours, field), expected, rtol=1e-12, err_msg=field)
    np.testing.assert_allclose(ours.mass_per_length, theirs.mass_per_length, rtol=1e-12)


def test_an_unknown_preset_is_refused_listing_the_known_ones():
    with pytest.raises(
        SceneInputError,
        match="unknown material preset 'oak'; known: straight hair, .*, grass blade",
    ):
        preset_property_values("oak")


def test_gravity_comes_from_the_scene_or_the_system_times_its_factor():
    scene = settings()
    custom = replace(scene, gravity_source="CUSTOM")
    values = _values(custom_gravity=(1.0, 0.0, 0.0), gravity_factor=0.5)

    np.testing.assert_array_equal(gravity_vector(scene, values), (0.0, 0.0, -4.905))
    np.testing.assert_array_equal(gravity_vector(custom, values), (0.5, 0.0, 0.0))


def test_interaction_takes_friction_and_volume_from_the_frame_and_weights_links_to_the_tip():
    layout = _layout()
    values = _values(interaction_friction=0.4, interaction_volume=0.25)
    interaction = replace(INTERACTION, target_density=0.5, cell_size=0.01, tip=0.0)
    model = replace(MODEL, interaction=interaction)

    assert strand_interaction(layout, MODEL, values) is None
    interaction = strand_interaction(layout, model, values)
    assert (interaction.friction, interaction.volume) == (0.4, 0.25)
    assert (interaction.target_density, interaction.cell_size) == (0.5, 0.01)
    np.testing.assert_allclose(interaction.weight, 1.0 - S)


@pytest.mark.parametrize(
    ("steps_per_second", "fps", "steps"),
    [
        (96, 24, 4),
        (96, 24000 / 1001, 4),  # 4.004 a frame: within 1 % of 4
        (96, 25, 4),  # 3.84
        (96, 30, 4),  # 3.2
        (96, 60, 2),  # 1.6
        (102, 25, 5),  # 4.08: 2 % above 4
        (1, 24, 1),
    ],
)
def test_steps_per_frame_are_the_frames_share_rounded_up(steps_per_second, fps, steps):
    assert steps_per_frame(steps_per_second, fps) == steps
