"""What a bake writes: shape keys (on a curve or a wire mesh), an armature with a baked action,
and hair-curve caches.

Every writer builds new data through a :class:`Transaction` and never edits existing data, so a
failed bake is undone by removing what the transaction created, and a successful one replaces
the previous bake of the same system and target only when everything exists. Baked objects are
in world space (identity transform), like the live preview, but for hair grown on a surface,
which is bound to it as the preview is (:mod:`.preview`); they carry ``oriented_strands_bake``
(what they hold and where from), which Free Bake, the Alembic export and the frame handler read.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import bpy
import numpy as np
from mathutils import Matrix

from ..strands_io.errors import SceneInputError
from ..strands_io.geometry import continuous_quaternions, quaternions_from_matrices
from . import children
from .animation import add_fcurve, new_action
from .preview import SurfaceBinding, new_curves_object, to_local
from .strands import PROPERTY_GROUP

log = logging.getLogger(__name__)

SHAPE_KEYS, MESH_SHAPE_KEYS = "SHAPE_KEYS", "MESH_SHAPE_KEYS"
BONES, HAIR = "BONES", "HAIR"
BAKE_TARGET_ITEMS = [
    (SHAPE_KEYS, "Shape Keys", "A Curve object with one shape key per frame"),
    (
        MESH_SHAPE_KEYS,
        "Mesh Shape Keys",
        "A wire mesh through the strands' points with one shape key per frame",
    ),
    (BONES, "Bones", "An armature with one bone per segment and a rotation key per frame"),
    (HAIR, "Hair Curves", "A Curves object playing positions cached next to the .blend file"),
]
BAKE_PROPERTY_GROUP = "oriented_strands_bake"


@dataclass
class BakedSystem:
    """The simulated frames of one strand system, as host arrays in strand order.

    Attributes
    ----------
    source : bpy.types.Object
        The strand system's object.
    frames : (F,) int
        Its frame range, ``frame_start .. frame_end``.
    points : (F, n_points, 3) float32, m, world
        Every point at every frame: exactly what the live preview shows.
    point_counts : (n_strands,) int
    point_radius : (n_points,) float
    link_parent : (n_links,) int
        Strand-order index of each link's parent link, -1 for the first link of a root strand.
    link_rotations : (F, n_links, 3, 3) float64 or None
        World rotation of every link (y along the segment, x and z across it); bone bakes only.
    binding : SurfaceBinding or None
        How hair grown on a surface is tied to it (hair bakes are shown as the preview is).
    """

    source: bpy.types.Object
    frames: np.ndarray
    points: np.ndarray
    point_counts: np.ndarray
    point_radius: np.ndarray
    link_parent: np.ndarray
    link_rotations: np.ndarray | None
    binding: SurfaceBinding | None

    @property
    def link_point(self) -> np.ndarray:
        """(n_links,) index of the point at each link's joint; its tip is the next point."""
        starts = np.cumsum(self.point_counts) - self.point_counts
        return np.concatenate(
            [
                start + np.arange(count - 1)
                for start, count in zip(starts, self.point_counts, strict=True)
            ]
        )


SUFFIXES = {
    SHAPE_KEYS: "_shape_keys",
    MESH_SHAPE_KEYS: "_mesh_keys",
    BONES: "_rig",
    HAIR: "_baked_hair",
}
CACHE_FOLDER = "strands_cache"
# The longest name Blender keeps (bytes of UTF-8): longer ones are cut, and bones renamed.
MAX_NAME_BYTES = 63


def baked_objects(source: bpy.types.Object, target: str) -> list[bpy.types.Object]:
    """Objects holding a bake of ``source`` to ``target``."""
    return [
        ob
        for ob in bpy.data.objects
        if getattr(ob, BAKE_PROPERTY_GROUP).target == target
        and getattr(ob, BAKE_PROPERTY_GROUP).source == source
    ]


def _hair_bakes() -> list[bpy.types.Object]:
    """Every baked hair object of the file."""
    return [ob for ob in bpy.data.objects if getattr(ob, BAKE_PROPERTY_GROUP).target == HAIR]


