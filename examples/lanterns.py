"""Lanterns on strings: heavy tips and twist (the method paper's Figure 1, the dancers' lanterns).

A dancer holds a staff over her head by its handle; it carries five paper lanterns on strings.
She sways to and fro, bobs and twirls for the first half of the shot, then stops. Each string is
a strand whose last part is hundreds of times heavier than the rest (*Tip Mass*), so it swings
as a pendulum of its length, the short ones quicker than the long; each lantern is a mesh
skinned to the last bone of its string's baked rig, so it swings and turns with the strand's
end, as the paper parents its flowers to the strand's tip frame. Short and long strings
alternate along the staff, so that neighbours hang at different heights, and the staff sways
across its length, so that the lanterns swing side by side: they never touch. A garland of
pennants is strung from a post to the staff's end, its end held there by *Pin Object* (the
paper's point-to-path constraint): it follows the dance, its slack rippling along the line.

Run from the repository root in the Blender venv::

    python examples/lanterns.py --output gallery_output

Its figures: how far the lanterns swung from under their roots (in the staff's frame) while the
staff danced; how much any string stretched; once the staff is still, the longest string's swing
period against the closed form of the rigid pendulum of its mass distribution at the amplitude
it swings with; the smallest distance between any two lanterns' centres over the shot; and how
far the garland's end ever was from the staff's end it is pinned to.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from oriented_strands import staging

STAFF = np.array([0.0, 0.0, 1.55])
STAFF_LENGTH = 1.2
HANDLE = 0.6  # m of staff beyond its right end, where the dancer holds it
DANCER = np.array([1.06, 0.22, 0.0])  # m, where the dancer stands, behind the handle
# m, left to right along the staff: short and long in turn, each neighbour a lantern's height
# and more above or below the next.
STRING_LENGTHS = (0.22, 0.42, 0.2, 0.45, 0.24)
SEGMENTS = 16
MASS_TIP, MASS_SHAPE = 800.0, 40.0
LANTERN_RADIUS, LANTERN_HEIGHT = 0.055, 0.075  # m, half-height
GRAVITY = 9.81
POST = np.array([-1.75, 0.0, 1.8])  # m, the top of the garland's post
GARLAND_SLACK = 0.12
GARLAND_SEGMENTS = 24
PENNANT_WIDTH, PENNANT_DROP = 0.07, 0.09  # m


def _strings() -> list[np.ndarray]:
    """A straight string down from each root along the staff, a few degrees off the vertical
    so that they do not start perfectly at rest."""
    strings = []
    roots = np.linspace(-0.45, 0.45, len(STRING_LENGTHS)) * STAFF_LENGTH
    for index, (x, length) in enumerate(zip(roots, STRING_LENGTHS, strict=True)):
        lean = math.radians(3.0 if index % 2 else -3.0)
        root = STAFF + np.array([x, 0.0, -0.02])
        direction = np.array([math.sin(lean), 0.0, -math.cos(lean)])
        strings.append(root + np.linspace(0.0, length, SEGMENTS + 1)[:, None] * direction)
    return strings


def _staff_end() -> np.ndarray:
    """The staff's left end, where the garland is pinned (at the start, still)."""
    return STAFF - np.array([0.5 * STAFF_LENGTH, 0.0, 0.0])


def _garland() -> np.ndarray:
    """The garland drawn from the post's top to the staff's end: a parabola sagging so that the
    line is :data:`GARLAND_SLACK` longer than the span."""
    span = _staff_end() - POST
    sag = math.sqrt(3.0 / 8.0 * GARLAND_SLACK) * np.linalg.norm(span)
    u = np.linspace(0.0, 1.0, 65)[:, None]
    return POST + u * span - np.array([0.0, 0.0, 4.0 * sag]) * u * (1.0 - u)


def pendulum_period(length: float, amplitude: float) -> float:
    """The period (s) of the rigid pendulum of a string of ``length`` whose links carry the
    mass profile of :data:`MASS_TIP` and :data:`MASS_SHAPE` (the panel's *Tip Mass*: the mass
    per length ``1 + (tip − 1) s^shape`` at each link's centre), swinging to ``amplitude``
    (rad) either side: ``2π √(I / (m g d))`` times ``2 K(sin(amplitude / 2)) / π``, ``K`` the
    complete elliptic integral of the first kind (by the arithmetic-geometric mean)."""
    s = (np.arange(SEGMENTS) + 0.5) / SEGMENTS
    mass = 1.0 + (MASS_TIP - 1.0) * s**MASS_SHAPE
    piece = length / SEGMENTS
    inertia = (mass * ((s * length) ** 2 + piece**2 / 12.0)).sum()
    small = 2.0 * math.pi * math.sqrt(inertia / (GRAVITY * (mass * s * length).sum()))
    a, b = 1.0, math.cos(amplitude / 2.0)
    while abs(a - b) > 1e-15:
        a, b = 0.5 * (a + b), math.sqrt(a * b)
    return small / a


