"""The strand system's settings as an artist meets them: tooltips, units, animation, presets."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from scene_builders import add_strand_system, play_without_errors, poly_curve  # noqa: E402

pytestmark = pytest.mark.usefixtures("extension")

# What the engine can change while it runs (Simulation.set_parameter, set_interaction's friction
# and volume); everything else defines
# the strand model or the sampled input and must not pretend to be animatable.
ANIMATABLE = {
    "ellipticity",
    "youngs_modulus",
    "shear_modulus",
    "stiffness_tip",
    "stiffness_shape",
    "bend_damping_time",
    "twist_damping_time",
    "damping_tip",
    "damping_shape",
    "custom_gravity",
    "gravity_factor",
    "air_drag",
    "wind_velocity",
    "time_scale",
    "local_dynamics",
    "field_weight",
    "field_weight_tip",
    "field_weight_shape",
    "pose_strength",
    "pose_damping_time",
    "pose_tip",
    "pose_shape",
    "interaction_friction",
    "interaction_volume",
}


def _properties(group):
    return {p.identifier: p for p in group.bl_rna.properties if p.identifier != "rna_type"}


def test_exactly_the_parameters_the_engine_can_change_are_animatable():
    props = _properties(bpy.types.Object.bl_rna.properties["oriented_strands"].fixed_type)
    assert {name for name, p in props.items() if p.is_animatable} == ANIMATABLE


@pytest.mark.parametrize("pointer", ["oriented_strands", "oriented_strands_obstacle"])
def test_every_setting_has_a_tooltip(pointer):
    props = _properties(bpy.types.Object.bl_rna.properties[pointer].fixed_type)
    assert [name for name, p in props.items() if len(p.description) < 20] == []


def test_lengths_and_speeds_carry_blender_units():
    props = _properties(bpy.types.Object.bl_rna.properties["oriented_strands"].fixed_type)
    units = {name: props[name].unit for name in props if props[name].type == "FLOAT"}
    for name in ("segment_length", "branch_tolerance", "radius"):
        assert units[name] == "LENGTH"
    assert units["wind_velocity"] == "VELOCITY"
    assert units["interaction_volume"] == "VELOCITY"
    assert units["custom_gravity"] == "ACCELERATION"


def test_backend_selector_says_what_runs_on_this_machine():
    from oriented_strands import scene
    from oriented_strands.core import available_backends

    items = {identifier: description for identifier, _, description, _ in scene.backend_items()}
    for name, reason in available_backends().items():
        assert items[name] == (f"Unavailable: {reason}" if reason else "Available on this machine")


@pytest.mark.parametrize(
    "preset",
    ["STRAIGHT_HAIR", "WAVY_HAIR", "CURLY_HAIR", "GREEN_WOOD_TWIG", "LEAF_STEM", "GRASS_BLADE"],
)
def test_material_presets_give_a_strand_that_simulates(factory_scene, preset):
    factory_scene.frame_end = 6
    ob = poly_curve("strand", [[(0, 0, 0), (0.1, 0, -0.1), (0.2, 0, -0.1)]])
    add_strand_system(ob)
    assert bpy.ops.oriented_strands.apply_material_preset(preset=preset) == {"FINISHED"}
    for frame in range(1, 7):
        factory_scene.frame_set(frame)
    from oriented_strands import scene

    text, icon = scene.status(ob)
    assert icon != "ERROR", text
    assert text.startswith("6 frames cached")


def test_obstacles_carry_a_contact_material():
    mesh = bpy.data.objects.new("head", bpy.data.meshes.new("head"))
    material = mesh.oriented_strands_obstacle
    material.use_obstacle = True
    material.restitution, material.static_friction, material.dynamic_friction = 0.2, 0.6, 0.5
    assert (material.restitution, material.static_friction) == pytest.approx((0.2, 0.6))
    material.restitution = 3.0
    assert material.restitution == 1.0  # clamped to its range


def _swing_period(scene, name: str, mass_tip: float, mass_shape: float) -> float:
    """The period (s) of a 50 cm string of 20 segments, drawn straight and 6° off the vertical
    and let go, hanging from a still root: from its tip's crossings of the vertical through the
    root over 4 s at 24 fps. Its bending and twisting are as soft as the panel allows, so
    gravity alone swings it."""
    fps, frames = 24, 96
    scene.render.fps, scene.frame_end = fps, frames
    tilt = math.radians(6.0)
    tip = (SWING_LENGTH * math.sin(tilt), 0.0, 1.0 - SWING_LENGTH * math.cos(tilt))
    ob = poly_curve(name, [[(0.0, 0.0, 1.0), tip]])
    add_strand_system(ob)
    props = ob.oriented_strands
    props.segment_count = SWING_SEGMENTS
    props.youngs_modulus = props.shear_modulus = 1e-6
    props.use_collisions = False
    props.mass_tip, props.mass_shape = mass_tip, mass_shape
    played = play_without_errors(scene, ob, range(1, frames + 1))
    x = np.array([played[frame][-1, 0] for frame in range(1, frames + 1)])
    sign_change = np.nonzero(np.sign(x[:-1]) != np.sign(x[1:]))[0]
    crossings = (sign_change + x[sign_change] / (x[sign_change] - x[sign_change + 1])) / fps
    assert len(crossings) >= 4
    return 2.0 * float(np.diff(crossings).mean())


SWING_LENGTH, SWING_SEGMENTS = 0.5, 20


def test_a_heavy_tip_makes_a_string_swing_as_a_pendulum(factory_scene):
    """*Tip Mass* weighs the tip down on top of the taper: a string whose last links carry
    nineteen-twentieths of its mass swings as the rigid pendulum of that mass distribution
    (closed form, 2π √(I / (m g d))), while the same string of even mass swings as a hanging
    chain, whose first mode's period is 2/2.405 of a simple pendulum's of its length (the first
    zero of the Bessel function J₀). Measured: 1.393 s against 1.391 s, and 1.181 s against
    1.180 s."""
    mass_tip, mass_shape = 1000.0, 50.0
    heavy = _swing_period(factory_scene, "lantern string", mass_tip, mass_shape)
    s = (np.arange(SWING_SEGMENTS) + 0.5) / SWING_SEGMENTS
    mass = 1.0 + (mass_tip - 1.0) * s**mass_shape
    piece = SWING_LENGTH / SWING_SEGMENTS
    distance = s * SWING_LENGTH
    inertia = (mass * (distance**2 + piece**2 / 12.0)).sum()
    gravity = 9.81
    pendulum = 2.0 * math.pi * math.sqrt(inertia / (gravity * (mass * distance).sum()))
    assert mass[-3:].sum() / mass.sum() > 0.9
    assert heavy == pytest.approx(pendulum, rel=0.01)

    even = _swing_period(factory_scene, "plain string", 1.0, 1.0)
    chain = 2.0 / 2.4048 * 2.0 * math.pi * math.sqrt(SWING_LENGTH / gravity)
    assert even == pytest.approx(chain, rel=0.01)
