"""Worker: MuJoCo ball-joint chains on one case.

Run as ``python -m bench.peer_mujoco --strands B --links n`` from the repository root, in an
interpreter with ``mujoco`` (both development venvs have it).

Each strand is a chain of ``links`` bodies, each a capsule of the workload's segment length,
radius and mass on a ball joint whose stiffness and damping are the engine's joint springs
(``rigidity / joint_length``, isotropic: the workload's bend and twist rigidities are equal).
Integrator ``implicitfast``, time step 1/96 s (4 steps per 24 fps frame), contacts disabled. The
chains hang from a mocap body, the head, whose orientation is set to the workload's head
rotation before every step. A mocap body is kinematic: the strands follow its pose but, unlike
the engine's, do not feel its velocity and acceleration within a step; per-step cost is the same.

Model size. MuJoCo's compiler time grows with the square of the number of bodies (15 to 30 s for
5,000 here, minutes for 25,000), so one model holding every strand cannot be compiled for the larger
cases. The strands are split into blocks of at most ``MAX_LINKS_PER_BLOCK`` links; one model is
compiled per block size and copied for every block, with that block's root poses written into
the copy; every block has its own ``MjData``. Strands never interact (no contacts), so stepping
the blocks one after another does exactly the work of one big model's step.

Threads. MuJoCo's own thread pool (``mju_threadpool``) parallelises islands and collision,
neither of which this workload has: it gave no speed-up here. ``mj_step`` releases Python's GIL,
so the blocks are shared between ``THREADS`` Python threads, each stepping its own blocks; the
result also reports one thread.
"""

from __future__ import annotations

import copy
import math
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import mujoco
import numpy as np

from .worker import FramePolicy, FrameTimes, emit, parse_case, time_frames, warm_up
from .workload import FRAME_RATE, SUBSTEPS_PER_FRAME, Workload, head_quaternion

THREADS = 2
# Largest block of links compiled as one model: compiles in well under a second.
MAX_LINKS_PER_BLOCK = 1024
# Memory arena of each block's MjData, bytes per degree of freedom: without contacts the arena
# only holds the step's scratch stack; MuJoCo's default (sized for contacts) would need gigabytes
# over hundreds of blocks.
ARENA_BYTES_PER_DOF = 4096
MIN_ARENA_BYTES = 1 << 20
# Some joint must turn at least this far (quaternion distance) or MuJoCo did not simulate.
MIN_JOINT_MOTION = 1e-4


@dataclass
class Block:
    """Some strands as one compiled model and its data."""

    model: mujoco.MjModel
    data: mujoco.MjData


def chain_model_xml(
    workload: Workload, strands: int, timestep: float = 1.0 / (FRAME_RATE * SUBSTEPS_PER_FRAME)
) -> str:
    """MJCF of ``strands`` chains under the mocap head, all roots at the head's origin, stepped
    at ``timestep`` (s).

    The roots are placed per block afterwards (:func:`place_roots`), so one compiled model
    serves every block of the same size.
    """
    segment = workload.segment_length
    joint_lengths = workload.joint_lengths()
    stiffness = workload.bend_rigidity / joint_lengths
    damping = workload.bend_damping / joint_lengths
    chain = (
        "".join(
            f'<body pos="0 0 {segment if link else 0.0!r}">'
            f'<joint stiffness="{float(stiffness[link])!r}" damping="{float(damping[link])!r}"/>'
            f'<geom fromto="0 0 0 0 0 {segment!r}"/>'
            for link in range(workload.links)
        )
        + "</body>" * workload.links
    )
    root = f"<body>{chain}</body>"
    degrees_of_freedom = 3 * workload.links * strands
    arena = max(MIN_ARENA_BYTES, ARENA_BYTES_PER_DOF * degrees_of_freedom)
    return f"""<mujoco>
  <size memory="{arena}"/>
  <option timestep="{timestep!r}" integrator="implicitfast">
    <flag contact="disable"/>
  </option>
  <default>
    <joint type="ball"/>
    <geom type="capsule" size="{workload.radius!r}" mass="{workload.link_mass!r}"
          contype="0" conaffinity="0"/>
  </default>
  <worldbody><body name="head" mocap="true">{root * strands}</body></worldbody>
</mujoco>"""


def rotation_from_z(directions: np.ndarray) -> np.ndarray:
    """(k, 4) unit quaternions ``(w, x, y, z)`` turning the z axis onto each unit direction."""
    z_axis = np.array([0.0, 0.0, 1.0])
    axes = np.cross(z_axis, directions)
    # q = (1 + z·d, z × d), normalised: the half-way rotation; for d = -z any axis in the xy
    # plane serves.
    quaternions = np.concatenate((1.0 + directions[:, 2:3], axes), axis=1)
    opposite = quaternions[:, 0] < 1e-12
    quaternions[opposite] = [0.0, 1.0, 0.0, 0.0]
    return quaternions / np.linalg.norm(quaternions, axis=1, keepdims=True)