def is_baked(source: bpy.types.Object) -> bool:
    """Whether ``source`` has a bake to any target: its live preview is then hidden and does not
    simulate (:func:`show_preview`)."""
    return any(
        getattr(ob, BAKE_PROPERTY_GROUP).source == source
        and getattr(ob, BAKE_PROPERTY_GROUP).target in SUFFIXES
        for ob in bpy.data.objects
    )


def show_preview(source: bpy.types.Object) -> None:
    """Hide ``source``'s live preview while it has a bake (the bake is what plays and renders),
    show it again once it has none; child hair growing from the preview keeps it from
    rendering (:func:`.children.follow`)."""
    preview = getattr(source, PROPERTY_GROUP).preview_object
    if preview is None:
        return
    hidden = is_baked(source)
    if preview.name in bpy.context.view_layer.objects:
        preview.hide_set(hidden)
    preview.hide_render = hidden or bool(children.following([preview]))


def _owned_ids(ob: bpy.types.Object) -> set[bpy.types.ID]:
    """A baked object and the data only it uses: its geometry, shape keys' action, actions."""
    ids = {ob}
    holders = [ob]
    if ob.data is not None and ob.data.users <= 1:
        ids.add(ob.data)
        holders.append(ob.data)
        if getattr(ob.data, "shape_keys", None) is not None:
            holders.append(ob.data.shape_keys)
    for holder in holders:
        animation = holder.animation_data
        if animation is not None and animation.action is not None:
            if animation.action.users <= 1:
                ids.add(animation.action)
    return ids


def free_bake(source: bpy.types.Object, target: str) -> int:
    """Delete ``source``'s bake to ``target`` (objects, data, actions, cache files).

    Returns the number of baked objects removed.
    """
    objects = baked_objects(source, target)
    files = [_cache_path(ob) for ob in objects if target == HAIR]
    # Child hair grown from the bake grows from the live preview again.
    followers = children.following(objects)
    bpy.data.batch_remove([i for ob in objects for i in _owned_ids(ob)])
    preview = getattr(source, PROPERTY_GROUP).preview_object
    if preview is not None:
        children.follow(followers, preview)
    show_preview(source)
    for path in files:
        forget_cache(path)
        if os.path.exists(path):
            os.remove(path)
    return len(objects)


class Transaction:
    """Data and files a bake creates: removed by :meth:`rollback`, put in place by :meth:`commit`.

    New objects are kept out of every collection until the commit (an armature is linked to the
    scene only while edit mode makes its bones).
    """

    def __init__(self) -> None:
        self._ids: list[bpy.types.ID] = []
        self._objects: list[tuple[bpy.types.Object, bpy.types.Object, str, str]] = []
        self._files: list[tuple[str, str]] = []
        self._folders: list[str] = []

    def created(self, data: bpy.types.ID) -> bpy.types.ID:
        """Record new data (removed on rollback) and return it."""
        self._ids.append(data)
        return data

    def add_object(self, ob: bpy.types.Object, source: bpy.types.Object, target: str) -> None:
        """A new baked object: named and linked into ``source``'s collections on commit."""
        self.created(ob)
        self._objects.append((ob, source, target, source.name + SUFFIXES[target]))

    def add_file(self, partial: str, final: str) -> None:
        """A written file, moved from ``partial`` to ``final`` on commit."""
        self._files.append((partial, final))

    def final_files(self) -> set[str]:
        """Where the files written so far will be once committed."""
        return {final for _, final in self._files}

    def make_folder(self, path: str) -> str:
        """Make the folder ``path`` if missing (removed again on rollback); return it."""
        if not os.path.isdir(path):
            os.makedirs(path)
            self._folders.append(path)
        return path

    def rollback(self) -> None:
        """Remove everything created; the scene is as before the bake."""
        bpy.data.batch_remove([data for data in self._ids if _is_alive(data)])
        for partial, _ in self._files:
            if os.path.exists(partial):
                os.remove(partial)
        for folder in reversed(self._folders):
            os.rmdir(folder)

    def commit(self) -> list[bpy.types.Object]:
        """Replace earlier bakes of the same systems and targets; return the new objects.
        Child hair grown from a system's preview or earlier hair bake grows from its new hair
        bake."""
        # The caches of the bakes replaced that no new file takes the place of and no other
        # bake plays: those of a system renamed since its last hair bake.
        stale: set[str] = set()
        for ob, source, target, _ in self._objects:
            old = [o for o in baked_objects(source, target) if o != ob]
            if target == HAIR:
                preview = getattr(source, PROPERTY_GROUP).preview_object
                guides = old + ([preview] if preview is not None else [])
                children.follow(children.following(guides), ob)
                stale.update(_cache_path(o) for o in old)
            bpy.data.batch_remove([i for o in old for i in _owned_ids(o)])
        for partial, final in self._files:
            forget_cache(final)
            os.replace(partial, final)
        playing = {_cache_path(ob) for ob in _hair_bakes()}
        for path in stale - playing - {os.path.normpath(final) for _, final in self._files}:
            forget_cache(path)
            if os.path.exists(path):
                os.remove(path)
        for ob, source, _, name in self._objects:
            _rename(ob, name)
            for collection in source.users_collection:
                if ob.name not in collection.objects:
                    collection.objects.link(ob)
            show_preview(source)
        return [ob for ob, _, _, _ in self._objects]


