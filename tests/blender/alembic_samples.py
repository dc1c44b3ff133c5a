"""Alembic files read back with an independent reader (``alembic3d``, the PyAlembic bindings)."""

from __future__ import annotations

import numpy as np


def read_positions(path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{geometry name: (sample times (S,), positions (S, P, 3))}`` of every mesh and curve.

    Positions are converted back from Alembic's Y-up axes to Blender's Z-up ones. A sample is
    chosen by its time: ``ISampleSelector(k)`` with an integer would mean time ``k`` seconds.
    """
    import alembic3d as alembic

    abc, geom = alembic.Abc, alembic.AbcGeom
    result = {}
    pending = [alembic.Abc.IArchive(path).getTop()]
    while pending:
        node = pending.pop()
        pending.extend(node.getChild(i) for i in range(node.getNumChildren()))
        metadata = node.getMetaData()
        for kind in (geom.IPolyMesh, geom.ICurves):
            if kind.matches(metadata):
                schema = kind(node, abc.WrapExistingFlag.kWrapExisting).getSchema()
                sampling = schema.getTimeSampling()
                times = np.array([sampling.getSampleTime(k) for k in range(schema.getNumSamples())])
                samples = [
                    np.array(schema.getValue(abc.ISampleSelector(t)).getPositions(), dtype=float)
                    for t in times
                ]
                y_up = np.stack(samples)
                z_up = np.stack([y_up[..., 0], -y_up[..., 2], y_up[..., 1]], axis=-1)
                result[node.getName()] = (times, z_up)
    return result
