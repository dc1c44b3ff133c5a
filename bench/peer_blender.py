"""Worker: Blender's legacy particle hair dynamics (the cloth solver) on one case, through bpy.

Run as ``python -m bench.peer_blender --strands B --links n`` from the repository root, in an
interpreter with ``bpy``. Blender's configuration goes to ``BLENDER_USER_RESOURCES`` (a fresh
temporary folder unless the caller set one), never to the user's home.

The scene is Blender's factory scene with one UV sphere (the head) carrying a hair particle system
of ``strands`` hairs with ``links + 1`` keys each (``hair_step = links``), hair dynamics on at
quality 5 (steps per frame), and the head animated by the workload's shake and nod (one keyframe a
frame). Seconds per frame are those of ``scene.frame_set`` stepping forward one frame, which is
what an artist scrubbing or a bake pays: the head's animation, the hair solver and the hair
paths. Hair roots are Blender's own random distribution over the sphere, not the engine's
lattice; the cost does not depend on where the roots are.

Parameters, as close as Blender allows: mass per key and hair length are the workload's. The
bending stiffness follows from Blender's hair bending spring, ``kb = bending / (20 l)``, a linear
spring on a key's offset from its rest direction (``SIM_mass_spring.cc``), equated to the joint
spring ``EI / l`` seen at the next key, ``EI / l³``, in Blender's units of time (the solver's
time unit is the frame), which gives ``bending = 20 EI / (l² fps²)``. Blender's gravity is
9.81e-3 m per frame², about 0.6 of the true value at 24 fps, and its hair stretches (structural
springs at Blender's default stiffness) where the engine's strands are inextensible: the physics
is near, not equal. Air damping is off, as the engine's drag is.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .worker import FramePolicy, emit, frame_budget, parse_case, time_frames, warm_up
from .workload import FRAME_RATE, Workload, head_angles

# Blender's hair solver steps per frame (its "quality"); the value the project's notes measured.
QUALITY = 5
# Hairs whose keys are read to check that the solver ran.
SAMPLED_HAIRS = 50
# Some key must move at least this far (m) relative to the head, or the solver did not run.
MIN_KEY_MOTION = 1e-4
# Resolution of the head sphere: fine enough that hair roots are spread like the engine's.
SPHERE_SEGMENTS = 64
SPHERE_RINGS = 32


def blender_bending_stiffness(workload: Workload) -> float:
    """Blender's ``bending_stiffness`` nearest to the workload's bending rigidity (see module)."""
    segment = workload.segment_length
    return 20.0 * workload.bend_rigidity / (segment * segment * FRAME_RATE * FRAME_RATE)


def build_scene(bpy: Any, workload: Workload, frames: int) -> tuple[Any, Any]:
    """A factory scene with the animated head and its dynamic hair; returns (scene, head)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = int(FRAME_RATE)
    scene.frame_start = 1
    scene.frame_end = frames
    bpy.ops.mesh.primitive_uv_sphere_add(
        radius=workload.head_radius, segments=SPHERE_SEGMENTS, ring_count=SPHERE_RINGS
    )
    head = bpy.context.object
    hair = head.modifiers.new("hair", "PARTICLE_SYSTEM").particle_system
    settings = hair.settings
    settings.type = "HAIR"
    settings.count = workload.strands
    settings.hair_length = workload.length
    settings.hair_step = workload.links
    settings.emit_from = "FACE"
    settings.child_type = "NONE"
    hair.use_hair_dynamics = True
    cloth = hair.cloth.settings
    cloth.quality = QUALITY
    cloth.mass = workload.link_mass
    cloth.bending_stiffness = blender_bending_stiffness(workload)
    cloth.air_damping = 0.0
    hair.point_cache.frame_start = 1
    hair.point_cache.frame_end = frames
    head.rotation_mode = "XYZ"
    for frame in range(1, frames + 1):
        (shake, nod), _, _ = head_angles((frame - 1) / FRAME_RATE)
        head.rotation_euler = (nod, 0.0, shake)
        head.keyframe_insert("rotation_euler", frame=frame)
    return scene, head


def sampled_keys(bpy: Any, head: Any) -> np.ndarray:
    """(hairs, keys, 3) evaluated hair path points of the sampled hairs, in the head's frame."""
    evaluated = head.evaluated_get(bpy.context.evaluated_depsgraph_get())
    hair = evaluated.particle_systems[0]
    # The evaluated path has 2**display_step segments per hair, whatever hair_step is.
    steps = 2**hair.settings.display_step + 1
    count = min(SAMPLED_HAIRS, len(hair.particles))
    to_head = np.array(evaluated.matrix_world.inverted())
    world = np.array(
        [
            [hair.co_hair(evaluated, particle_no=i, step=k) for k in range(steps)]
            for i in range(count)
        ]
    )
    return world @ to_head[:3, :3].T + to_head[:3, 3]


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (Linux reports kibibytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_case(workload: Workload, policy: FramePolicy) -> None:
    """Build the scene, warm up and time Blender's hair dynamics on ``workload``; print it."""
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="bench-blender-"))
    import bpy

    rss_before = peak_rss_bytes()
    start = time.perf_counter()
    # Frame 1 is the rest state; each later frame is one step of the solver.
    scene, head = build_scene(bpy, workload, 1 + frame_budget(policy))
    scene.frame_set(1)
    setup_seconds = time.perf_counter() - start
    rest = sampled_keys(bpy, head)
    evaluated = head.evaluated_get(bpy.context.evaluated_depsgraph_get())
    keys_per_hair = len(evaluated.particle_systems[0].particles[0].hair_keys)

    def advance_frame(frame: int) -> None:
        scene.frame_set(frame + 2)

    first_timed_frame = warm_up(advance_frame, policy)
    times = time_frames(advance_frame, policy, first_timed_frame)
    motion = np.linalg.norm(sampled_keys(bpy, head) - rest, axis=2).max()
    if not np.isfinite(motion) or motion < MIN_KEY_MOTION:
        raise SystemExit(f"Blender's hair did not move relative to the head ({motion:.2e} m)")
    emit(
        "blender",
        workload,
        times,
        setup_seconds=setup_seconds,
        peak_rss_growth_bytes=peak_rss_bytes() - rss_before,
        max_key_motion=float(motion),
        keys_per_hair=keys_per_hair,
        quality=QUALITY,
        bending_stiffness=blender_bending_stiffness(workload),
        vertex_mass=workload.link_mass,
        blender=bpy.app.version_string,
        threads=scene.render.threads,
        python=sys.version.split()[0],
    )


def main(argv: Sequence[str] | None = None) -> None:
    run_case(*parse_case(argv, "Time Blender's legacy hair dynamics on one case."))


if __name__ == "__main__":
    main()