def _swing(offsets: np.ndarray, fps: float) -> tuple[float, float]:
    """The period (s) and amplitude (m) of a swing from its horizontal offsets (frames, 2):
    twice the mean time between crossings of its mean along the direction it swings most, and
    the mean of its largest offsets between them."""
    centred = offsets - offsets.mean(axis=0)
    direction = np.linalg.svd(centred, full_matrices=False)[2][0]
    x = centred @ direction
    changes = np.nonzero(np.sign(x[:-1]) != np.sign(x[1:]))[0]
    if len(changes) < 3:
        return math.nan, math.nan
    crossings = (changes + x[changes] / (x[changes] - x[changes + 1])) / fps
    peaks = [np.abs(x[a : b + 1]).max() for a, b in zip(changes[:-1], changes[1:], strict=True)]
    return 2.0 * float(np.diff(crossings).mean()), float(np.mean(peaks))


def build(bpy, quick: bool) -> staging.Example:
    scene = bpy.context.scene
    seconds = 4.5 if quick else 7.0
    frame = staging.timeline(bpy, seconds)

    wood = staging.material(bpy, "Staff", (0.35, 0.2, 0.08), 0.5)
    cord = staging.material(bpy, "Cord", (0.5, 0.08, 0.05), 0.6)
    ground = staging.material(bpy, "Ground", (0.22, 0.3, 0.16), 0.9)

    staff_mesh = staging.cylinder_mesh(bpy, "Staff", 0.015, STAFF_LENGTH + HANDLE)
    staff = staging.placed(bpy, staff_mesh, STAFF + np.array([0.5 * HANDLE, 0.0, 0.0]), wood)
    staff.rotation_euler = (0.0, math.radians(90.0), 0.0)
    # The dance: sways, bobs and twirls until half-way, then still. Keyed on an empty that the
    # staff and the strings ride, so the strings' roots move with the staff.
    dancer = staging.link(bpy, bpy.data.objects.new("Dancer", None))
    steps = 8 if quick else 14
    for k in range(steps + 1):
        at = 0.5 * k / steps
        still = k == steps
        # Slower than the strings swing, so that they follow the dance rather than resonate;
        # across the staff, so that they swing side by side rather than into each other. The
        # twirl stays small because a pendulum keeps its plane as the staff turns under it.
        sway = 0.0 if still else 0.16 * math.sin(math.pi * k / 4.0)
        bob = 0.0 if still else 0.02 * math.sin(math.pi * k / 3.0) ** 2
        twirl = 0.0 if still else math.radians(20.0) * math.sin(math.pi * k / 5.0)
        staging.keyed(dancer, "location", frame(at), (0.0, sway, bob))
        staging.keyed(dancer, "rotation_euler", frame(at), (0.0, 0.0, twirl))
    scene.frame_set(1)
    strings = staging.poly_curve(bpy, "Strings", _strings())
    strings.data.materials.append(cord)
    for ob in (staff, strings, *_figure(bpy)):
        staging.parent_keeping_place(bpy, ob, dancer)
    parameters = {
        "segment_count": SEGMENTS,
        "radius": 0.0015,
        "mass_tip": MASS_TIP,
        "mass_shape": MASS_SHAPE,
        "youngs_modulus": 0.002,
        "shear_modulus": 0.001,
        "air_drag": 2.0,
        "use_collisions": False,
    }
    staging.add_strand_system(bpy, strings, parameters)
    longest = int(np.argmax(STRING_LENGTHS))

    post_mesh = staging.cylinder_mesh(bpy, "Post", 0.03, POST[2])
    staging.placed(bpy, post_mesh, (POST[0], POST[1], 0.5 * POST[2]), wood)
    # The garland's end rides an empty at the staff's end: Pin Object carries it there.
    pin = staging.link(bpy, bpy.data.objects.new("Staff end", None))
    pin.location = _staff_end()
    staging.parent_keeping_place(bpy, pin, dancer)
    garland = staging.poly_curve(bpy, "Garland", [_garland()])
    garland.data.materials.append(cord)
    garland_parameters = {
        "segment_count": GARLAND_SEGMENTS,
        "radius": 0.0015,
        "youngs_modulus": 0.002,
        "shear_modulus": 0.001,
        "air_drag": 2.0,
        "use_collisions": False,
        "pin_object": pin,
    }
    staging.add_strand_system(bpy, garland, garland_parameters)

    def measure(played: dict, matrices: np.ndarray) -> dict:
        points = staging.in_frame(played["Strings"], matrices)
        chains = points.reshape(len(points), len(STRING_LENGTHS), SEGMENTS + 1, 3)
        roots, tips = chains[:, :, 0], chains[:, :, -1]
        # Each lantern hangs along its string's last link, its centre that far below the tip.
        last = tips - chains[:, :, -2]
        centres = tips + LANTERN_HEIGHT * last / np.linalg.norm(last, axis=2, keepdims=True)
        apart = np.linalg.norm(centres[:, :, None] - centres[:, None], axis=3)
        pairs = np.triu_indices(len(STRING_LENGTHS), 1)
        away = np.linalg.norm((tips - roots)[..., :2], axis=2)
        lengths = np.linalg.norm(np.diff(chains, axis=2), axis=3).sum(axis=2)
        dancing = slice(0, frame(0.5))
        # From a quarter of a second after the staff stops.
        still = slice(frame(0.5) + 6, None)
        period, amplitude = _swing((tips - roots)[still, longest, :2], scene.render.fps)
        length = STRING_LENGTHS[longest]
        angle = math.asin(min(1.0, amplitude / length))
        # The staff's end, carried by the dancer from where it stood at the start.
        moved = matrices @ np.linalg.inv(matrices[0])
        pinned = moved[:, :3, :3] @ _staff_end() + moved[:, :3, 3]
        garland_end = played["Garland"][:, -1]
        return {
            "tip_swing_while_dancing_m": float(away[dancing].max()),
            "garland_end_off_pin_m": float(np.linalg.norm(garland_end - pinned, axis=1).max()),
            "garland_end_travel_m": float(np.linalg.norm(pinned - pinned[0], axis=1).max()),
            "string_stretch_share": float(np.abs(lengths / lengths[0] - 1.0).max()),
            "swing_period_s": period,
            "swing_amplitude_rad": angle,
            "pendulum_period_s": pendulum_period(length, angle),
            "closest_lantern_centres_m": float(apart[:, pairs[0], pairs[1]].min()),
            "finite": float(np.isfinite(points).all()),
        }

    def dress(bpy) -> None:
        _lanterns(bpy, bpy.data.objects["Strings_rig"])
        _pennants(bpy, bpy.data.objects["Garland_rig"])

    return staging.Example(
        title="Lanterns on strings: heavy tips swung from a dancing staff, a garland pinned to it",
        systems=[strings, garland],
        camera=(-0.25, -3.6, 1.5),
        target=(-0.27, 0.0, 1.2),
        lens=34.0,
        ground=ground,
        stills=(frame(0.2), frame(0.42), frame(0.75)),
        parameters={**parameters, "garland pin_object": "Staff end (on the dancer)"},
        reference=dancer,
        measure=measure,
        bake=("BONES", "HAIR"),
        dress=dress,
    )