def _rename(ob: bpy.types.Object, name: str) -> None:
    """Give a new baked object, its data, shape keys and actions (and their slots) ``name``: made
    while the bake they replace held it, they were given another (``tree_rig.001``), and an
    exporter names a take after its action (FBX)."""
    ob.name = name
    holders = [ob]
    if ob.data is not None:
        ob.data.name = name
        holders.append(ob.data)
        keys = getattr(ob.data, "shape_keys", None)
        if keys is not None:
            keys.name = name
            holders.append(keys)
    for holder in holders:
        animation = holder.animation_data
        if animation is None or animation.action is None:
            continue
        animation.action.name = name
        slot = getattr(animation, "action_slot", None)
        if slot is not None:
            slot.name_display = holder.name


def _is_alive(data: bpy.types.ID) -> bool:
    try:
        data.name  # noqa: B018 - raises ReferenceError once Blender freed the data
    except ReferenceError:
        return False
    return True


def _tag(ob: bpy.types.Object, system: BakedSystem, target: str) -> None:
    bake = getattr(ob, BAKE_PROPERTY_GROUP)
    bake.source = system.source
    bake.target = target
    bake.frame_start = int(system.frames[0])
    bake.frame_end = int(system.frames[-1])


# --- shape keys ---------------------------------------------------------------------------------


def write_shape_keys(system: BakedSystem, transaction: Transaction) -> bpy.types.Object:
    """A POLY Curve object through the simulated points, with a shape key per frame."""
    name = system.source.name + SUFFIXES[SHAPE_KEYS]
    curve = transaction.created(bpy.data.curves.new(name, "CURVE"))
    curve.dimensions = "3D"
    rest = system.points[0].astype(np.float64)
    start = 0
    for count in system.point_counts:
        spline = curve.splines.new("POLY")
        spline.points.add(int(count) - 1)
        co = np.hstack([rest[start : start + count], np.ones((count, 1))])
        spline.points.foreach_set("co", co.ravel())
        start += count
    return _add_frame_keys(bpy.data.objects.new(name, curve), system, SHAPE_KEYS, transaction)


def write_mesh_shape_keys(system: BakedSystem, transaction: Transaction) -> bpy.types.Object:
    """A wire mesh (a vertex per point, an edge per segment) with a shape key per frame."""
    name = system.source.name + SUFFIXES[MESH_SHAPE_KEYS]
    mesh = transaction.created(bpy.data.meshes.new(name))
    joints = system.link_point
    mesh.vertices.add(system.points.shape[1])
    mesh.vertices.foreach_set("co", np.ascontiguousarray(system.points[0]).ravel())
    mesh.edges.add(len(joints))
    mesh.edges.foreach_set("vertices", np.stack([joints, joints + 1], axis=1).ravel())
    mesh.update()
    return _add_frame_keys(bpy.data.objects.new(name, mesh), system, MESH_SHAPE_KEYS, transaction)


