"""What the artist edits: a strand system's settings on its object, and an obstacle's material.

``Object.oriented_strands`` holds one strand system's settings; ``Object.oriented_strands_obstacle``
an obstacle's contact material. Values are in SI units unless the tooltip says otherwise; the
mapping onto the engine's parameters is in ``scene/strands.py`` and ``docs/user-guide.md``.
Properties the engine can change while it runs are animatable (keyframe them); the others define
the strand model and rebuild it when changed.

Update callbacks only tell ``scene`` that something changed; they never simulate.
"""

from __future__ import annotations

import math

import bpy
from bpy.props import (
    BoolProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from .. import scene

# For properties that define the strand model or the sampled input: the engine cannot change
# them while it runs, so they are not animatable.
STATIC: set[str] = set()


def _parameters_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.parameters_changed(props.id_data)


def _input_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.input_changed(props.id_data, "the frame range changed")


def _reference_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.input_changed(props.id_data, "the local-dynamics reference changed")


def _field_collection_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.input_changed(props.id_data, "the force-field collection changed")


def _input_changed_obstacles(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.obstacles_setting_changed(props.id_data)


def _pose_object_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.input_changed(props.id_data, "the pose object changed")


def _is_pose_candidate(props: StrandSystemProperties, ob: bpy.types.Object) -> bool:
    return ob.type in scene.STRAND_OBJECT_TYPES and ob != props.id_data


def _pin_object_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.input_changed(props.id_data, "the pin object changed")


def _is_pin_candidate(props: StrandSystemProperties, ob: bpy.types.Object) -> bool:
    return ob != props.id_data


def _enabled_changed(props: StrandSystemProperties, _context: bpy.types.Context) -> None:
    scene.enabled_changed(props.id_data)


def _backend_items(_props: object, _context: object) -> list[tuple[str, str, str, int]]:
    return scene.backend_items()


class StrandSystemProperties(bpy.types.PropertyGroup):
    """One strand system: the object's curves, simulated as chains of rigid segments."""

    is_system: BoolProperty(
        name="Strand System",
        description="This object's curves are simulated as strands (set by Add Strand System)",
        default=False,
        options=STATIC,
    )
    enabled: BoolProperty(
        name="Simulate",
        description=(
            "Simulate the strands and show them on the preview object; when off, the preview "
            "shows the rest shape"
        ),
        default=True,
        options=STATIC,
        update=_enabled_changed,
    )
    preview_object: PointerProperty(
        name="Preview Object",
        description=(
            "Generated Curves object that shows the simulated strands (the input curves stay "
            "untouched as the rest shape)"
        ),
        type=bpy.types.Object,
        options=STATIC,
    )

    # --- strand: how curves become segments, and their cross-section ------------------------
    resample_mode: EnumProperty(
        name="Segments",
        description="How each curve is divided into rigid segments",
        items=[
            ("COUNT", "Count", "Every strand gets the same number of segments"),
            ("LENGTH", "Length", "Segments of about the same length on every strand"),
        ],
        default="COUNT",
        options=STATIC,
        update=_parameters_changed,
    )
    segment_count: IntProperty(
        name="Segment Count",
        description="Rigid segments per strand (more follow the curve closer, cost more)",
        default=16,
        min=1,
        soft_max=64,
        max=1024,
        options=STATIC,
        update=_parameters_changed,
    )
    segment_length: FloatProperty(
        name="Segment Length",
        description="Target length of a segment; each strand gets a whole number of segments",
        default=0.02,
        min=1e-5,
        soft_min=1e-3,
        soft_max=0.2,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
        update=_parameters_changed,
    )
    branch_tolerance: FloatProperty(
        name="Branch Tolerance",
        description=(
            "A curve whose root lies this close to another curve becomes a branch of it "
            "(0 disables branches). Hair grown on a surface has no branches"
        ),
        default=0.001,
        min=0.0,
        soft_max=0.05,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
        update=_parameters_changed,
    )
    radius: FloatProperty(
        name="Radius",
        description="Radius of the strand's cross-section at the root (sets mass and stiffness)",
        default=0.001,
        min=1e-7,
        soft_min=1e-5,
        soft_max=0.05,
        precision=5,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
        update=_parameters_changed,
    )
    thickness_tip: FloatProperty(
        name="Tip Thickness",
        description="Radius at the tip as a fraction of the root radius (tapering)",
        default=1.0,
        min=0.01,
        max=1.0,
        subtype="FACTOR",
        options=STATIC,
        update=_parameters_changed,
    )
    thickness_shape: FloatProperty(
        name="Thickness Shape",
        description="Exponent of the root-to-tip taper: 1 is linear, larger keeps it thick longer",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        options=STATIC,
        update=_parameters_changed,
    )
    density: FloatProperty(
        name="Density",
        description="Density of the strand's material, kg/m³ (hair 1300, green wood 900)",
        default=1100.0,
        min=1e-3,
        soft_min=10.0,
        soft_max=3000.0,
        options=STATIC,
        update=_parameters_changed,
    )
    mass_tip: FloatProperty(
        name="Tip Mass",
        description=(
            "Mass per length at the tip as a factor of the root's (on top of the thickness "
            "taper): above 1 weighs the tip down, as a lantern or a bead on a string"
        ),
        default=1.0,
        min=0.01,
        soft_max=1000.0,
        options=STATIC,
        update=_parameters_changed,
    )
    mass_shape: FloatProperty(
        name="Mass Shape",
        description=(
            "Exponent of the root-to-tip mass profile: 1 is linear, larger keeps the change to "
            "the last part of the strand"
        ),
        default=1.0,
        min=0.05,
        soft_max=50.0,
        options=STATIC,
        update=_parameters_changed,
    )
    ellipticity: FloatProperty(
        name="Ellipticity",
        description=(
            "Width over thickness of an elliptic cross-section (1: round); a flat strand bends "
            "more easily across its thin side"
        ),
        default=1.0,
        min=1.0,
        soft_max=20.0,
        update=_parameters_changed,
    )

    # --- stiffness ---------------------------------------------------------------------------
    youngs_modulus: FloatProperty(
        name="Bending (GPa)",
        description=(
            "Young's modulus of the material in GPa: bending stiffness is this times the "
            "cross-section's second moment of area (hair 3.9, green wood 2, rubber 0.01)"
        ),
        default=0.05,
        min=1e-6,
        soft_max=10.0,
        precision=4,
        update=_parameters_changed,
    )
    shear_modulus: FloatProperty(
        name="Twisting (GPa)",
        description=(
            "Shear modulus of the material in GPa: twisting stiffness is this times the "
            "cross-section's torsion constant (hair 0.89, green wood 0.14)"
        ),
        default=0.02,
        min=1e-6,
        soft_max=5.0,
        precision=4,
        update=_parameters_changed,
    )
    stiffness_tip: FloatProperty(
        name="Tip Stiffness",
        description="Stiffness at the tip as a factor of the root's (on top of any taper)",
        default=1.0,
        min=0.0,
        soft_max=2.0,
        update=_parameters_changed,
    )
    stiffness_shape: FloatProperty(
        name="Stiffness Shape",
        description="Exponent of the root-to-tip stiffness profile: 1 is linear",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        update=_parameters_changed,
    )

    # --- damping -----------------------------------------------------------------------------
    bend_damping_time: FloatProperty(
        name="Bending Damping",
        description=(
            "Internal bending friction as a relaxation time, s: bending damping is this times "
            "the bending stiffness (hair 0.02)"
        ),
        default=0.02,
        min=0.0,
        soft_max=1.0,
        precision=4,
        unit="TIME_ABSOLUTE",
        update=_parameters_changed,
    )
    twist_damping_time: FloatProperty(
        name="Twisting Damping",
        description="Internal twisting friction as a relaxation time, s (times twist stiffness)",
        default=0.02,
        min=0.0,
        soft_max=1.0,
        precision=4,
        unit="TIME_ABSOLUTE",
        update=_parameters_changed,
    )
    damping_tip: FloatProperty(
        name="Tip Damping",
        description="Damping at the tip as a factor of the root's",
        default=1.0,
        min=0.0,
        soft_max=2.0,
        update=_parameters_changed,
    )
    damping_shape: FloatProperty(
        name="Damping Shape",
        description="Exponent of the root-to-tip damping profile: 1 is linear",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        update=_parameters_changed,
    )

    # --- forces ------------------------------------------------------------------------------
    gravity_source: EnumProperty(
        name="Gravity",
        description="Where the gravity acting on the strands comes from",
        items=[
            ("SCENE", "Scene", "The scene's gravity (Scene properties), none if it is disabled"),
            ("CUSTOM", "Custom", "A gravity vector of this strand system's own"),
        ],
        default="SCENE",
        options=STATIC,
        update=_parameters_changed,
    )
    custom_gravity: FloatVectorProperty(
        name="Custom Gravity",
        description="Gravitational acceleration, world axes",
        default=(0.0, 0.0, -9.81),
        subtype="ACCELERATION",
        unit="ACCELERATION",
        size=3,
        update=_parameters_changed,
    )
    gravity_factor: FloatProperty(
        name="Gravity Factor",
        description="Scales the gravity acting on the strands",
        default=1.0,
        soft_min=0.0,
        soft_max=2.0,
        update=_parameters_changed,
    )
    air_drag: FloatProperty(
        name="Air Drag",
        description=(
            "Air resistance per metre of strand per unit speed relative to the air, in "
            "mN·s/m² (hair 0.005 to 0.05); thinner parts of a tapered strand feel less"
        ),
        default=0.05,
        min=0.0,
        soft_max=10.0,
        precision=4,
        update=_parameters_changed,
    )
    wind_velocity: FloatVectorProperty(
        name="Wind",
        description="Velocity of the air, world axes; drag pulls the strands along with it",
        default=(0.0, 0.0, 0.0),
        subtype="VELOCITY",
        unit="VELOCITY",
        size=3,
        update=_parameters_changed,
    )

    field_collection: PointerProperty(
        name="Force Fields",
        description=(
            "Only the force fields in this collection act on the strands (all of the scene's "
            "Wind, Turbulence, Vortex and Force fields when empty)"
        ),
        type=bpy.types.Collection,
        options=STATIC,
        update=_field_collection_changed,
    )
    field_weight: FloatProperty(
        name="Field Weight",
        description="How strongly the scene's force fields act on the strands at the root",
        default=1.0,
        min=0.0,
        soft_max=2.0,
        update=_parameters_changed,
    )
    field_weight_tip: FloatProperty(
        name="Tip",
        description="Force-field weight at the tip relative to the root",
        default=1.0,
        min=0.0,
        soft_max=4.0,
        update=_parameters_changed,
    )
    field_weight_shape: FloatProperty(
        name="Shape",
        description="How the field weight goes from root to tip: 1 linear, larger changes later",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        update=_parameters_changed,
    )

    # --- collisions --------------------------------------------------------------------------
    use_collisions: BoolProperty(
        name="Collisions",
        description="Collide the strands with the scene's Strand Obstacle objects",
        default=True,
        options=STATIC,
        update=_input_changed_obstacles,
    )
    obstacle_collection: PointerProperty(
        name="Obstacles",
        description=(
            "Only the Strand Obstacle objects in this collection are collided with (all of the "
            "scene's when empty)"
        ),
        type=bpy.types.Collection,
        options=STATIC,
        update=_input_changed_obstacles,
    )
    collision_radius: FloatProperty(
        name="Collision Radius",
        description=(
            "Radius of the strands' collision spheres at the root: a guide strand standing for "
            "a clump of hair collides as thick as the clump"
        ),
        default=0.001,
        min=0.0,
        soft_max=0.05,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
        update=_parameters_changed,
    )
    collision_tip: FloatProperty(
        name="Tip",
        description="Collision radius at the tip relative to the root (0: the tip passes through)",
        default=1.0,
        min=0.0,
        soft_max=2.0,
        options=STATIC,
        update=_parameters_changed,
    )
    collision_shape: FloatProperty(
        name="Shape",
        description="How the collision radius goes from root to tip: 1 linear",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        options=STATIC,
        update=_parameters_changed,
    )
    swing_limit: FloatProperty(
        name="Swing Limit",
        description=(
            "Largest bend of any joint away from its rest direction (180°: no limit); bone "
            "chains of ears and tails use it to stay in shape"
        ),
        default=math.pi,
        min=0.0,
        max=math.pi,
        subtype="ANGLE",
        options=STATIC,
        update=_parameters_changed,
    )
    twist_limit: FloatProperty(
        name="Twist Limit",
        description="Largest twist of any joint either way from its rest twist (180°: no limit)",
        default=math.pi,
        min=0.0,
        max=math.pi,
        subtype="ANGLE",
        options=STATIC,
        update=_parameters_changed,
    )
    contact_iterations: IntProperty(
        name="Contact Iterations",
        description=(
            "Most iterations of the contact correction per substep: more resolves crowded "
            "contacts (most strands need two or three)"
        ),
        default=8,
        min=1,
        soft_max=40,
        options=STATIC,
        update=_parameters_changed,
    )

    # --- strand interaction ------------------------------------------------------------------
    use_interaction: BoolProperty(
        name="Interaction",
        description=(
            "Let the strands act on each other through a grid: hair keeps its volume and moves "
            "as one mass (only the strands of this system interact)"
        ),
        default=False,
        options=STATIC,
        update=_parameters_changed,
    )
    interaction_friction: FloatProperty(
        name="Friction",
        description=(
            "Share of a strand's motion relative to its neighbours taken away in 1/24 s: 0 lets "
            "strands pass freely, 1 makes the hair move as one mass"
        ),
        default=0.2,
        min=0.0,
        max=1.0,
        subtype="FACTOR",
        update=_parameters_changed,
    )
    interaction_volume: FloatProperty(
        name="Volume",
        description=(
            "Speed that hair packed to twice its target density gains in 1/24 s as it spreads "
            "out again (0: hair may pack without limit)"
        ),
        default=0.5,
        min=0.0,
        soft_max=5.0,
        unit="VELOCITY",
        update=_parameters_changed,
    )
    interaction_target: EnumProperty(
        name="Target Density",
        description="The density above which hair pushes apart",
        items=[
            (
                "REST",
                "As Groomed",
                "Each strand's own density in the drawn shape: a groom keeps its shape",
            ),
            ("VALUE", "Value", "One density for the whole system"),
        ],
        default="REST",
        options=STATIC,
        update=_parameters_changed,
    )
    interaction_density: FloatProperty(
        name="Density",
        description="Target density of the hair (mass of strands per volume of hair), kg/m³",
        default=20.0,
        min=1e-3,
        soft_max=500.0,
        options=STATIC,
        update=_parameters_changed,
    )
    interaction_cell_size: FloatProperty(
        name="Cell Size",
        description="Size of the grid's cells (0: twice the segment length)",
        default=0.0,
        min=0.0,
        soft_max=0.1,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
        update=_parameters_changed,
    )
    interaction_tip: FloatProperty(
        name="Tip",
        description="Interaction at the tip relative to the root",
        default=1.0,
        min=0.0,
        soft_max=2.0,
        options=STATIC,
        update=_parameters_changed,
    )
    interaction_shape: FloatProperty(
        name="Shape",
        description="How the interaction goes from root to tip: 1 linear",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        options=STATIC,
        update=_parameters_changed,
    )

    # --- art direction -----------------------------------------------------------------------
    rest_shape: EnumProperty(
        name="Rest Shape",
        description="Which shape the strands take without gravity",
        items=[
            (
                "DRAWN",
                "As Drawn",
                "The curves as drawn are the strands' shape without gravity: they sag under it",
            ),
            (
                "HOLD_UNDER_GRAVITY",
                "Hold Drawn Shape",
                "The strands keep the drawn shape under the start frame's gravity: their shape "
                "without gravity is found by inverse dynamics (zero-gravity rest shape)",
            ),
        ],
        default="DRAWN",
        options=STATIC,
        update=_parameters_changed,
    )
    time_scale: FloatProperty(
        name="Time Scale",
        description=(
            "How much of the roots' motion the strands feel: 0 carries them along rigidly, 1 is "
            "physical, above 1 exaggerates (where the roots are does not change)"
        ),
        default=1.0,
        min=0.0,
        soft_max=2.0,
        update=_parameters_changed,
    )
    local_dynamics: FloatProperty(
        name="Local Dynamics",
        description=(
            "How much of the Reference's motion is taken out of what the strands feel: with a "
            "character's hip as Reference, 1 ignores the run and keeps the head's motion on the "
            "body"
        ),
        default=0.0,
        min=0.0,
        soft_max=1.0,
        subtype="FACTOR",
        update=_parameters_changed,
    )
    reference_object: PointerProperty(
        name="Reference",
        description="Object whose motion Local Dynamics takes out (e.g. the character's rig)",
        type=bpy.types.Object,
        options=STATIC,
        update=_reference_changed,
    )
    reference_bone: StringProperty(
        name="Bone",
        description="Bone of the Reference armature whose motion is taken out (e.g. the hip)",
        default="",
        options=STATIC,
        update=_reference_changed,
    )

    pose_object: PointerProperty(
        name="Pose",
        description=(
            "Curve or Curves object with one curve per strand, shaped (and animated) into the "
            "pose the strands are pulled towards; it may deform with shape keys, hooks or bones"
        ),
        type=bpy.types.Object,
        poll=_is_pose_candidate,
        options=STATIC,
        update=_pose_object_changed,
    )
    pose_strength: FloatProperty(
        name="Pose Strength",
        description=(
            "How strongly each joint is pulled towards the pose, as a multiple of the strand's "
            "bending rigidity (0: not at all; 100: the pose wins clearly over gravity)"
        ),
        default=0.0,
        min=0.0,
        soft_max=1000.0,
        update=_parameters_changed,
    )
    pose_damping_time: FloatProperty(
        name="Pose Damping",
        description=(
            "Damping of the motion relative to the pose as a relaxation time: damping is this "
            "times the pose strength"
        ),
        default=0.01,
        min=0.0,
        soft_max=0.5,
        subtype="TIME_ABSOLUTE",
        unit="TIME_ABSOLUTE",
        precision=4,
        update=_parameters_changed,
    )
    pose_tip: FloatProperty(
        name="Tip",
        description="Pose strength at the tip relative to the root",
        default=1.0,
        min=0.0,
        soft_max=4.0,
        update=_parameters_changed,
    )
    pose_shape: FloatProperty(
        name="Shape",
        description="How the pose strength goes from root to tip: 1 linear",
        default=1.0,
        min=0.05,
        soft_max=8.0,
        update=_parameters_changed,
    )
    pin_object: PointerProperty(
        name="Pin Object",
        description=(
            "Object the tip of every strand follows as if parented to it, keeping the offset it "
            "has from the object at the start frame (empty: the tips are free)"
        ),
        type=bpy.types.Object,
        poll=_is_pin_candidate,
        options=STATIC,
        update=_pin_object_changed,
    )

    # --- solver ------------------------------------------------------------------------------
    solver_method: EnumProperty(
        name="Method",
        description="How the solver integrates the strands' motion over each substep",
        items=[
            (
                "IMPLICIT",
                "Implicit",
                "Implicit steps solved by Newton iterations: stable for stiff strands at any step",
            ),
            (
                "EXPLICIT",
                "Explicit",
                "Semi-implicit Euler: cheap per step but needs many substeps for stiff strands",
            ),
        ],
        default="IMPLICIT",
        options=STATIC,
        update=_parameters_changed,
    )
    solver_order: EnumProperty(
        name="Order",
        description="The implicit method's order of accuracy",
        items=[
            (
                "BDF2",
                "Second (BDF2)",
                "Keeps slow swinging alive and the motion nearly the same at any substep count; "
                "a strand takes a first-order step after contacts, impacts and the first frame",
            ),
            (
                "BACKWARD_EULER",
                "First (Backward Euler)",
                "The most damped and robust: slow swinging dies out faster than it should, and "
                "the motion changes with the substep count",
            ),
        ],
        default="BDF2",
        options=STATIC,
        update=_parameters_changed,
    )
    substep_unit: EnumProperty(
        name="Steps",
        description=(
            "Whether the simulation's step is set per frame, per second of animation, or by "
            "the error each step may make"
        ),
        items=[
            (
                "SECOND",
                "Per Second",
                "Steps per second of animation: the same motion at any frame rate (each frame "
                "takes the whole number of steps nearest above its share)",
            ),
            (
                "FRAME",
                "Per Frame",
                "Substeps per frame: the step, and with it the motion, changes with the frame rate",
            ),
            (
                "ERROR",
                "By Error",
                "As many steps per frame as keep each step's error under Error Tolerance: few "
                "where the strands move calmly, more where they whip (implicit method)",
            ),
        ],
        # New systems step per second (add_strand_systems); files made before this setting
        # existed keep their substeps per frame.
        default="FRAME",
        options=STATIC,
        update=_parameters_changed,
    )
    steps_per_second: IntProperty(
        name="Steps per Second",
        description=(
            "Simulation steps per second of animation (96: 4 per frame at 24 fps, 2 at 60 "
            "fps): more are more accurate and cost proportionally more time"
        ),
        default=96,
        min=1,
        soft_max=2000,
        max=1000000,
        options=STATIC,
        update=_parameters_changed,
    )
    error_tolerance: FloatProperty(
        name="Error Tolerance",
        description=(
            "Steps By Error: the most any point may stray from the exact motion in one step. "
            "Ten times smaller takes about twice the steps and brings the motion about four "
            "times closer to the exact one"
        ),
        default=1e-4,
        min=1e-9,
        soft_min=1e-6,
        soft_max=1e-2,
        precision=6,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
        update=_parameters_changed,
    )
    substeps: IntProperty(
        name="Substeps",
        description=(
            "Simulation steps per frame: more are more accurate and cost proportionally more "
            "time; raise them where strands are held rigid or obstacles move fast"
        ),
        default=4,
        min=1,
        soft_max=64,
        max=10000,
        options=STATIC,
        update=_parameters_changed,
    )
    newton_tolerance: FloatProperty(
        name="Tolerance",
        description=(
            "Newton iterations stop once the largest joint-velocity update is below this, rad/s"
        ),
        default=3e-3,
        min=1e-12,
        soft_max=0.1,
        precision=6,
        options=STATIC,
        update=_parameters_changed,
    )
    newton_max_iterations: IntProperty(
        name="Max Iterations",
        description="Most Newton iterations per substep",
        default=16,
        min=1,
        soft_max=50,
        options=STATIC,
        update=_parameters_changed,
    )
    stop_on_failure: BoolProperty(
        name="Stop on Failure",
        description=(
            "Stop with an error when a strand's step cannot be solved even halved five times, "
            "instead of freezing that strand's motion relative to its root for the step (the "
            "status and the bake's summary list the strands frozen; more Substeps avoid it)"
        ),
        default=False,
        options=STATIC,
        update=_parameters_changed,
    )
    worker_processes: IntProperty(
        name="Processes",
        description=(
            "Processes that step groups of whole strands side by side (NumPy backend); 0 picks "
            "one per core, at most 8, for systems of 500 strands or more per two cores"
        ),
        default=0,
        min=0,
        soft_max=16,
        max=256,
        options=STATIC,
        update=_parameters_changed,
    )
    backend: EnumProperty(
        name="Backend",
        description="Where the simulation runs",
        items=_backend_items,
        options=STATIC,
        update=_parameters_changed,
    )
    precision: EnumProperty(
        name="Precision",
        description="Floating-point precision of the simulation",
        items=[
            ("float64", "Double", "64-bit floats: the reference"),
            ("float32", "Single", "32-bit floats: faster on GPUs, less accurate"),
        ],
        default="float64",
        options=STATIC,
        update=_parameters_changed,
    )

    # --- cache -------------------------------------------------------------------------------
    frame_start: IntProperty(
        name="Start",
        description=(
            "Frame the simulation starts at; the curves' shape at this frame is the rest shape"
        ),
        default=1,
        options=STATIC,
        update=_input_changed,
    )
    frame_end: IntProperty(
        name="End",
        description="Frame the simulation stops at; later frames hold this frame's result",
        default=250,
        options=STATIC,
        update=_input_changed,
    )


class StrandObstacleProperties(bpy.types.PropertyGroup):
    """Contact material of an obstacle the strands will collide with."""

    use_obstacle: BoolProperty(
        name="Strand Obstacle",
        description="Strand systems with Collisions on collide with this object",
        default=False,
        options=STATIC,
    )
    shape: EnumProperty(
        name="Shape",
        description=(
            "The shape strands collide with: a Mesh follows its deformation, the others are "
            "read from the mesh at the start frame"
        ),
        items=[
            (
                "MESH",
                "Mesh",
                "The mesh itself, following its deformation (an open mesh needs a Thickness)",
            ),
            ("SPHERE", "Sphere", "The smallest ball about the origin holding every vertex"),
            (
                "CAPSULE",
                "Capsule",
                "A capsule along local Z around the mesh (necks, limbs, branches)",
            ),
            ("PLANE", "Plane", "The local XY plane, solid below (floors, ground)"),
        ],
        default="MESH",
        options=STATIC,
    )
    cell_size: FloatProperty(
        name="Cell Size",
        description=(
            "Spacing of the mesh's signed-distance grid, or of the lookup grid of a deforming or "
            "open mesh: smaller follows finer detail and costs memory (0: a 48th of the mesh's "
            "largest dimension)"
        ),
        default=0.0,
        min=0.0,
        soft_max=0.1,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
    )
    thickness: FloatProperty(
        name="Thickness",
        description=(
            "Thickness added around the mesh, on both sides of an open one: a collar, a hat's "
            "brim or a single-sided plane needs one"
        ),
        default=0.0,
        min=0.0,
        soft_max=0.05,
        subtype="DISTANCE",
        unit="LENGTH",
        options=STATIC,
    )
    restitution: FloatProperty(
        name="Restitution",
        description="Fraction of the normal speed kept after an impact (0: no bounce)",
        default=0.0,
        min=0.0,
        max=1.0,
        subtype="FACTOR",
    )
    static_friction: FloatProperty(
        name="Static Friction",
        description="Friction coefficient that holds a resting strand in place",
        default=0.5,
        min=0.0,
        soft_max=2.0,
    )
    dynamic_friction: FloatProperty(
        name="Dynamic Friction",
        description="Friction coefficient while a strand slides",
        default=0.4,
        min=0.0,
        soft_max=2.0,
    )


class StrandBakeProperties(bpy.types.PropertyGroup):
    """What a bake generated: set on the objects a bake creates, read by Free Bake and export."""

    source: PointerProperty(
        name="Baked From",
        description="The strand system this object was baked from",
        type=bpy.types.Object,
        options=STATIC,
    )
    target: EnumProperty(
        name="Bake Target",
        description="What this object holds",
        items=[("NONE", "None", "Not a baked object"), *scene.BAKE_TARGET_ITEMS],
        default="NONE",
        options=STATIC,
    )
    frame_start: IntProperty(name="First Baked Frame", options=STATIC)
    frame_end: IntProperty(name="Last Baked Frame", options=STATIC)
    cache_file: StringProperty(
        name="Cache File",
        description="Positions of every baked frame (hair curves), relative to the .blend",
        options=STATIC,
    )


classes = (StrandSystemProperties, StrandObstacleProperties, StrandBakeProperties)