def _figure(bpy) -> list:
    """The dancer, drawn at the start of the dance: a robed figure standing behind the staff's
    handle and holding it up over its head with both hands (its objects, to be carried by the
    dance)."""
    robe = staging.material(bpy, "Robe", (0.1, 0.14, 0.4), 0.8)
    skin = staging.material(bpy, "Skin", (0.78, 0.55, 0.42), 0.6)
    dark = staging.material(bpy, "Dancer's hair", (0.05, 0.03, 0.02), 0.45)
    x, y, _ = DANCER
    parts = [
        staging.placed(
            bpy, staging.cylinder_mesh(bpy, "Robe", 0.25, 1.0, top=0.12), (x, y, 0.5), robe
        ),
        staging.placed(
            bpy, staging.cylinder_mesh(bpy, "Chest", 0.12, 0.24, top=0.16), (x, y, 1.1), robe
        ),
        staging.placed(bpy, staging.cylinder_mesh(bpy, "Neck", 0.04, 0.1), (x, y, 1.25), skin),
        staging.placed(
            bpy, staging.sphere_mesh(bpy, "Head", 0.09, (0.85, 0.95, 1.1)), (x, y, 1.36), skin
        ),
        # Hair drawn back into a bun.
        staging.placed(
            bpy,
            staging.sphere_mesh(bpy, "Hair", 0.092, (0.88, 0.92, 1.0)),
            (x, y + 0.015, 1.39),
            dark,
        ),
        staging.placed(bpy, staging.sphere_mesh(bpy, "Bun", 0.045), (x, y + 0.1, 1.42), dark),
    ]
    handle_end = STAFF[0] + 0.5 * STAFF_LENGTH + HANDLE
    for side, grip in (("L", handle_end - 0.33), ("R", handle_end - 0.02)):
        sign = -1.0 if side == "L" else 1.0
        shoulder = np.array([x + sign * 0.16, y, 1.2])
        hand = np.array([grip, 0.0, STAFF[2]])
        elbow = 0.5 * (shoulder + hand) + np.array([sign * 0.1, 0.0, -0.1])
        for name, start, end, radius, material in (
            (f"Upper arm.{side}", shoulder, elbow, 0.045, robe),
            (f"Forearm.{side}", elbow, hand, 0.038, skin),
        ):
            parts.append(_limb(bpy, name, start, end, radius, material))
        parts.append(
            staging.placed(bpy, staging.sphere_mesh(bpy, f"Hand.{side}", 0.042), hand, skin)
        )
    return parts


