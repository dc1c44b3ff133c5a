"""Plain records of what the adapter reads from a Blender scene.

``scene`` fills them from the evaluated scene (``scene.inputs``, ``scene.fields``,
``scene.obstacles``); everything downstream (conversion, the sampled input, the runtime) takes
them and never touches Blender. All arrays are host NumPy, world frame, metres, unless a field
says otherwise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..core.fields import RootToTip


@dataclass(frozen=True)
class DrawnCurves:
    """The splines of one object as dense polylines in world space.

    Attributes
    ----------
    object_name : str
    polylines : list of (P_i, 3) float64 arrays, m, world
        Blender's own tessellation of each spline (Bézier and NURBS at the curve's resolution;
        hair curves through their control points); ``polylines[i][0]`` is the root.
    labels : list of str
        ``"spline 3"`` (legacy curves) or ``"curve 3"`` (hair curves), for messages.
    """

    object_name: str
    polylines: list[np.ndarray]
    labels: list[str]


@dataclass(frozen=True)
class SurfaceAttachment:
    """Where each hair root sits on its surface mesh, found once in the rest pose.

    Attributes
    ----------
    surface_name : str
    triangle : (n,) int, index into the evaluated mesh's loop triangles
    barycentric : (n, 3) float64
    triangle_count : int
        Loop triangles of the evaluated mesh when attached; a different count later means the
        surface's topology changed and the attachment no longer applies.
    uv_map : str
        The surface's UV map the hair names (``Curves.surface_uv_map``, else the mesh's active
        render UV map); "" if the mesh has none.
    uv : (n, 2) float64 or None
        Each root's coordinate in ``uv_map`` (what Blender's hair tools store as
        ``surface_uv_coordinate``); None without a UV map.
    """

    surface_name: str
    triangle: np.ndarray
    barycentric: np.ndarray
    triangle_count: int
    uv_map: str = ""
    uv: np.ndarray | None = None


@dataclass(frozen=True)
class SceneFields:
    """The force fields acting on one strand system at one frame, unweighted, world space.

    Attributes
    ----------
    wind : tuple of fields read as air velocity (m/s)
    force : tuple of fields read as force per metre of strand (N/m)
    ignored : tuple of str
        Names of field objects that were not read, with why, for the status.
    """

    wind: tuple = ()
    force: tuple = ()
    ignored: tuple = ()

    def weighted(self, weight: RootToTip) -> tuple[list, list]:
        """The wind and force fields, each with the strand system's root-to-tip ``weight``."""
        return (
            [dataclasses.replace(item, weight=weight) for item in self.wind],
            [dataclasses.replace(item, weight=weight) for item in self.force],
        )


@dataclass(frozen=True)
class ObstacleShapes:
    """The obstacles of one strand system: engine shapes and where each comes from.

    Attributes
    ----------
    shapes : tuple of Plane, Sphere, Capsule or TriangleMesh
    names : tuple of str
        The obstacle objects' names, in the order of ``shapes``.
    """

    shapes: tuple
    names: tuple
