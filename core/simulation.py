"""The scripting entry point: a model with its workspace, state and control, stepped per frame."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dynamics
from .base_motion import BaseMotion
from .dynamics import Data
from .errors import InvalidInputError
from .integrators import SolverSettings, StepStats, step
from .model import Model
from .state import Control, State, _checked_vector

BaseSource = BaseMotion | Callable[[float], BaseMotion]


class Simulation:
    """A strand model being simulated: owns the workspace, the state and the control.

    Parameters
    ----------
    model : Model
    settings : SolverSettings
    gravity : (3,) m/s², world

    Notes
    -----
    Arrays returned by :meth:`points` and :meth:`link_frames` are host NumPy copies in strand
    order; everything else stays on the model's backend.
    """

    def __init__(
        self,
        model: Model,
        settings: SolverSettings | None = None,
        gravity: Any = (0.0, 0.0, -9.81),
    ) -> None:
        self.model = model
        self.settings = settings or SolverSettings()
        self.data = Data.for_model(model)
        self.control = Control.from_model(model, gravity)
        self.state = State.at_rest(model)
        self._spare = self.state.copy()
        self.stats = StepStats(0, 0.0)
        backend = model.backend
        self._point_link = backend.from_host(model.point_link)
        self._point_is_tip = backend.from_host(model.point_is_tip.astype(np.float64))
        self._link_order = backend.from_host(model.link_order)

    @property
    def time(self) -> float:
        """Simulated time of the current state, s."""
        return self.state.time

    def reset(self, base_poses: Any = None, time: float = 0.0) -> None:
        """Back to the rest shape, motionless, with the bases at ``base_poses`` (T, 4, 4)."""
        self.state = State.at_rest(self.model, base_poses, time)
        self._spare = self.state.copy()
        poses = self.model.base_rest_poses if base_poses is None else base_poses
        self.control.set_base_motion(self.model, BaseMotion.still(poses))
        self.stats = StepStats(0, 0.0)

    def set_parameter(self, name: str, value: Any) -> None:
        """Animate a parameter from the next substep on.

        ``name`` is a field of :class:`~.model.StrandParameters` other than mass and radius
        (scalar or per-link values in strand order), ``gravity`` (3,), or ``wind_velocity`` /
        ``external_force`` ((3,) for all links or (n_links, 3) in strand order).
        """
        model = self.model
        if name == "gravity":
            self.control.gravity = model.backend.from_host(
                _checked_vector("gravity", value)[:, None]
            )
            return
        if name in ("wind_velocity", "external_force"):
            host = np.asarray(value, dtype=np.float64)
            if host.shape == (3,):
                host = np.broadcast_to(host, (model.n_links, 3))
            if host.shape != (model.n_links, 3) or not np.isfinite(host).all():
                raise InvalidInputError(
                    f"{name} must be finite, shape (3,) or ({model.n_links}, 3), got {host.shape}"
                )
            setattr(self.control, name, model.from_strand_order(host, name))
            return
        if name not in Control.PARAMETERS:
            raise InvalidInputError(
                f"unknown parameter {name!r}; animatable: {', '.join(Control.PARAMETERS)}, "
                "gravity, wind_velocity, external_force"
            )
        current = getattr(self.control, name)
        columns = tuple(current.shape[:-1])
        host = np.asarray(value, dtype=np.float64)
        if host.ndim == 0 or (columns and host.shape == columns):
            host = np.broadcast_to(host, (model.n_links, *columns))
        elif columns and host.shape == (model.n_links,):
            host = np.broadcast_to(host[:, None], (model.n_links, *columns))
        if (
            host.shape != (model.n_links, *columns)
            or not np.isfinite(host).all()
            or (host < 0).any()
        ):
            raise InvalidInputError(
                f"{name} must be non-negative and finite: a scalar or per-link values in strand "
                f"order of shape {(model.n_links, *columns)}, got shape {np.shape(value)}"
            )
        setattr(self.control, name, model.from_strand_order(host, name))

    def advance(self, dt: float, base: BaseSource) -> StepStats:
        """Advance by ``dt`` seconds in ``settings.substeps`` substeps, bases moving as ``base``.

        ``base`` is a :class:`BaseMotion` held for the interval, or a callable ``base(t)`` giving
        the motion at time ``t`` (e.g. a :class:`BaseTrajectory`), sampled at each substep's end.
        """
        dt = float(dt)
        if not (np.isfinite(dt) and dt > 0):
            raise InvalidInputError(f"dt must be a positive number, got {dt}")
        substeps = int(self.settings.substeps)
        h = dt / substeps
        start = self.state.time
        for k in range(1, substeps + 1):
            motion = base(start + k * h) if callable(base) else base
            self.control.set_base_motion(self.model, motion)
            self.stats = step(
                self.model, self.data, self.state, self.control, h, self.settings, self._spare
            )
            self.state, self._spare = self._spare, self.state
        # Land exactly on the requested time despite the substeps' rounding.
        self.state.time = start + dt
        return self.stats

    def _kinematics(self) -> None:
        dynamics.forward_kinematics(
            self.model, self.data, self.state.q, self.state.base_rotation, self.state.base_position
        )

    def points(self) -> np.ndarray:
        """World positions (n_points, 3) of every strand's root and link tips, strand order, m."""
        self._kinematics()
        data, model = self.data, self.model
        links = self._point_link
        along = (self._point_is_tip * model.length[links]) * data.oR[:, 1, links]
        return model.backend.to_host(data.op[:, links] + along).T.astype(np.float64)

    def link_frames(self) -> tuple[np.ndarray, np.ndarray]:
        """World rotation (n_links, 3, 3) and joint position (n_links, 3) per link, strand order.

        The link's local y axis runs along its segment; x and z are its cross-section axes.
        """
        self._kinematics()
        to_host, order = self.model.backend.to_host, self._link_order
        rotation = to_host(self.data.oR[:, :, order]).transpose(2, 0, 1)
        position = to_host(self.data.op[:, order]).T
        return rotation.astype(np.float64), position.astype(np.float64)

    def energy(self) -> tuple[float, float]:
        """Kinetic and gravitational potential energy (J) of the current state."""
        kinetic, potential = dynamics.energy(
            self.model, self.data, self.state.q, self.state.w, self.control
        )
        to_host = self.model.backend.to_host
        return float(to_host(kinetic)), float(to_host(potential))
