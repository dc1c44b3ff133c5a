"""Alembic files read back with an independent reader (``alembic3d``, the PyAlembic bindings)."""

from __future__ import annotations

import numpy as np


def read_positions(path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{geometry name: (sample times (S,), world positions (S, P, 3))}`` of every mesh and
    curve: each sample's points through the transforms above it at that time.

    Positions are converted back from Alembic's Y-up axes to Blender's Z-up ones. A sample is
    chosen by its time: ``ISampleSelector(k)`` with an integer would mean time ``k`` seconds.
    """
    import alembic3d as alembic

    abc, geom = alembic.Abc, alembic.AbcGeom
    result = {}
    # (node, the transforms above it, nearest first)
    pending = [(alembic.Abc.IArchive(path).getTop(), [])]
    while pending:
        node, above = pending.pop()
        metadata = node.getMetaData()
        if geom.IXform.matches(metadata):
            above = [geom.IXform(node, abc.WrapExistingFlag.kWrapExisting).getSchema(), *above]
        pending.extend((node.getChild(i), above) for i in range(node.getNumChildren()))
        for kind in (geom.IPolyMesh, geom.ICurves):
            if kind.matches(metadata):
                schema = kind(node, abc.WrapExistingFlag.kWrapExisting).getSchema()
                sampling = schema.getTimeSampling()
                times = np.array([sampling.getSampleTime(k) for k in range(schema.getNumSamples())])
                samples = []
                for t in times:
                    local = np.array(schema.getValue(abc.ISampleSelector(t)).getPositions())
                    points = np.hstack((local, np.ones((len(local), 1))))
                    # Alembic's matrices act on row vectors: the nearest transform first.
                    for xform in above:
                        points = points @ np.array(
                            xform.getValue(abc.ISampleSelector(t)).getMatrix()
                        )
                    samples.append(points[:, :3])
                y_up = np.stack(samples)
                z_up = np.stack([y_up[..., 0], -y_up[..., 2], y_up[..., 1]], axis=-1)
                result[node.getName()] = (times, z_up)
    return result