def _add_frame_keys(
    ob: bpy.types.Object, system: BakedSystem, target: str, transaction: Transaction
) -> bpy.types.Object:
    """Relative shape keys ``frame_0001``, ... on ``ob`` (its points are the first frame), each
    keyed so that its frame shows exactly the simulated points.

    Key ``frame_0012`` has value 1 at frame 12 and 0 at frames 11 and 13, linearly between: whole
    frames show exactly the simulated points, subframes (motion blur) blend the two neighbours.
    Before the first and after the last frame the first and last keys hold.
    """
    transaction.add_object(ob, system.source, target)
    ob.shape_key_add(name="Basis", from_mix=False)
    names = [f"frame_{frame:04d}" for frame in system.frames]
    for key_name, points in zip(names, system.points, strict=True):
        block = ob.shape_key_add(name=key_name, from_mix=False)
        block.data.foreach_set("co", np.ascontiguousarray(points, dtype=np.float32).ravel())
    action, fcurves = new_action(ob.data.shape_keys, ob.name)
    transaction.created(action)
    first, last = int(system.frames[0]), int(system.frames[-1])
    for key_name, frame in zip(names, system.frames, strict=True):
        frames = [f for f in (frame - 1, frame, frame + 1) if first <= f <= last]
        values = [1.0 if f == frame else 0.0 for f in frames]
        add_fcurve(fcurves, f'key_blocks["{key_name}"].value', 0, np.array(frames), values)
    _tag(ob, system, target)
    return ob


# --- bones --------------------------------------------------------------------------------------


def bone_names(system: BakedSystem) -> list[str]:
    """``Ponytail.003.007``: link 7 (from the root) of strand 3 of the system ``Ponytail``, in
    strand order. Named after the system, the bones of two rigs never share a name, so that an
    exporter matching actions to rigs by bone names (FBX's *All Actions*) gives each rig its
    own; the object's name is shortened to keep within Blender's 63 bytes."""
    names = []
    for strand, count in enumerate(system.point_counts):
        for link in range(int(count) - 1):
            suffix = f".{strand:03d}.{link:03d}"
            room = MAX_NAME_BYTES - len(suffix.encode())
            prefix = system.source.name.encode()[:room].decode(errors="ignore")
            names.append(prefix + suffix)
    return names


def write_armature(system: BakedSystem, transaction: Transaction) -> bpy.types.Object:
    """An armature with one bone per segment and a rotation key per bone per frame.

    Bones follow the strands' links: head at the joint, tail at the segment's tip, and x and z
    along the link's cross-section axes, so the roll carries the strand's twist. A branch's first
    bone is a child of the bone it grows from. Rest pose: the first frame. Root bones are also
    keyed in location (they follow what carries the roots). Needs Object Mode (checked by the
    bake job): bones can only be made in edit mode, entered here for the new armature alone.
    """
    context = bpy.context
    name = system.source.name + SUFFIXES[BONES]
    armature = transaction.created(bpy.data.armatures.new(name))
    ob = bpy.data.objects.new(name, armature)
    transaction.add_object(ob, system.source, BONES)
    names = bone_names(system)
    joints = system.link_point
    rest_points = system.points[0].astype(np.float64)
    rest_rotations = system.link_rotations[0]
    parents = system.link_parent

    view_layer = context.view_layer
    previous_active = view_layer.objects.active
    selected = [o for o in view_layer.objects if o.select_get()]
    context.scene.collection.objects.link(ob)
    # Edit mode takes in every selected object of the active one's type: only the new armature.
    for other in selected:
        other.select_set(False)
    view_layer.objects.active = ob
    try:
        bpy.ops.object.mode_set(mode="EDIT")
        bones = []
        for index, bone_name in enumerate(names):
            bone = armature.edit_bones.new(bone_name)
            # A new bone has no length, and Blender deletes zero-length bones on leaving edit
            # mode; the matrix then sets head, direction and roll, the length the tail.
            bone.tail = (0.0, 1.0, 0.0)
            matrix = np.eye(4)
            matrix[:3, :3] = rest_rotations[index]
            matrix[:3, 3] = rest_points[joints[index]]
            bone.matrix = Matrix(matrix.tolist())
            bone.length = float(
                np.linalg.norm(rest_points[joints[index] + 1] - rest_points[joints[index]])
            )
            bones.append(bone)
        for index, parent in enumerate(parents):
            if parent >= 0:
                bones[index].parent = bones[parent]
                bones[index].use_connect = bool(joints[parent] + 1 == joints[index])
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        context.scene.collection.objects.unlink(ob)
        view_layer.objects.active = previous_active
        for other in selected:
            other.select_set(True)

    rest = np.array([np.array(armature.bones[n].matrix_local) for n in names])
    _key_bones(ob, name, names, system, rest, transaction)
    _tag(ob, system, BONES)
    return ob


