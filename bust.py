"""The figure the demo and the gallery's people share: a sculpted head (nose, eyes, brows,
lips, chin carved into a ball) and a neck, shoulders and chest lofted through cross-sections.

The torso is built for a head centred at :data:`HEAD_CENTRE`; a scene whose head stands
elsewhere places the torso's object by the difference. Hair grows on, and collides with, a ball
of :data:`HEAD_RADIUS` about the head's centre (the scalp), just outside the sculpted skull.
"""

from __future__ import annotations

import math

import numpy as np

from . import staging

HEAD_CENTRE = np.array([0.0, 0.0, 1.62])
HEAD_RADIUS = 0.1

# The bust's cross-sections, from the cut below the chest to the top of the neck (inside the
# head): height (m), half-width across x, half-depth along y, the section's centre on y, and its
# squareness (2: an ellipse; more: a rounded rectangle). A smooth spline runs through them.
SECTIONS = np.array(
    [
        (1.100, 0.172, 0.090, -0.006, 2.6),
        (1.160, 0.188, 0.100, -0.010, 2.6),
        (1.230, 0.200, 0.106, -0.008, 2.6),
        (1.300, 0.210, 0.102, -0.004, 2.7),
        (1.350, 0.212, 0.094, 0.000, 2.6),
        (1.385, 0.198, 0.084, 0.004, 2.5),
        (1.405, 0.170, 0.074, 0.006, 2.4),
        (1.420, 0.125, 0.066, 0.008, 2.3),
        (1.432, 0.090, 0.060, 0.010, 2.2),
        (1.450, 0.070, 0.058, 0.012, 2.0),
        (1.500, 0.062, 0.055, 0.012, 2.0),
        (1.570, 0.058, 0.052, 0.010, 2.0),
    ]
)

# The face, carved into the front of the head: (x, z) about the head's centre (m), the spread
# across and up (m), and how far it stands out of the face (m; hollows are negative).
FEATURES = [
    ((0.0, -0.048), (0.009, 0.022), 0.020),  # the nose's bridge
    ((0.0, -0.062), (0.009, 0.008), 0.008),  # its tip
    ((0.013, -0.064), (0.007, 0.006), 0.005),  # its wings
    ((-0.013, -0.064), (0.007, 0.006), 0.005),
    ((0.032, -0.022), (0.016, 0.011), -0.011),  # eye sockets
    ((-0.032, -0.022), (0.016, 0.011), -0.011),
    ((0.032, -0.022), (0.009, 0.007), 0.007),  # eyes
    ((-0.032, -0.022), (0.009, 0.007), 0.007),
    ((0.030, -0.004), (0.022, 0.007), 0.005),  # brows
    ((-0.030, -0.004), (0.022, 0.007), 0.005),
    ((0.046, -0.042), (0.020, 0.020), 0.006),  # cheekbones
    ((-0.046, -0.042), (0.020, 0.020), 0.006),
    ((0.0, -0.078), (0.017, 0.006), 0.006),  # lips
    ((0.0, -0.091), (0.014, 0.007), 0.006),
    ((0.0, -0.0845), (0.022, 0.0025), -0.003),  # where they meet
    ((0.0, -0.117), (0.018, 0.013), 0.008),  # chin
]


