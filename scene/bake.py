"""Bakes: strand systems simulated frame by frame off to the side, then written in one go.

A bake is a transaction. :class:`BakeJob` reads the input and simulates into plain arrays,
touching nothing in the scene, so cancelling it (Esc in the UI) or a failing step leaves the
scene as it was. :meth:`BakeJob.finish` then builds every output (shape keys, an armature, a
hair-curve cache) as new data; if anything fails, everything it created is removed again, and
only when all of it exists does it replace the previous bake of the same system and target.

The same job runs synchronously (:func:`bake_systems`: background Blender, scripts, farms) or one
frame at a time from a modal operator's timer (the UI), with progress on the console either way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable

import bpy
import numpy as np

from ..core import StrandError
from ..strands_io.cache import StrandSystemRuntime
from ..strands_io.errors import SceneInputError
from ..strands_io.parameters import StrandSettings
from . import bake_outputs
from .bake_outputs import BAKE_TARGET_ITEMS, BONES, HAIR, BakedSystem
from .preview import surface_binding
from .strands import PROPERTY_GROUP, AnimatedValues, read_settings
from .systems import is_strand_system, read_for_bake, runtime

# Past this many bones Blender's animation system slows to a crawl (every bone has four
# F-curves; 100k F-curves take minutes to create and slow every frame change).
BONE_LIMIT = 10_000

# Console progress lines are printed at most this often (s).
PROGRESS_INTERVAL = 1.0


class _Recording:
    """One system's frames, written into arrays allocated once for the whole range: simulated
    by a runtime of the bake's own, or copied from the live preview's where it has played them
    all (``played``)."""

    def __init__(
        self,
        ob: bpy.types.Object,
        runtime: StrandSystemRuntime,
        settings: StrandSettings,
        with_rotations: bool,
        played: bool,
    ) -> None:
        self.ob, self.runtime, self.settings, self.played = ob, runtime, settings, played
        self.animated = AnimatedValues(ob)
        self.frame_start = runtime.prepared.frame_start
        self.frame_end = runtime.prepared.frame_end
        frames = self.frame_end - self.frame_start + 1
        model = runtime.model
        self.points = np.empty((frames, model.n_points, 3), dtype=np.float32)
        self.rotations = np.empty((frames, model.n_links, 3, 3)) if with_rotations else None

    def record(self, frame: int) -> None:
        runtime = self.runtime
        index = frame - self.frame_start
        self.points[index] = runtime.points_at(frame, self.settings, self.animated)
        if self.rotations is not None:
            self.rotations[index] = runtime.simulation.link_frames()[0]
        if not self.played:
            # This runtime is the bake's own: only its latest frame is needed to step on, so
            # the points are held once, here, however long the bake.
            runtime.frames.pop(frame - 1, None)

    def result(self) -> BakedSystem:
        layout = self.runtime.layout
        return BakedSystem(
            source=self.ob,
            frames=np.arange(self.frame_start, self.frame_end + 1),
            points=self.points,
            point_counts=np.asarray(layout.point_counts),
            point_radius=np.asarray(self.runtime.point_radius),
            link_parent=layout.link_parent,
            link_rotations=self.rotations,
            binding=surface_binding(self.ob, self.runtime.prepared.attachment),
        )


def _target_label(target: str) -> str:
    return next(label for key, label, _ in BAKE_TARGET_ITEMS if key == target).lower()


def _checked_targets(targets: Iterable[str]) -> tuple[str, ...]:
    """The targets in a fixed order; raise :class:`SceneInputError` for unknown ones."""
    known = [key for key, _, _ in BAKE_TARGET_ITEMS]
    targets = set(targets)
    unknown = sorted(targets - set(known))
    if unknown or not targets:
        raise SceneInputError(
            f"bake targets must be among {', '.join(known)}, got {', '.join(unknown) or 'none'}"
        )
    return tuple(key for key in known if key in targets)


class BakeJob:
    """One bake of strand systems to one or more targets; see the module docstring.

    Creating the job checks the request and reads the input (it samples the scene's frames and
    restores the current frame); :meth:`step` simulates one frame of every system; :meth:`finish`
    writes the outputs. Abandoning the job before :meth:`finish` changes nothing.
    """

    def __init__(
        self,
        scene: bpy.types.Scene,
        view_layer: bpy.types.ViewLayer,
        objects: list[bpy.types.Object],
        targets: Iterable[str],
        output: Callable[[str], None] | None = None,
    ) -> None:
        self.targets = _checked_targets(targets)
        self._output = output or _print_to_console
        objects = list(dict.fromkeys(objects))
        if not objects:
            raise SceneInputError("select the strand systems to bake")
        for ob in objects:
            if not is_strand_system(ob):
                raise SceneInputError(f"object {ob.name!r} is not a strand system")
            if not getattr(ob, PROPERTY_GROUP).enabled:
                raise SceneInputError(
                    f"object {ob.name!r}: its simulation is off (Simulate is unchecked); "
                    "switch it on to bake"
                )
        if BONES in self.targets and bpy.context.mode != "OBJECT":
            raise SceneInputError("bake bones from Object Mode (bones are made in edit mode)")
        if HAIR in self.targets and not bpy.data.filepath:
            raise SceneInputError(
                "save the .blend file first: hair-curve bakes are cached in a folder next to it"
            )
        runtimes = read_for_bake(scene, view_layer, objects)
        if BONES in self.targets:
            bones = sum(runtime.model.n_links for runtime in runtimes.values())
            if bones > BONE_LIMIT:
                raise SceneInputError(
                    f"a bone bake of {bones} segments would make {bones} bones; Blender slows "
                    f"to a crawl past about {BONE_LIMIT}. Bake dense hair to Hair Curves or "
                    "export Alembic instead, or use fewer segments"
                )
        # Live playback keeps points only: bones need every link's frame, so they simulate.
        with_rotations = BONES in self.targets
        self._recordings = []
        for ob in objects:
            fresh, live = runtimes[ob.name], runtime(ob)
            played = not with_rotations and live is not None and live.has_played(fresh)
            settings = read_settings(ob, scene)
            self._recordings.append(
                _Recording(ob, live if played else fresh, settings, with_rotations, played)
            )
        self.first_frame = min(r.frame_start for r in self._recordings)
        self.last_frame = max(r.frame_end for r in self._recordings)
        self.next_frame = self.first_frame
        self._started = time.perf_counter()
        self._last_report = self._started
        names = ", ".join(repr(r.ob.name) for r in self._recordings)
        self._strands = sum(r.runtime.model.n_strands for r in self._recordings)
        links = sum(r.runtime.model.n_links for r in self._recordings)
        labels = ", ".join(_target_label(t) for t in self.targets)
        self._output(
            f"Oriented Strands: baking {names} to {labels}: {self._strands} strands, {links} "
            f"segments, frames {self.first_frame}-{self.last_frame}"
        )
        played = [repr(r.ob.name) for r in self._recordings if r.played]
        if played:
            self._output(
                f"  {', '.join(played)}: every frame played live with these settings, written "
                "from the preview's cache"
            )

    @property
    def frame_count(self) -> int:
        return self.last_frame - self.first_frame + 1

    @property
    def done(self) -> bool:
        """Whether every frame has been simulated."""
        return self.next_frame > self.last_frame

    @property
    def fraction(self) -> float:
        """Share of the frames simulated so far, 0 to 1."""
        return (self.next_frame - self.first_frame) / self.frame_count

    def step(self) -> None:
        """Simulate the next frame of every system (raises the engine's :class:`StrandError`)."""
        frame = self.next_frame
        for recording in self._recordings:
            if recording.frame_start <= frame <= recording.frame_end:
                try:
                    recording.record(frame)
                except StrandError as error:
                    raise StrandError(
                        f"object {recording.ob.name!r}, frame {frame}: {error}"
                    ) from error
                fell_back = recording.runtime.frame_fallbacks(frame)
                if fell_back:
                    self._output(f"  frame {frame}: object {recording.ob.name!r}: {fell_back}")
        self.next_frame += 1
        now = time.perf_counter()
        if self.done or now - self._last_report >= PROGRESS_INTERVAL:
            self._last_report = now
            done = self.next_frame - self.first_frame
            per_frame = (now - self._started) / done
            eta = per_frame * (self.frame_count - done)
            self._output(
                f"  frame {frame} ({done}/{self.frame_count}), {self._strands} strands, "
                f"{per_frame:.3f} s/frame, ETA {eta:.0f} s"
            )

    def run(self) -> None:
        """Simulate every remaining frame."""
        while not self.done:
            self.step()

    def finish(self) -> list[bpy.types.Object]:
        """Write every target of every system, replacing earlier bakes; return the new objects.

        All or nothing: on any error the objects, data, actions and files made so far are
        removed and the previous bakes are kept.
        """
        if not self.done:
            raise SceneInputError("the bake was not simulated to its last frame")
        baked = [recording.result() for recording in self._recordings]
        transaction = bake_outputs.Transaction()
        try:
            for system in baked:
                for target in self.targets:
                    bake_outputs.WRITERS[target](system, transaction)
        except BaseException:
            transaction.rollback()
            raise
        objects = transaction.commit()
        seconds = time.perf_counter() - self._started
        self._output(
            f"Oriented Strands: baked {self.frame_count} frames in {seconds:.1f} s: "
            + ", ".join(repr(ob.name) for ob in objects)
        )
        for warning in self.warnings():
            self._output(f"Oriented Strands: warning: {warning}")
        return objects

    def warnings(self) -> list[str]:
        """One line per system whose strands fell back, and one per system whose pinned tips
        trailed their Pin Object, in the frames simulated so far."""
        return [
            f"object {recording.ob.name!r}: {summary}"
            for recording in self._recordings
            for summary in (
                recording.runtime.fallback_report(),
                recording.runtime.trailing_summary(),
            )
            if summary
        ]


def _print_to_console(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def bake_systems(
    scene: bpy.types.Scene,
    view_layer: bpy.types.ViewLayer,
    objects: list[bpy.types.Object],
    targets: Iterable[str],
) -> list[bpy.types.Object]:
    """Bake ``objects``' strand systems to ``targets`` synchronously; return the new objects.

    On error (:class:`StrandError`) or interruption the scene is left as it was.
    """
    job = BakeJob(scene, view_layer, objects, targets)
    job.run()
    return job.finish()