def place_roots(model: mujoco.MjModel, roots: np.ndarray, directions: np.ndarray) -> None:
    """Put each chain's first body at its root, its z axis along the outward direction."""
    chain_roots = np.flatnonzero(
        model.body_parentid == mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "head")
    )
    model.body_pos[chain_roots] = roots
    model.body_quat[chain_roots] = rotation_from_z(directions)


def build_blocks(
    workload: Workload,
    roots: np.ndarray | None = None,
    directions: np.ndarray | None = None,
    timestep: float = 1.0 / (FRAME_RATE * SUBSTEPS_PER_FRAME),
    threads: int = THREADS,
) -> list[Block]:
    """The workload's strands as blocks of at most ``MAX_LINKS_PER_BLOCK`` links, rooted at
    ``roots`` along ``directions`` ((strands, 3) each; by default on the head along its
    normals), stepped at ``timestep`` (s) and shared among ``threads`` threads."""
    if directions is None:
        directions = workload.root_directions()
    if roots is None:
        roots = workload.head_radius * directions
    per_block = max(1, MAX_LINKS_PER_BLOCK // workload.links)
    # At least one block per thread, so every thread has work.
    per_block = min(per_block, math.ceil(workload.strands / threads))
    templates: dict[int, mujoco.MjModel] = {}
    blocks = []
    for first in range(0, workload.strands, per_block):
        chosen = slice(first, first + per_block)
        size = len(directions[chosen])
        if size not in templates:
            text = chain_model_xml(workload, size, timestep)
            templates[size] = mujoco.MjModel.from_xml_string(text)
        model = copy.deepcopy(templates[size])
        place_roots(model, roots[chosen], directions[chosen])
        data = mujoco.MjData(model)
        blocks.append(Block(model, data))
    return blocks


def step_blocks(blocks: Sequence[Block], first_step: int) -> None:
    """Advance ``blocks`` by one frame: the head's pose at each step's end, then ``mj_step``."""
    step_time = 1.0 / (FRAME_RATE * SUBSTEPS_PER_FRAME)
    for substep in range(1, SUBSTEPS_PER_FRAME + 1):
        head = head_quaternion((first_step + substep) * step_time)
        for block in blocks:
            block.data.mocap_quat[0] = head
            mujoco.mj_step(block.model, block.data)


def time_blocks(blocks: list[Block], threads: int, policy: FramePolicy) -> FrameTimes:
    """Warm up and time ``blocks`` shared between ``threads`` threads."""
    shares = [blocks[thread::threads] for thread in range(threads)]
    with ThreadPoolExecutor(threads) as pool:

        def advance_frame(frame: int) -> None:
            first_step = frame * SUBSTEPS_PER_FRAME
            for done in [pool.submit(step_blocks, share, first_step) for share in shares]:
                done.result()

        first_timed_frame = warm_up(advance_frame, policy)
        return time_frames(advance_frame, policy, first_timed_frame)


def reset(blocks: Sequence[Block]) -> None:
    for block in blocks:
        mujoco.mj_resetData(block.model, block.data)


def joint_motion(blocks: Sequence[Block]) -> float:
    """Largest distance of any joint quaternion from its rest value, over all blocks."""
    return max(float(np.abs(block.data.qpos - block.model.qpos0).max()) for block in blocks)


def run_case(workload: Workload, policy: FramePolicy) -> None:
    """Build, warm up and time MuJoCo chains on ``workload`` with 1 and ``THREADS`` threads."""
    start = time.perf_counter()
    blocks = build_blocks(workload)
    build_seconds = time.perf_counter() - start
    threads = min(THREADS, len(blocks))
    one_thread = time_blocks(blocks, 1, policy)
    reset(blocks)
    times = time_blocks(blocks, threads, policy)
    motion = joint_motion(blocks)
    if not np.isfinite(motion) or motion < MIN_JOINT_MOTION:
        raise SystemExit(f"MuJoCo's chains did not move ({motion:.2e})")
    emit(
        "mujoco",
        workload,
        times,
        threads=threads,
        one_thread_seconds_per_frame=statistics.median(one_thread.seconds),
        build_seconds=build_seconds,
        blocks=len(blocks),
        # What MuJoCo uses, not what it reserved: the arena is sized generously (above) and
        # only its high-water mark is touched.
        memory_bytes=sum(
            block.model.nbuffer + block.data.nbuffer + block.data.maxuse_arena for block in blocks
        ),
        max_joint_motion=motion,
        integrator="implicitfast",
        mujoco=mujoco.__version__,
        numpy=np.__version__,
        python=sys.version.split()[0],
    )


def main(argv: Sequence[str] | None = None) -> None:
    run_case(*parse_case(argv, "Time MuJoCo ball-joint chains on one case."))


if __name__ == "__main__":
    main()
