"""The strands and head motion that every peer simulates, so that timings compare like with like.

A *workload* is ``strands`` straight strands of ``links`` equal segments, rooted on a spherical
head and pointing along its normals, driven by the head nodding and shaking. The total strand
length stays fixed when ``links`` changes, so a finer discretisation is the same physical strand,
and cost versus ``links`` measures the solver, not a longer strand.

The physical parameters are those of a guide strand standing for a clump of hair (heavier and
stiffer than a single fibre); under gravity it droops to about 40 % of its length, so every
solver has real motion to resolve. Only plain NumPy is used here: every peer's worker imports this
module, each in its own interpreter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

FRAME_RATE = 24.0
SUBSTEPS_PER_FRAME = 4

# Head motion: a shake (yaw about world z) and a slower nod (about the head's x axis), smooth and
# periodic, so the roots keep accelerating for the whole run.
SHAKE_AMPLITUDE = 0.6  # rad
SHAKE_FREQUENCY = 1.0  # Hz
NOD_AMPLITUDE = 0.3  # rad
NOD_FREQUENCY = 0.5  # Hz


@dataclass(frozen=True)
class Workload:
    """``strands`` strands of ``links`` links each, and their physical parameters (SI units).

    Attributes
    ----------
    strands, links : int
    length : m, root to tip (independent of ``links``)
    head_radius : m; roots lie on this sphere about the head's origin
    mass_per_length : kg/m
    radius : m, of the round cross-section
    bend_rigidity, twist_rigidity : N·m² (EI and GJ)
    bend_damping, twist_damping : N·m²·s, internal damping per unit length
    """

    strands: int
    links: int
    length: float = 0.25
    head_radius: float = 0.1
    mass_per_length: float = 0.01
    radius: float = 0.001
    bend_rigidity: float = 2e-4
    twist_rigidity: float = 2e-4
    bend_damping: float = 2e-6
    twist_damping: float = 2e-6

    @property
    def segment_length(self) -> float:
        """Length of one link, m."""
        return self.length / self.links

    @property
    def link_mass(self) -> float:
        """Mass of one link, kg."""
        return self.mass_per_length * self.segment_length

    def root_directions(self) -> np.ndarray:
        """(strands, 3) unit outward normals at the roots: a Fibonacci lattice on the sphere.

        The lattice spreads any number of roots evenly over the whole head, deterministically.
        """
        index = np.arange(self.strands) + 0.5
        z = 1.0 - 2.0 * index / self.strands
        ring = np.sqrt(1.0 - z * z)
        azimuth = math.pi * (3.0 - math.sqrt(5.0)) * index
        return np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)

    def strand_parameters(self, core: Any, **extra: Any) -> Any:
        """The engine's ``StrandParameters`` of these strands (``core`` is the engine package),
        with ``extra`` fields added."""
        return core.StrandParameters(
            mass_per_length=self.mass_per_length,
            radius=self.radius,
            bend_stiffness=self.bend_rigidity,
            twist_stiffness=self.twist_rigidity,
            bend_damping=self.bend_damping,
            twist_damping=self.twist_damping,
            **extra,
        )

    def rest_points(self) -> np.ndarray:
        """(strands, links + 1, 3) rest points in the head frame, m; point 0 is the root."""
        along = self.head_radius + np.linspace(0.0, self.length, self.links + 1)
        return along[None, :, None] * self.root_directions()[:, None, :]

    def joint_lengths(self) -> np.ndarray:
        """(links,) length of rod each joint stands for, m, root first.

        The same rule as the engine's model (the Voronoi length: half a segment at the root, a
        whole one between two equal segments), so that peers given per-joint stiffness
        ``rigidity / joint_length`` get exactly the engine's joint springs.
        """
        lengths = np.full(self.links, self.segment_length)
        lengths[0] *= 0.5
        return lengths


def head_angles(time: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shake ``ψ`` and nod ``θ`` with their first and second time derivatives.

    Returns three (2,) arrays: angles ``(ψ, θ)`` in rad, rates in rad/s, accelerations in rad/s².
    """
    omega = 2.0 * math.pi * np.array([SHAKE_FREQUENCY, NOD_FREQUENCY])
    amplitude = np.array([SHAKE_AMPLITUDE, NOD_AMPLITUDE])
    phase = omega * time
    return (
        amplitude * np.sin(phase),
        amplitude * omega * np.cos(phase),
        -amplitude * omega * omega * np.sin(phase),
    )


def head_rotation(time: float) -> np.ndarray:
    """(3, 3) world rotation of the head, ``Rz(ψ) Rx(θ)``.

    This is Blender's XYZ Euler rotation ``(θ, 0, ψ)``, so Blender's keyframes need no conversion.
    """
    (shake, nod), _, _ = head_angles(time)
    cos_s, sin_s, cos_n, sin_n = math.cos(shake), math.sin(shake), math.cos(nod), math.sin(nod)
    yaw = np.array([[cos_s, -sin_s, 0.0], [sin_s, cos_s, 0.0], [0.0, 0.0, 1.0]])
    pitch = np.array([[1.0, 0.0, 0.0], [0.0, cos_n, -sin_n], [0.0, sin_n, cos_n]])
    return yaw @ pitch


def head_quaternion(time: float) -> np.ndarray:
    """(4,) the head rotation as a unit quaternion ``(w, x, y, z)`` (MuJoCo's order)."""
    (shake, nod), _, _ = head_angles(time)
    yaw = np.array([math.cos(shake / 2), 0.0, 0.0, math.sin(shake / 2)])
    pitch = np.array([math.cos(nod / 2), math.sin(nod / 2), 0.0, 0.0])
    w1, x1, y1, z1 = yaw
    w2, x2, y2, z2 = pitch
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def head_angular_motion(time: float) -> tuple[np.ndarray, np.ndarray]:
    """World angular velocity (3,) in rad/s and angular acceleration (3,) in rad/s² of the head.

    With ``R = Rz(ψ) Rx(θ)``: ``ω = ψ̇ z + θ̇ n`` where ``n = Rz(ψ) x`` is the nod axis, and since
    ``ṅ = ψ̇ z × n``, ``α = ψ̈ z + θ̈ n + θ̇ ψ̇ (z × n)``: the exact derivatives, as the engine's
    reduced coordinates need (a finite difference would kick the strands once per frame).
    """
    (shake, _), (shake_rate, nod_rate), (shake_acc, nod_acc) = head_angles(time)
    z_axis = np.array([0.0, 0.0, 1.0])
    nod_axis = np.array([math.cos(shake), math.sin(shake), 0.0])
    velocity = shake_rate * z_axis + nod_rate * nod_axis
    acceleration = shake_acc * z_axis + nod_acc * nod_axis
    acceleration += nod_rate * shake_rate * np.cross(z_axis, nod_axis)
    return velocity, acceleration