def _key_bones(
    ob: bpy.types.Object,
    action_name: str,
    names: list[str],
    system: BakedSystem,
    rest: np.ndarray,
    transaction: Transaction,
) -> None:
    """Rotation (and, for root bones, location) keys reproducing every simulated link frame.

    A pose bone's matrix is ``pose_parent @ rest_parent⁻¹ @ rest @ basis``; solved for the basis
    rotation: ``rest_rotᵀ rest_parent_rot pose_parent_rotᵀ pose_rot``.
    """
    rotations = system.link_rotations  # (F, L, 3, 3)
    parents = system.link_parent
    rest_rotation = rest[:, :3, :3]
    is_root = parents < 0
    parent_index = np.where(is_root, 0, parents)
    relative = np.einsum("lji,ljk->lik", rest_rotation, rest_rotation[parent_index])
    parent_pose = np.swapaxes(rotations[:, parent_index], -1, -2)
    local = np.einsum("lij,fljk,flkm->flim", relative, parent_pose, rotations)
    local[:, is_root] = np.einsum("lji,fljk->flik", rest_rotation[is_root], rotations[:, is_root])
    quaternions = continuous_quaternions(quaternions_from_matrices(local))

    joints = system.points[:, system.link_point].astype(np.float64)  # (F, L, 3)
    offsets = joints - rest[None, :, :3, 3]
    locations = np.einsum("lji,flj->fli", rest_rotation, offsets)

    action, fcurves = new_action(ob, action_name)
    transaction.created(action)
    frames = system.frames
    for index, bone_name in enumerate(names):
        path = f'pose.bones["{bone_name}"]'
        for component in range(4):
            values = quaternions[:, index, component]
            add_fcurve(fcurves, path + ".rotation_quaternion", component, frames, values)
        if is_root[index]:
            for component in range(3):
                values = locations[:, index, component]
                add_fcurve(fcurves, path + ".location", component, frames, values)


# --- hair curves --------------------------------------------------------------------------------


def write_hair_cache(system: BakedSystem, transaction: Transaction) -> bpy.types.Object:
    """A Curves object and ``//strands_cache/<object>.npy`` with its points at every frame.

    The cache is one ``(frames, points, 3)`` float32 array of world positions; the frame handler
    memory-maps it and reads one frame per frame change, so memory stays flat however long the
    bake, and writes it in the object's space (hair on a surface is bound to it as the preview
    is: :mod:`.preview`).
    """
    name = system.source.name + SUFFIXES[HAIR]
    folder = transaction.make_folder(os.path.join(os.path.dirname(bpy.data.filepath), CACHE_FOLDER))
    # File names are cleaned object names; two objects whose names clean alike get two files.
    taken = transaction.final_files() | {
        _cache_path(ob)
        for ob in bpy.data.objects
        if getattr(ob, BAKE_PROPERTY_GROUP).target == HAIR
        and getattr(ob, BAKE_PROPERTY_GROUP).source != system.source
    }
    final = _unused_cache_path(folder, bpy.path.clean_name(system.source.name), taken)
    partial = f"{final}.partial-{os.getpid()}"
    transaction.add_file(partial, final)
    with open(partial, "wb") as file:
        np.save(file, np.ascontiguousarray(system.points, dtype=np.float32))
    ob = new_curves_object(
        name,
        system.source,
        system.point_counts,
        system.point_radius,
        system.points[0],
        system.binding,
        bpy.context.evaluated_depsgraph_get(),
    )
    transaction.created(ob.data)
    transaction.add_object(ob, system.source, HAIR)
    _tag(ob, system, HAIR)
    getattr(ob, BAKE_PROPERTY_GROUP).cache_file = bpy.path.relpath(final)
    return ob


