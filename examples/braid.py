"""A bun and a long braid on a running head (the method paper's §7 braid).

A head bobs and turns sharply from side to side, as a runner's does, and then stops. The bun
and the braid below it are one strand, as in the paper: thick and very stiff for its first
tenth (the bun, which only bounces and twists a little), thin and supple after (the braid,
which swings out and wraps against the back). *Local Dynamics* 0.6 with the body as its
reference (the paper's hip) lets the braid feel only 60 % of the body's bobbing, so that it
swings without flying away. The braid is rendered as a three-strand plait of flat tresses
narrowing down to a tie and a tuft, and the bun as a tress wound round a knot: meshes skinned
to the strand's baked rig. The strand collides with the head and the back.

Run from the repository root in the Blender venv::

    python examples/braid.py --output gallery_output

Its figures: how far the braid's tip and the bun's end moved from their places in the head's
frame while the head ran, the deepest point inside the head or the back, and whether the strand
kept its length.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from oriented_strands import staging
from oriented_strands.strands_io.geometry import arc_lengths, points_at_arc_lengths

HEAD = np.array([0.0, 0.0, 1.6])
HEAD_RADIUS = 0.1
# The back: a capsule round this centre, its axis vertical, this half-length and radius (m).
BACK_CENTRE, BACK_HALF, BACK_RADIUS = np.array([0.0, 0.03, 1.22]), 0.12, 0.12
ROOT = HEAD + np.array([0.0, 0.098, -0.02])  # the back of the head
LENGTH = 0.6
SEGMENTS = 30
BUN_SHARE = 0.1  # of the strand's length
# The plait's half-width where it leaves the bun (m), its share of that at the tie, and the
# length of braid (m) over which each tress crosses over the middle from either side.
BRAID_HALF_WIDTH, BRAID_TAPER, BRAID_PITCH = 0.024, 0.55, 0.11
TUFT_LENGTH, TUFT_LOCKS = 0.055, 11  # m below the tie
COLLISION_RADIUS = 0.018


def _strand() -> np.ndarray:
    """The drawn strand: out of the back of the head and then down its back, clear of it."""
    s = np.linspace(0.0, 1.0, SEGMENTS + 1)[:, None]
    out = np.array([0.0, 1.0, 0.0])
    down = np.array([0.0, 0.35, -1.0]) / math.hypot(0.35, 1.0)
    bend = np.minimum(s / BUN_SHARE, 1.0)
    direction = (1.0 - bend) * out + bend * down
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    steps = LENGTH / SEGMENTS * direction[:-1]
    return ROOT + np.vstack(([0.0, 0.0, 0.0], np.cumsum(steps, axis=0)))


def build(bpy, quick: bool) -> staging.Example:
    scene = bpy.context.scene
    seconds = 3.0 if quick else 6.0
    frame = staging.timeline(bpy, seconds)

    skin = staging.material(bpy, "Skin", (0.75, 0.55, 0.45), 0.45)
    cloth = staging.material(bpy, "Shirt", (0.2, 0.3, 0.45), 0.8)
    hair = _braid_material(bpy)
    ground = staging.material(bpy, "Ground", (0.4, 0.38, 0.34), 0.9)

    head = staging.placed(bpy, staging.sphere_mesh(bpy, "Head", HEAD_RADIUS), HEAD, skin, "SPHERE")
    staging.eyes(bpy, head, (0.04, -0.085, 0.02), 0.012)
    back = staging.placed(bpy, _capsule_mesh(bpy, "Back"), BACK_CENTRE, cloth, "CAPSULE")
    neck_mesh = staging.cylinder_mesh(bpy, "Neck", 0.045, 0.14)
    neck = staging.placed(bpy, neck_mesh, (0.0, 0.01, HEAD[2] - 0.1), skin)
    staging.parent_keeping_place(bpy, neck, back)
    # A runner: the body bobs at each stride and the head turns sharply from side to side and
    # nods, for 60 % of the shot; then both are still.
    strides = 5 if quick else 10
    for k in range(2 * strides + 1):
        at = 0.6 * k / (2 * strides)
        still = k == 2 * strides
        bob = np.array([0.0, 0.0, 0.0 if still else 0.04 * (k % 2)])
        turn = 0.0 if still else math.radians(25.0) * math.sin(math.pi * k / 2.5)
        nod = 0.0 if still else math.radians(8.0) * (k % 2)
        staging.keyed(back, "location", frame(at), tuple(BACK_CENTRE + bob))
        staging.keyed(head, "location", frame(at), tuple(HEAD + bob))
        staging.keyed(head, "rotation_euler", frame(at), (nod, 0.0, turn))
    braid = staging.poly_curve(bpy, "Braid", [_strand()])
    braid.data.materials.append(hair)
    scene.frame_set(1)
    staging.parent_keeping_place(bpy, braid, head)
    parameters = {
        "segment_count": SEGMENTS,
        "radius": 0.02,
        "thickness_tip": 0.45,
        "thickness_shape": 0.15,
        "density": 400.0,
        "youngs_modulus": 0.004,
        "shear_modulus": 0.002,
        "stiffness_tip": 0.03,
        "stiffness_shape": 0.3,
        "bend_damping_time": 0.02,
        "local_dynamics": 0.6,
        "air_drag": 20.0,
        "collision_radius": COLLISION_RADIUS,
    }
    # The body is the local dynamics' reference, as the paper's character's hip.
    staging.add_strand_system(bpy, braid, {**parameters, "reference_object": back})
    parameters["reference_object"] = "Back"
    bun_end = round(BUN_SHARE * SEGMENTS)

    def measure(played: dict, matrices: np.ndarray) -> dict:
        points = played["Braid"]
        local = staging.in_frame(points, matrices)
        away = np.linalg.norm(local - local[0], axis=2)
        running = slice(0, frame(0.6))
        inside_head = HEAD_RADIUS - np.linalg.norm(local, axis=2)
        # The body bobs with the head.
        centre = matrices[:, None, :3, 3] + (BACK_CENTRE - HEAD)
        nearest = centre + np.zeros_like(points)
        nearest[..., 2] += np.clip(points[..., 2] - centre[..., 2], -BACK_HALF, BACK_HALF)
        inside_back = BACK_RADIUS - np.linalg.norm(points - nearest, axis=2)
        lengths = np.linalg.norm(np.diff(points, axis=1), axis=2).sum(axis=1)
        return {
            "tip_swing_while_running_m": float(away[running, -1].max()),
            "bun_end_swing_while_running_m": float(away[running, bun_end].max()),
            "deepest_inside_head_or_back_m": float(
                max(0.0, inside_head[:, 1:].max(), inside_back[:, 1:].max())
            ),
            "length_change_share": float(np.abs(lengths / lengths[0] - 1.0).max()),
            "finite": float(np.isfinite(points).all()),
        }

    def dress(bpy) -> None:
        _tresses(bpy, bpy.data.objects["Braid_rig"], hair)

    return staging.Example(
        title="A bun and a braid: one strand, stiff then supple, on a running head",
        systems=[braid],
        camera=(0.8, 1.95, 1.55),
        target=(0.0, 0.1, 1.36),
        lens=50.0,
        ground=ground,
        stills=(frame(0.25), frame(0.45), scene.frame_end),
        parameters=parameters,
        reference=head,
        measure=measure,
        bake=("BONES",),
        dress=dress,
    )


def _capsule_mesh(bpy, name: str):
    """A capsule mesh along z: a sphere of :data:`BACK_RADIUS` whose halves are moved apart by
    twice :data:`BACK_HALF` (the *Capsule* obstacle fitted to it is the same capsule)."""
    mesh = staging.sphere_mesh(bpy, name, BACK_RADIUS)
    positions = np.empty(3 * len(mesh.vertices))
    mesh.vertices.foreach_get("co", positions)
    positions = positions.reshape(-1, 3)
    positions[:, 2] += np.sign(positions[:, 2]) * BACK_HALF
    mesh.vertices.foreach_set("co", positions.ravel())
    return mesh


def _braid_material(bpy):
    """Brown hair combed along each tress: fine light and dark stripes along the mesh's UV ``u``
    (which runs along the tress), wavy and raised a little, and a highlight stretched along
    them as hair's is."""
    made = staging.material(bpy, "Braid", (0.2, 0.09, 0.035), 0.38)
    nodes, links = made.node_tree.nodes, made.node_tree.links
    shader = nodes["Principled BSDF"]
    coordinates = nodes.new("ShaderNodeTexCoord")
    stripes = nodes.new("ShaderNodeTexWave")
    stripes.wave_type = "BANDS"
    stripes.bands_direction = "Y"
    stripes.inputs["Scale"].default_value = 12.0
    stripes.inputs["Distortion"].default_value = 2.0
    stripes.inputs["Detail"].default_value = 4.0
    links.new(coordinates.outputs["UV"], stripes.inputs["Vector"])
    ramp = nodes.new("ShaderNodeValToRGB")
    for element, position, color in zip(
        ramp.color_ramp.elements,
        (0.1, 0.9),
        ((0.04, 0.016, 0.006), (0.2, 0.09, 0.035)),
        strict=True,
    ):
        element.position = position
        element.color = (*color, 1.0)
    links.new(stripes.outputs["Fac"], ramp.inputs[0])
    links.new(ramp.outputs["Color"], shader.inputs["Base Color"])
    bump = nodes.new("ShaderNodeBump")
    bump.inputs["Strength"].default_value = 0.3
    links.new(stripes.outputs["Fac"], bump.inputs["Height"])
    links.new(bump.outputs["Normal"], shader.inputs["Normal"])
    along = nodes.new("ShaderNodeTangent")
    along.direction_type = "UV_MAP"
    along.uv_map = "UVMap"
    links.new(along.outputs["Tangent"], shader.inputs["Tangent"])
    shader.inputs["Anisotropic"].default_value = 0.85
    shader.inputs["Specular IOR Level"].default_value = 0.5
    return made