def _limb(bpy, name: str, start: np.ndarray, end: np.ndarray, radius: float, material) -> object:
    """A round limb from ``start`` to ``end`` (m)."""
    from mathutils import Vector

    along = end - start
    mesh = staging.cylinder_mesh(bpy, name, radius, float(np.linalg.norm(along)))
    ob = staging.placed(bpy, mesh, 0.5 * (start + end), material)
    ob.rotation_mode = "QUATERNION"
    ob.rotation_quaternion = Vector((0.0, 0.0, 1.0)).rotation_difference(Vector(along))
    return ob


def _lanterns(bpy, rig) -> None:
    """A paper lantern hung from the tip of each string: a glowing ribbed body below the tip,
    skinned whole to the string's last bone so that it swings and turns with it."""
    from mathutils import Matrix, Vector

    bones = list(rig.data.bones)
    colours = ((1.0, 0.35, 0.08), (0.95, 0.1, 0.08), (1.0, 0.6, 0.12))
    for index in range(len(STRING_LENGTHS)):
        chain = [b for b in bones if b.name.split(".")[-2] == f"{index:03d}"]
        last = chain[-1]
        tip = np.array(last.tail_local)
        down = tip - np.array(last.head_local)
        down /= np.linalg.norm(down)
        scale = (LANTERN_RADIUS, LANTERN_RADIUS, LANTERN_HEIGHT)
        mesh = staging.sphere_mesh(bpy, f"Lantern {index}", 1.0, scale, rings=12)
        paper = staging.material(bpy, f"Paper {index}", colours[index % len(colours)], 0.8)
        shader = paper.node_tree.nodes["Principled BSDF"]
        shader.inputs["Emission Color"].default_value = (*colours[index % len(colours)], 1.0)
        shader.inputs["Emission Strength"].default_value = 3.0
        rib = staging.material(bpy, f"Rib {index}", (0.08, 0.04, 0.02), 0.5)
        mesh.materials.append(paper)
        mesh.materials.append(rib)
        # Every fourth column of faces a dark rib, so that the lantern's turning shows.
        for polygon in mesh.polygons:
            centre = np.array(polygon.center)
            column = int((math.atan2(centre[1], centre[0]) + math.pi) / (2 * math.pi) * 24)
            polygon.material_index = 1 if column % 4 == 0 else 0
        # Hung below the tip along the last bone: its top at the tip.
        turned = Vector((0.0, 0.0, -1.0)).rotation_difference(Vector(down)).to_matrix().to_4x4()
        mesh.transform(Matrix.Translation(Vector(tip + LANTERN_HEIGHT * down)) @ turned)
        staging.skinned(bpy, mesh, [{last.name: 1.0}] * len(mesh.vertices), rig)


def _pennants(bpy, rig) -> None:
    """A triangular pennant hung below every second bone of the garland, in turn red, yellow
    and blue, each skinned whole to its bone so that it rides and tilts with the line."""
    from mathutils import Vector

    colours = ((0.8, 0.06, 0.05), (0.95, 0.7, 0.1), (0.1, 0.25, 0.7))
    cloth = [staging.material(bpy, f"Pennant {k}", colour, 0.7) for k, colour in enumerate(colours)]
    bones = list(rig.data.bones)
    weights, vertices, faces, materials = [], [], [], []
    for index, bone in enumerate(bones[1:-1:2]):
        head, tail = Vector(bone.head_local), Vector(bone.tail_local)
        along = (tail - head).normalized()
        middle = 0.5 * (head + tail)
        first = len(vertices)
        vertices += [
            middle - 0.5 * PENNANT_WIDTH * along,
            middle + 0.5 * PENNANT_WIDTH * along,
            middle + Vector((0.0, 0.0, -PENNANT_DROP)),
        ]
        faces.append((first, first + 1, first + 2))
        materials.append(index % len(colours))
        weights += [{bone.name: 1.0}] * 3
    mesh = bpy.data.meshes.new("Pennants")
    mesh.from_pydata([tuple(v) for v in vertices], [], faces)
    for material in cloth:
        mesh.materials.append(material)
    mesh.polygons.foreach_set("material_index", materials)
    staging.skinned(bpy, mesh, weights, rig)


if __name__ == "__main__":
    staging.run_example("lanterns", build, sys.argv[1:])