def _unused_cache_path(folder: str, stem: str, taken: set[str]) -> str:
    """``folder/<stem>.npy``, or ``<stem>_2.npy``, ``<stem>_3.npy``, ... the first path not in
    ``taken`` (normalised paths)."""
    final = os.path.normpath(os.path.join(folder, stem + ".npy"))
    copy = 2
    while final in taken:
        final = os.path.normpath(os.path.join(folder, f"{stem}_{copy}.npy"))
        copy += 1
    return final


WRITERS: dict[str, Callable[[BakedSystem, Transaction], bpy.types.Object]] = {
    SHAPE_KEYS: write_shape_keys,
    MESH_SHAPE_KEYS: write_mesh_shape_keys,
    BONES: write_armature,
    HAIR: write_hair_cache,
}


_open_caches: dict[str, tuple[float, np.ndarray]] = {}
_reported_problems: set[str] = set()


def _cache_path(ob: bpy.types.Object) -> str:
    return os.path.normpath(bpy.path.abspath(getattr(ob, BAKE_PROPERTY_GROUP).cache_file))


# The baked hair objects' cache paths as they were before a save remapped them (by object name),
# put back if the save was a copy or failed (remap_hair_caches, restore_after_copy).
_paths_before_save: dict[str, str] = {}


def remap_hair_caches(filepath: str) -> None:
    """Before the file is saved as ``filepath``: make every baked hair object's relative cache
    path relative to where the file goes, so that the bake plays from there (Blender remaps its
    own relative paths on Save As the same way; the caches stay where they are)."""
    _paths_before_save.clear()
    folder = os.path.dirname(os.path.abspath(filepath))
    for ob in bpy.data.objects:
        props = getattr(ob, BAKE_PROPERTY_GROUP)
        if props.target != HAIR or not props.cache_file.startswith("//"):
            continue
        _paths_before_save[ob.name] = props.cache_file
        props.cache_file = bpy.path.relpath(_cache_path(ob), start=folder)


def restore_after_copy(filepath: str) -> None:
    """After a save as ``filepath``, or its failure: where the open file is still the old one
    (a copy, or nothing saved), put back the cache paths :func:`remap_hair_caches` remapped."""
    if os.path.normpath(bpy.data.filepath) != os.path.normpath(os.path.abspath(filepath)):
        for name, path in _paths_before_save.items():
            ob = bpy.data.objects.get(name)
            if ob is not None:
                getattr(ob, BAKE_PROPERTY_GROUP).cache_file = path
    _paths_before_save.clear()