class _Skin:
    """A mesh grown as tubes round paths along the rest strand (the rig's bones in their rest
    places), each vertex skinned to the bones of the strand's point it was grown from: the bone
    it lies on, blended linearly into its neighbour across each joint (the weights cross at the
    bones' middles), so that the skin bends smoothly where the strand does."""

    def __init__(self, rig) -> None:
        self.bones = list(rig.data.bones)
        heads = np.array([b.head_local for b in self.bones])
        tails = np.array([b.tail_local for b in self.bones])
        self.points = np.vstack((heads[:1], tails))
        pieces = np.linalg.norm(tails - heads, axis=1)
        self.arc = arc_lengths(self.points)
        self.middles = 0.5 * (self.arc[:-1] + self.arc[1:])
        directions = (tails - heads) / pieces[:, None]
        # At each point, the mean of the directions of the pieces it joins.
        self.tangents = np.vstack(
            (directions[:1], directions[:-1] + directions[1:], directions[-1:])
        )
        self.vertices: list[np.ndarray] = []
        self.faces: list[tuple[int, ...]] = []
        self.face_uvs: list[list[tuple[float, float]]] = []
        self.face_materials: list[int] = []
        self.weights: list[dict[str, float]] = []

    @property
    def length(self) -> float:
        return float(self.arc[-1])

    def along(self, distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rest strand's points (n, 3) at ``distances`` (n,) along it, and its unit
        directions there."""
        at = points_at_arc_lengths(self.points, distances)
        direction = np.column_stack(
            [np.interp(distances, self.arc, self.tangents[:, i]) for i in range(3)]
        )
        return at, direction / np.linalg.norm(direction, axis=1, keepdims=True)

    def lying_flat(self, tangents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unit directions (n, 3) square to ``tangents`` (n, 3): across the back (x) and out of
        it, the braid's width and depth as it lies against the back."""
        across = np.array([1.0, 0.0, 0.0]) - tangents[:, :1] * tangents
        across /= np.linalg.norm(across, axis=1, keepdims=True)
        return across, np.cross(tangents, across)

    def owners(self, distance: float) -> dict[str, float]:
        """The bones (name to weight) a point at ``distance`` along the rest strand follows."""
        upper = int(np.clip(np.searchsorted(self.middles, distance), 1, len(self.bones) - 1))
        lower = upper - 1
        share = (distance - self.middles[lower]) / (self.middles[upper] - self.middles[lower])
        share = round(float(np.clip(share, 0.0, 1.0)), 2)
        weights = {self.bones[lower].name: 1.0 - share, self.bones[upper].name: share}
        return {name: weight for name, weight in weights.items() if weight > 0.0}

    def tube(
        self,
        path: np.ndarray,
        distances: np.ndarray,
        wide: np.ndarray,
        half_widths: np.ndarray,
        half_depths: np.ndarray,
        material: int = 0,
        ring: int = 12,
    ) -> None:
        """An elliptic tube along ``path`` (n, 3), grown from the strand's points at
        ``distances`` (n,): ``half_widths`` (n,) along the directions ``wide`` (n, 3) (made
        square to the path) and ``half_depths`` (n,) square to both. Its UV ``u`` runs along
        the tube (20 per metre), ``v`` round it."""
        heading = np.gradient(path, axis=0)
        heading /= np.linalg.norm(heading, axis=1, keepdims=True)
        wide = wide - (wide * heading).sum(axis=1, keepdims=True) * heading
        wide /= np.linalg.norm(wide, axis=1, keepdims=True)
        deep = np.cross(heading, wide)
        run = 20.0 * arc_lengths(path)
        angles = 2.0 * np.pi * np.arange(ring) / ring
        for row, (centre, distance) in enumerate(zip(path, distances, strict=True)):
            first = len(self.vertices)
            owners = self.owners(distance)
            for angle in angles:
                self.vertices.append(
                    centre
                    + half_widths[row] * math.cos(angle) * wide[row]
                    + half_depths[row] * math.sin(angle) * deep[row]
                )
                self.weights.append(owners)
            if row:
                for k in range(ring):
                    below, above = first - ring, first
                    self.faces.append(
                        (below + k, below + (k + 1) % ring, above + (k + 1) % ring, above + k)
                    )
                    # The last column of faces closes the ring: its far side is at v = 1, not 0.
                    self.face_uvs.append(
                        [
                            (run[row - 1], k / ring),
                            (run[row - 1], (k + 1) / ring),
                            (run[row], (k + 1) / ring),
                            (run[row], k / ring),
                        ]
                    )
                    self.face_materials.append(material)

    def mesh(self, bpy, name: str, materials: list):
        """The tubes grown so far as a smooth mesh of ``name`` with ``materials`` and a UV map
        (``UVMap``)."""
        mesh = bpy.data.meshes.new(name)
        mesh.from_pydata(np.array(self.vertices).tolist(), [], self.faces)
        for material in materials:
            mesh.materials.append(material)
        mesh.polygons.foreach_set("material_index", self.face_materials)
        layer = mesh.uv_layers.new(name="UVMap")
        layer.data.foreach_set("uv", np.array(self.face_uvs).ravel())
        mesh.shade_smooth()
        return mesh


def _tresses(bpy, rig, hair) -> None:
    """The bun, a tress wound round a knot on the strand's first tenth; below it a three-strand
    plait of fat, flat tresses, each crossing over the middle in turn, narrowing down to a tie;
    below the tie a tuft of loose locks. Skinned to the strand's bones."""
    skin = _Skin(rig)
    total = skin.length
    bun = BUN_SHARE * total
    tie = total - TUFT_LENGTH

    # The plait: from inside the bun down to the tie.
    distances = np.linspace(0.6 * bun, tie + 0.003, 70 * round(total / BRAID_PITCH))
    centres, tangents = skin.along(distances)
    across, facing = skin.lying_flat(tangents)
    down = (distances - distances[0]) / (tie - distances[0])
    half = BRAID_HALF_WIDTH * (1.0 - (1.0 - BRAID_TAPER) * np.clip(down, 0.0, 1.0))
    # Gathered into the tie over the last few centimetres.
    closing = np.clip((distances - (tie - 0.04)) / 0.04, 0.0, 1.0)
    gather = 1.0 - 0.7 * closing**2 * (3.0 - 2.0 * closing)
    # As many crossings per length of braid wherever it is: the pitch narrows with the braid.
    turns = 2.0 * np.pi * BRAID_HALF_WIDTH / (BRAID_PITCH * half)
    phase = np.concatenate(([0.0], np.cumsum(0.5 * (turns[1:] + turns[:-1]) * np.diff(distances))))
    for tress in range(3):
        # The classic plait: each tress swings from side to side and is on top on its way
        # into the middle, under on its way out, a third of a cycle after the one before.
        angle = phase + 2.0 * np.pi * tress / 3.0
        sideways = 0.5 * half * gather * np.sin(angle)
        outwards = 0.32 * half * gather * np.sin(2.0 * angle)
        path = centres + sideways[:, None] * across + outwards[:, None] * facing
        width = 0.7 * half * (0.45 + 0.55 * gather)
        skin.tube(path, distances, np.cross(facing, np.gradient(path, axis=0)), width, 0.5 * width)

    # The tie: a band round the gathered tresses, its ends tucked into them.
    band = np.linspace(tie - 0.008, tie + 0.008, 9)
    centres, tangents = skin.along(band)
    across = skin.lying_flat(tangents)[0]
    bulge = np.sin(np.linspace(0.0, np.pi, len(band)))
    radius = 0.7 * BRAID_TAPER * BRAID_HALF_WIDTH * (0.5 + 0.5 * bulge)
    skin.tube(centres, band, across, radius, radius, material=1, ring=16)

    # The tuft: locks from inside the tie, fanning out a little and drawn to points.
    rng = np.random.default_rng(5)
    for lock in range(TUFT_LOCKS):
        reach = TUFT_LENGTH * rng.uniform(0.75, 1.0) + 0.006
        down = np.linspace(0.0, 1.0, 14)
        distances = tie - 0.006 + reach * down
        centres, tangents = skin.along(np.minimum(distances, total))
        across, facing = skin.lying_flat(tangents)
        heading = 2.0 * np.pi * (lock + rng.uniform(-0.3, 0.3)) / TUFT_LOCKS
        # Past the strand's tip, straight on along its last direction.
        centres += np.maximum(distances - total, 0.0)[:, None] * tangents
        spread = (0.003 + 0.011 * np.sin(0.5 * np.pi * down)) * rng.uniform(0.6, 1.0)
        outwards = math.cos(heading) * across + 0.6 * math.sin(heading) * facing
        path = centres + spread[:, None] * outwards
        thickness = 0.0045 * (1.0 - down) ** 0.8 + 0.0003
        skin.tube(path, np.minimum(distances, total), outwards, thickness, 0.7 * thickness, ring=8)

    # The bun: a core round the strand's first tenth, hiding where the plait starts, and a
    # tress wound round it from against the head to its crown.
    knot = np.linspace(0.0, bun * 1.1, 16)
    centres, tangents = skin.along(knot)
    across = skin.lying_flat(tangents)[0]
    core = 0.004 + 0.03 * np.sin(np.pi * knot / knot[-1]) ** 0.5
    skin.tube(centres, knot, across, core, core, ring=16)
    winding = np.linspace(0.0, 1.0, 200)
    heights = bun * (0.08 + 0.9 * winding)
    centres, tangents = skin.along(heights)
    across, facing = skin.lying_flat(tangents)
    turn = 3.5 * 2.0 * np.pi * winding
    circling = np.cos(turn)[:, None] * across + np.sin(turn)[:, None] * facing
    # Thin at its two ends, tucked in.
    thickness = 0.013 * np.minimum(1.0, 0.15 + 6.0 * np.minimum(winding, 1.0 - winding))
    lying = np.interp(heights, knot, core) + 0.5 * thickness
    skin.tube(centres + lying[:, None] * circling, heights, tangents, thickness, 0.7 * thickness)

    tie_material = staging.material(bpy, "Tie", (0.45, 0.04, 0.05), 0.45)
    mesh = skin.mesh(bpy, "Tresses", [hair, tie_material])
    tresses = staging.skinned(bpy, mesh, skin.weights, rig)
    tresses.modifiers.new("Smooth", "SUBSURF").levels = 1


if __name__ == "__main__":
    staging.run_example("braid", build, sys.argv[1:])