def smoothstep(edge0: float, edge1: float, x: np.ndarray) -> np.ndarray:
    t = np.clip((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def catmull_rom(keys: np.ndarray, per_span: int) -> np.ndarray:
    """Points (m, d) of the Catmull–Rom spline through ``keys`` (k, d), ``per_span`` per span."""
    padded = np.vstack((2.0 * keys[0] - keys[1], keys, 2.0 * keys[-1] - keys[-2]))
    t = np.linspace(0.0, 1.0, per_span, endpoint=False)[:, None]
    spans = []
    for p0, p1, p2, p3 in zip(padded, padded[1:], padded[2:], padded[3:], strict=False):
        spans.append(
            p1
            + 0.5 * (p2 - p0) * t
            + 0.5 * (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3) * t**2
            + 0.5 * (3.0 * (p1 - p2) + p3 - p0) * t**3
        )
    return np.vstack((*spans[: len(keys) - 1], keys[-1:]))


BUST_SECTIONS = catmull_rom(SECTIONS, 6)


def outside_bust(points: np.ndarray, margin: float) -> np.ndarray:
    """``points`` (n, 3), world, m, moved straight out from the bust's axis where they lie
    within ``margin`` of it."""
    z = points[:, 2]
    height, half_width, half_depth, centre, power = (
        np.interp(z, BUST_SECTIONS[:, 0], column) for column in BUST_SECTIONS.T
    )
    x, y = points[:, 0], points[:, 1] - centre
    size = np.abs(x / (half_width + margin)) ** power + np.abs(y / (half_depth + margin)) ** power
    inside = (size < 1.0) & (z >= BUST_SECTIONS[0, 0]) & (z <= BUST_SECTIONS[-1, 0])
    scale = np.where(inside, np.maximum(size, 1e-9) ** (-1.0 / power), 1.0)
    return np.stack((x * scale, y * scale + centre, z), axis=1)


def torso_mesh(bpy):
    """The bust's chest, shoulders and neck: the cross-sections lofted, 64 points round, closed
    by a flat cut below and a cap inside the head."""
    around = np.linspace(0.0, 2.0 * math.pi, 64, endpoint=False)
    cos, sin = np.cos(around), np.sin(around)
    rings = []
    for height, half_width, half_depth, centre, power in BUST_SECTIONS:
        x = half_width * np.sign(cos) * np.abs(cos) ** (2.0 / power)
        y = centre + half_depth * np.sign(sin) * np.abs(sin) ** (2.0 / power)
        rings.append(np.stack((x, y, np.full_like(x, height)), axis=1))
    count, n = len(rings), len(around)
    bottom, top = count * n, count * n + 1
    vertices = np.vstack(
        (*rings, (0.0, 0.0, BUST_SECTIONS[0, 0]), (0.0, 0.01, BUST_SECTIONS[-1, 0]))
    )
    faces = []
    for ring in range(count - 1):
        for k in range(n):
            a, b = ring * n + k, ring * n + (k + 1) % n
            faces.append((a, b, b + n, a + n))
    for k in range(n):
        faces.append((bottom, (k + 1) % n, k))
        faces.append((top, (count - 1) * n + k, (count - 1) * n + (k + 1) % n))
    mesh = bpy.data.meshes.new("Bust")
    mesh.from_pydata(vertices.tolist(), [], faces)
    mesh.shade_smooth()
    return mesh


def head_mesh(bpy):
    """A sculpted head about its centre: the skull a ball just inside the scalp the hair grows
    on, the lower face drawn down into a jaw and chin and narrowed, the back of the skull
    rounded into the neck, and the face (nose, eyes, brows, cheekbones, lips, chin) carved in
    front (−y)."""
    mesh = staging.sphere_mesh(bpy, "Head", 1.0, rings=96)
    unit = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", unit)
    x, y, z = (0.097 * unit.reshape(-1, 3)).T
    below, front = smoothstep(0.01, -0.1, z), smoothstep(0.03, -0.09, y)
    z = z - 0.035 * below * front
    x = x * (1.0 - 0.22 * below)
    y = np.where(y > 0.0, y * (1.0 - 0.35 * below), y * (1.0 - 0.08 * front))
    for (x0, z0), (spread_x, spread_z), height in FEATURES:
        bump = height * np.exp(-(((x - x0) / spread_x) ** 2) - ((z - z0) / spread_z) ** 2)
        y = y - front * bump
    mesh.vertices.foreach_set("co", np.stack((x, y, z), axis=1).ravel())
    mesh.update()
    return mesh