def gather_hair_caches() -> list[str]:
    """Copy every hair bake's cache that is not in this .blend file's own ``strands_cache``
    folder into it, and play it from there: the file and that folder then hold the whole bake
    (a render farm's shot folder), and Free Bake here no longer deletes a cache another file
    plays. Returns the caches copied (their new paths); raises :class:`SceneInputError`, with
    nothing copied, where the file is not saved or a cache cannot play (:func:`cache_problem`)."""
    if not bpy.data.filepath:
        raise SceneInputError("save the .blend file first: its hair caches go next to it")
    objects = _hair_bakes()
    problems = [f"{ob.name!r}: {problem}" for ob in objects if (problem := cache_problem(ob))]
    if problems:
        raise SceneInputError("; ".join(problems))
    folder = os.path.join(os.path.dirname(bpy.data.filepath), CACHE_FOLDER)
    own = {os.path.normpath(folder)}
    elsewhere = [ob for ob in objects if os.path.dirname(_cache_path(ob)) not in own]
    if not elsewhere:
        return []
    if not os.path.isdir(folder):
        os.makedirs(folder)
    # Files already there, another file's caches say, are not overwritten.
    taken = {os.path.normpath(os.path.join(folder, name)) for name in os.listdir(folder)}
    copied = []
    for ob in elsewhere:
        stem, _ = os.path.splitext(os.path.basename(_cache_path(ob)))
        final = _unused_cache_path(folder, stem, taken)
        partial = f"{final}.partial-{os.getpid()}"
        try:
            shutil.copyfile(_cache_path(ob), partial)
            os.replace(partial, final)
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        taken.add(final)
        getattr(ob, BAKE_PROPERTY_GROUP).cache_file = bpy.path.relpath(final)
        copied.append(getattr(ob, BAKE_PROPERTY_GROUP).cache_file)
    return copied


def cache_problem(ob: bpy.types.Object) -> str:
    """Why a baked hair object's cache cannot play, or "" (also for any other object): it is
    not where its path points (the file moved without its ``strands_cache`` folder, say), or it
    does not hold the bake's frames and points (another bake rewrote it)."""
    if getattr(ob, BAKE_PROPERTY_GROUP).target != HAIR:
        return ""
    return _playable_cache(ob)[1]


def _playable_cache(ob: bpy.types.Object) -> tuple[np.ndarray | None, str]:
    """A baked hair object's cached positions, or None and why they cannot play
    (:func:`cache_problem`)."""
    props = getattr(ob, BAKE_PROPERTY_GROUP)
    path = _cache_path(ob)
    if not os.path.isfile(path):
        return None, f"cache {props.cache_file} is missing"
    try:
        positions = _cached_positions(path)
    except (OSError, ValueError) as error:
        return None, f"cache {props.cache_file} cannot be read ({error})"
    frames = props.frame_end - props.frame_start + 1
    points = len(ob.data.points)
    if positions.shape == (frames, points, 3):
        return positions, ""
    held = " × ".join(str(size) for size in positions.shape)
    return None, (
        f"cache {props.cache_file} holds {held} positions, not {frames} frames × {points} "
        "points × 3 (another bake rewrote it): bake it again"
    )


def forget_cache(path: str) -> None:
    """Close a memory-mapped cache (before it is replaced or deleted)."""
    _open_caches.pop(os.path.normpath(path), None)
    _reported_problems.discard(os.path.normpath(path))


def _cached_positions(path: str) -> np.ndarray:
    modified = os.path.getmtime(path)
    opened = _open_caches.get(path)
    if opened is None or opened[0] != modified:
        opened = (modified, np.load(path, mmap_mode="r"))
        _open_caches[path] = opened
    return opened[1]


def apply_hair_caches(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Show every baked hair object of the scene at the current frame (frame handler), in its
    space as ``depsgraph`` places it.

    Frames before the bake show its first frame, frames after it its last, as live playback
    does. A missing or mismatched cache leaves the object as it is and is logged once.
    """
    for ob in scene.objects:
        bake = getattr(ob, BAKE_PROPERTY_GROUP)
        if ob.type != "CURVES" or bake.target != HAIR:
            continue
        positions, problem = _playable_cache(ob)
        if problem:
            path = _cache_path(ob)
            if path not in _reported_problems:
                _reported_problems.add(path)
                log.warning("Oriented Strands: %r: %s", ob.name, problem)
            continue
        points = ob.data.attributes["position"].data
        index = min(max(scene.frame_current - bake.frame_start, 0), len(positions) - 1)
        local = to_local(ob, np.asarray(positions[index], dtype=np.float64), depsgraph)
        points.foreach_set("vector", np.ascontiguousarray(local, dtype=np.float32).ravel())
        ob.data.update_tag()


def clear_open_caches() -> None:
    """Close every memory-mapped cache (a file was loaded, or the extension is disabled)."""
    _open_caches.clear()
    _reported_problems.clear()
