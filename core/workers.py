"""Worker processes: groups of trees stepped at once, each in a Python process of its own.

Trees are independent and the implicit step treats each tree on its own
(:func:`.integrators.step_implicit`), so a large model can be split into groups of trees, each a
model of its own (:func:`.model.select_trees`), stepped side by side with the same result up to
rounding (NumPy's vectorised kernels may sum in another order on arrays of another length).
The groups run in processes rather than threads: the step is a few hundred NumPy calls per
depth level, each on a few hundred to a few thousand links, and a call holds the interpreter
lock for its overhead, so threads mostly wait for each other, where processes use the cores
(docs/performance.md).

Each worker is ``sys.executable`` (Blender's own Python inside Blender) running a short
bootstrap that reads everything else from its standard input; the two ends exchange pickled
messages over the worker's standard input and output (its prints go to standard error):

- the bootstrap (a tuple, read before the engine is imported): the parent's ``sys.path`` and
  the packages enclosing this one, so the worker imports the engine under the same name as the
  parent, also where that is a package Blender made up in memory (``bl_ext.<repository>`` for
  an extension);
- :class:`_Build`: the group's model, gravity, settings, and its obstacles and joint limits if
  any; the worker answers :class:`_Ready`;
- :class:`_Advance`: the group's joint state and the control fields that changed, the force
  fields, and the base motion, animated control fields and obstacles' motion at every substep's
  end (and start, with constraints), sampled once, in the parent (:class:`_Sample`); a
  subdivided step needs other times, which the worker asks the parent for
  (:class:`_SampleQuestion`) while it steps, and the parent answers whichever worker asks
  (:meth:`Workers._answers`). With strand interaction the message carries the group's share of
  it when it changed (:class:`.InteractionShare`), and at every substep's start the groups meet
  on one grid (:mod:`.interaction`): each worker sends the bounds of its links
  (:class:`_GridBounds`), and once every worker still stepping has, the parent answers each with
  the cell of the grid over them all (:class:`_GridCell`); each then sends its node sums over
  its window of that grid (:class:`_GridSums`), and is answered with every group's sums added
  over its window (:class:`_GridTotal`). The worker answers with its new joint state and
  statistics (:class:`_Done`) or the error that stopped it (:class:`_Failed`), and keeps its
  state, control and step memory for the next frame;
- :class:`_Rollback`: where any worker failed, every worker puts its group back as the
  advance found it, so that the next advance steps as if the failed one had never been made;
- :class:`_Abort`: where the parent abandons an advance (an interrupt, a base or animated
  callable that raises while a worker waits for its sample), every question a worker asks is
  answered with it, and a worker that gets it stops its step and goes back (answering
  :class:`_Failed`); those that finished go back on :class:`_Rollback`. An exchange that cannot
  be brought to that end (a worker that died, a message cut in half) ends the workers.

A worker that dies or cannot start is reported as a :class:`WorkerError` naming its exit status.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pickle
import selectors
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .constraints import ConstraintSolver, ConstraintStats, SolverSpec
from .dynamics import Data
from .errors import WorkerError
from .integrators import SolverSettings, StepStats
from .interaction import (
    Interaction,
    InteractionShare,
    InteractionStats,
    Lattice,
    add_windows,
    fitting_cell,
)
from .model import Model, select_trees
from .state import Control, State, StepMemory
from .stepping import (
    AdvanceRequest,
    Constrain,
    Stepper,
    StepSnapshot,
    fields_at_links,
    set_inputs,
)

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

if TYPE_CHECKING:
    from .base_motion import BaseMotion
    from .fields import ForceFields
    from .obstacles import ObstacleMotion

# Automatic splitting asks for at least this many links per depth level and process: two
# processes gain less the narrower the levels (docs/performance.md, *Worker processes*), and
# on two cores below 500 strands the gain does not repay a process's start (0.2-0.5 s, paid
# again whenever a preview restarts).
MIN_LEVEL_WIDTH_PER_WORKER = 250
# Automatic splitting uses at most this many processes. Each costs an interpreter with NumPy
# (about 40 MB and 0.2 s to start) and they share the memory bandwidth; more than two have not
# been measured.
MAX_AUTOMATIC_WORKERS = 8
# Pipe capacity asked for (Linux's default limit for a process without privileges).
PIPE_BYTES = 1 << 20

# What a worker process runs first. Ctrl-C in a terminal reaches every process of its group: the
# parent stops and ends its workers, so a worker ignores it rather than print a traceback of its
# own.
_BOOTSTRAP = """
import importlib, pickle, signal, sys, types
signal.signal(signal.SIGINT, signal.SIG_IGN)
paths, packages, module = pickle.load(sys.stdin.buffer)
sys.path[:] = paths
for name, path in packages:
    try:
        importlib.import_module(name)
    except ImportError:
        package = types.ModuleType(name)
        package.__path__ = path
        sys.modules[name] = package
importlib.import_module(module).serve(sys.stdin.buffer, sys.stdout.buffer)
"""


# A worker has a core of its own (``SolverSettings.workers`` counts cores), so the BLAS behind its
# NumPy runs one thread there: more would spin on the other workers' cores, and the dense
# per-tree solves (:class:`.dynamics.DenseTrees`) then take LAPACK's. Set in the workers'
# environment only, before NumPy loads; the host's own threads are left as they are.
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


# --- the messages -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Build:
    """Build a group: its model, gravity (3,), settings and what its constraint solver is made
    of (:meth:`.ConstraintSolver.spec_for`), if any."""

    model: Model
    gravity: Any
    settings: SolverSettings
    constraints: SolverSpec | None


@dataclass(frozen=True)
class _Ready:
    """The group is built."""


@dataclass(frozen=True, eq=False)
class _Sample:
    """What drives a group's step at one time: the base motion, the animated control fields
    (the group's share, by name) and the obstacles' motion (None without obstacles)."""

    base: BaseMotion
    updates: dict[str, Any]
    obstacle_motion: ObstacleMotion | None


@dataclass(frozen=True)
class _InteractionUpdate:
    """The group's strand interaction from now on (None: none)."""

    share: InteractionShare | None


@dataclass(frozen=True, eq=False)
class _Advance:
    """Step the group through ``substeps`` substeps of ``h`` from ``start``: its joint state
    ``q``, ``w``, the bases' pose, gravity, the per-link control fields replaced since the last
    advance (the group's links), the force fields, the samples at the substeps' ends (and
    starts, with constraints), whether to forget the step history (after a reset), and the
    interaction where it changed (None where it holds)."""

    q: Any
    w: Any
    base_rotation: Any
    base_position: Any
    start: float
    gravity: Any
    per_link: dict[str, Any]
    fields: ForceFields | None
    samples: dict[float, _Sample]
    h: float
    substeps: int
    forget: bool
    interaction: _InteractionUpdate | None


@dataclass(frozen=True)
class _SampleQuestion:
    """The worker needs the sample at ``time`` (a subdivided step's half)."""

    time: float


@dataclass(frozen=True, eq=False)
class _SampleAnswer:
    sample: _Sample


@dataclass(frozen=True, eq=False)
class _GridBounds:
    """The group's links lie within ``bounds`` (2, 3); ``cell`` is the cell asked for."""

    bounds: np.ndarray
    cell: float


@dataclass(frozen=True)
class _GridCell:
    """The cell of the grid over every group's links."""

    cell: float


@dataclass(frozen=True, eq=False)
class _GridSums:
    """The group's node sums (k, nodes) over its window ``lattice`` of the common lattice."""

    lattice: Lattice
    sums: np.ndarray


@dataclass(frozen=True, eq=False)
class _GridTotal:
    """Every group's node sums over the asking group's window (k, nodes)."""

    total: np.ndarray


@dataclass(frozen=True, eq=False)
class _Done:
    """The group's joint state after an advance, the statistics of its last substep, the force
    fields' values it filled in (by name) and its constraint and interaction statistics."""

    q: Any
    w: Any
    stats: StepStats
    field_values: dict[str, Any]
    constraint_stats: ConstraintStats
    interaction_stats: InteractionStats


@dataclass(frozen=True, eq=False)
class _Failed:
    """The error that stopped the worker (its group is back as the advance found it)."""

    error: Exception


@dataclass(frozen=True)
class _Rollback:
    """Put the group back as the last advance found it."""


@dataclass(frozen=True)
class _Abort:
    """The answer to a worker's question where the advance is abandoned (an interrupt, a sample
    that could not be taken): the worker stops stepping and goes back."""


class _Aborted(Exception):
    """A worker's advance abandoned by the parent (:class:`_Abort`)."""


def worker_count(model: Model, settings: SolverSettings) -> int:
    """How many processes ``model`` is stepped in under ``settings``.

    ``settings.workers`` if given (at most one per tree); otherwise, on the NumPy backend, one
    per processor core up to :data:`MAX_AUTOMATIC_WORKERS`, as long as the depth levels hold on
    average at least :data:`MIN_LEVEL_WIDTH_PER_WORKER` links per process; one elsewhere (a GPU
    runs one stream).
    """
    if settings.workers is not None:
        return max(1, min(int(settings.workers), model.n_trees))
    if model.backend.name != "numpy":
        return 1
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    width = model.n_links // model.n_levels
    return max(
        1,
        min(cores, MAX_AUTOMATIC_WORKERS, width // MIN_LEVEL_WIDTH_PER_WORKER, model.n_trees),
    )


def tree_groups(model: Model, count: int) -> list[np.ndarray]:
    """``count`` groups of tree indices with about equal numbers of links, each a slab of space
    (each sorted): the trees in the order of their rest centres along the axis the centres
    spread most, each group taking them until its links pass its share (a tree joining the
    group its middle link falls in), every group at least one tree. Groups near in space share
    little of the strand interaction's grid (each sends and receives its own window of it,
    :mod:`.interaction`); without interaction trees are independent and any grouping steps
    them alike."""
    link_tree = model.host_link_tree
    sizes = np.bincount(link_tree, minlength=model.n_trees)
    point_tree = link_tree[model.point_link]
    points = np.bincount(point_tree, minlength=model.n_trees)
    centres = (
        np.stack(
            [
                np.bincount(point_tree, weights=model.rest_points[:, axis], minlength=model.n_trees)
                for axis in range(3)
            ],
            axis=1,
        )
        / points[:, None]
    )
    axis = int(np.argmax(np.ptp(centres, axis=0)))
    order = np.argsort(centres[:, axis], kind="stable")
    share = sizes.sum() / count
    groups: list[list[int]] = [[]]
    taken = 0
    for position, tree in enumerate(order):
        full = taken + 0.5 * sizes[tree] > len(groups) * share
        # The trees left must still give every group after this one a tree of its own.
        needed = model.n_trees - position <= count - len(groups)
        if groups[-1] and len(groups) < count and (full or needed):
            groups.append([])
        groups[-1].append(int(tree))
        taken += sizes[tree]
    return [np.sort(np.asarray(group, dtype=np.int64)) for group in groups]


class Workers:
    """The worker processes of a :class:`.Simulation`, one per group of trees.

    Parameters
    ----------
    model : Model
        On the NumPy backend.
    count : int
        Number of processes (groups of trees, :func:`tree_groups`), at least 2.
    control : Control
        The simulation's, as :meth:`.Control.from_model` made it: every worker starts from the
        same (its gravity included), so its per-link fields need not travel until they are
        replaced.
    settings : SolverSettings
    constraints : ConstraintSolver, optional
        Its obstacles, joint limits and settings are given to every worker for its trees
        (animated constraints, :meth:`.Simulation.add_constraint`, are not stepped in workers).

    Notes
    -----
    A worker keeps the per-link control fields it was sent and is sent a field again only when
    the control's :meth:`~.Control.revision` of it has moved on (the field was set again, as
    :meth:`.Simulation.set_parameter`, ``set_pose`` and the animated samples do): a field changed
    in place, behind the simulation's back, would not reach the workers. The strand interaction's
    share travels when the interaction's revision differs from the one last sent.
    """

    def __init__(
        self,
        model: Model,
        count: int,
        control: Control,
        settings: SolverSettings,
        constraints: ConstraintSolver | None = None,
    ) -> None:
        if constraints is not None and constraints.bilateral:
            raise WorkerError(
                "worker processes do not step animated constraints (add_constraint); step in "
                "one process"
            )
        if model.backend.name != "numpy":
            raise WorkerError(
                f"worker processes step models on the NumPy backend only, not "
                f"{model.backend.name!r}; set SolverSettings.workers to 1"
            )
        self._model = model
        self._workers: list[_Worker] = []
        gravity = control.gravity[:, 0]
        try:
            for trees in tree_groups(model, count):
                self._workers.append(
                    _Worker.build(len(self._workers), model, trees, gravity, settings, constraints)
                )
            # The processes start side by side: each answers once it has imported the engine.
            for worker in self._workers:
                worker.expect(_Ready)
        except BaseException:
            self.close()
            raise
        self._clear_predictors = False
        self._constrained = constraints is not None
        # The revisions of the control's per-link fields and of the strand interaction (None:
        # none) that the workers last had.
        self._sent_control = {name: control.revision(name) for name in Control.PER_LINK}
        self._sent_interaction: int | None = None
        # Nodes of the last grid the groups met on.
        self._grid_nodes = 0

    def __len__(self) -> int:
        return len(self._workers)

    @property
    def closed(self) -> bool:
        """Whether the processes have ended (:meth:`close`, or an exchange cut short)."""
        return not self._workers

    def forget(self) -> None:
        """Let every worker's next step start from the current velocities, and its constraints
        from nothing (after a reset)."""
        self._clear_predictors = True

    @property
    def processes(self) -> int:
        """How many processes step the model."""
        return len(self._workers)

    # The workers hold their groups' step memory.
    memory = None

    def advance(self, request: AdvanceRequest) -> tuple[State, StepStats]:
        """Step every group through the request's substeps, from its state (the whole model's)
        under its control and inputs; writes the new joint state into the request's state and
        returns it with the statistics of the last substep over all workers (the constraint
        solver and the interaction take theirs). The control is left as the last substep saw
        it: its inputs and, with force fields, the air velocity and forces the workers filled
        in. With constraints the obstacles' motion is sampled at every substep's start and the
        last held from then on, as in one process; with an interaction (the whole model's) the
        groups interact on one grid.

        If any worker fails, every worker puts its group back as this call found it and the
        state is left as it was: the first error is raised once every worker has answered, and
        the next call steps as if this one had never been made.
        """
        state, control, inputs, h, times = (
            request.state,
            request.control,
            request.inputs,
            request.h,
            request.times,
        )
        fields, interaction, constraints = request.fields, request.interaction, request.constraints
        obstacle_motion: Callable[[float], ObstacleMotion] | None = None
        if constraints is not None and constraints.obstacles is not None:
            held = (
                request.obstacle_motion
                if request.obstacle_motion is not None
                else constraints.obstacle_motion
            )
            obstacle_motion = held if callable(held) else (lambda t: held)
        start = state.time
        forget, self._clear_predictors = self._clear_predictors, False

        def sample(t: float) -> _Sample:
            motion, updates = inputs(t)
            return _Sample(motion, updates, None if obstacle_motion is None else obstacle_motion(t))

        # Constraints also look at the base and the obstacles at every substep's start, which
        # the steps compute as their end minus h (not always bit for bit the last end).
        starts = [t - h for t in times] if self._constrained else []
        samples = {t: sample(t) for t in starts + times}
        # Only the control fields replaced since the last advance travel (see the class notes).
        revisions = {name: control.revision(name) for name in Control.PER_LINK}
        changed = {
            name: getattr(control, name)
            for name in Control.PER_LINK
            if revisions[name] != self._sent_control[name]
        }
        interaction_revision = None if interaction is None else interaction.revision
        renewed = interaction_revision != self._sent_interaction
        try:
            for worker in self._workers:
                links = worker.links
                worker.send(
                    _Advance(
                        q=state.q[:, links],
                        w=state.w[:, links],
                        base_rotation=state.base_rotation,
                        base_position=state.base_position,
                        start=start,
                        gravity=control.gravity,
                        per_link={
                            name: None if value is None else value[..., links]
                            for name, value in changed.items()
                        },
                        fields=fields,
                        samples={t: worker.share(sample) for t, sample in samples.items()},
                        h=h,
                        substeps=len(times),
                        forget=forget,
                        interaction=_InteractionUpdate(
                            None if interaction is None else interaction.share(links)
                        )
                        if renewed
                        else None,
                    )
                )
        except BaseException:
            # Sent to some workers and not to others, or cut in half: they cannot go on.
            self.close()
            raise
        try:
            # On an exception here every worker is back as this call found it (or ended).
            replies = self._answers(sample)
        except BaseException:
            self._clear_predictors = forget
            raise
        failure = next((reply.error for reply in replies if isinstance(reply, _Failed)), None)
        if failure is not None:
            self._clear_predictors = forget
            try:
                # The failed workers are back already; the others go back too.
                for worker, reply in zip(self._workers, replies, strict=True):
                    if isinstance(reply, _Done):
                        worker.send(_Rollback())
            except BaseException:
                self.close()
                raise
            raise failure
        self._sent_control = revisions
        self._sent_interaction = interaction_revision
        for worker, reply in zip(self._workers, replies, strict=True):
            state.q[:, worker.links] = reply.q
            state.w[:, worker.links] = reply.w
            for name, value in reply.field_values.items():
                getattr(control, name)[..., worker.links] = value
        if constraints is not None:
            constraints.stats = ConstraintStats.combined(
                [reply.constraint_stats for reply in replies]
            )
            if obstacle_motion is not None:
                constraints.set_obstacle_motion(obstacle_motion(times[-1] - h))
        if interaction is not None:
            interaction.stats = InteractionStats.combined(
                [reply.interaction_stats for reply in replies], self._grid_nodes
            )
        # The control is left as the last substep saw it, whatever was sampled in between (the
        # force fields excepted: the workers' last values were stored above).
        set_inputs(self._model, control, inputs, times[-1])
        state.base_rotation[...] = control.base_rotation
        state.base_position[...] = control.base_position
        return state, StepStats.combined([reply.stats for reply in replies])

    def _answers(self, sample: Callable[[float], _Sample]) -> list[_Done | _Failed]:
        """Every worker's answer to an :class:`_Advance`, in worker order, serving the samples
        they ask for as they ask, and the grid they meet on once every worker still stepping
        has asked (one worker at a time on Windows, whose pipes cannot be waited on together:
        there a worker's question waits until the workers before it have answered or reached
        the grid). Where anything raises meanwhile, every worker is brought back as the advance
        found it (:meth:`_abandon`) before the exception goes on."""
        answers: dict[int, _Done | _Failed] = {}
        # The grid's questions of the workers waiting for the others.
        waiting: dict[int, _GridBounds | _GridSums] = {}

        def take(worker: _Worker, reply: Any) -> None:
            if isinstance(reply, _SampleQuestion):
                worker.send(_SampleAnswer(worker.share(sample(reply.time))))
                return
            if isinstance(reply, _GridBounds | _GridSums):
                waiting[worker.number] = reply
            elif isinstance(reply, _Done | _Failed):
                answers[worker.number] = reply
            else:
                raise WorkerError(
                    f"worker process {worker.number} answered {type(reply).__name__} to an advance"
                )
            if waiting and len(waiting) + len(answers) == len(self._workers):
                self._meet(waiting)

        try:
            if sys.platform == "win32":
                while len(answers) < len(self._workers):
                    for worker in self._workers:
                        while worker.number not in answers and worker.number not in waiting:
                            take(worker, worker.receive())
            else:
                self._select_answers(take, answers)
        except BaseException:
            self._abandon()
            raise
        return [answers[worker.number] for worker in self._workers]

    def _select_answers(self, take: Callable[[_Worker, Any], None], answers: dict) -> None:
        """Hand every message of the workers to ``take`` as it comes, until each has answered
        (in ``answers``)."""
        with selectors.DefaultSelector() as selector:
            for worker in self._workers:
                selector.register(worker.answers, selectors.EVENT_READ, worker)
            while len(answers) < len(self._workers):
                for key, _ in selector.select():
                    worker = key.data
                    # A worker has one message under way at most: it waits for the answer to
                    # a question, and its reply is its last, so a whole message is there to read.
                    take(worker, worker.receive())
                    if worker.number in answers:
                        selector.unregister(key.fileobj)

    def _abandon(self) -> None:
        """Bring every worker back as the advance found it, after an exception while they
        stepped. Each worker's last message (:class:`_Worker`) says where it stands: one that
        finished goes back on :class:`_Rollback`; a question it asked, unanswered or asked from
        now on, is answered :class:`_Abort`; one owed an answer is waited for. Where the
        exchange cannot be brought to that end (a message half sent or half read, a worker that
        died, another interrupt meanwhile) the workers end."""
        try:
            if any(worker.mid_message for worker in self._workers):
                raise WorkerError("a message to or from a worker process was cut in half")
            for worker in self._workers:
                while True:
                    if worker.owed:
                        worker.receive()
                    if isinstance(worker.last, _Done | _Failed):
                        break
                    worker.send(_Abort())
                if isinstance(worker.last, _Done):
                    worker.send(_Rollback())
        except BaseException:
            self.close()

    def _meet(self, questions: dict[int, _GridBounds | _GridSums]) -> None:
        """Answer the grid ``questions`` of the workers still stepping (worker number to
        question), all asked at the same substep, each taken out of ``questions`` once
        answered."""
        kinds = {type(question).__name__ for question in questions.values()}
        if len(kinds) != 1:
            raise WorkerError(f"worker processes out of step on the strand grid: {sorted(kinds)}")
        numbers = sorted(questions)
        first = questions[numbers[0]]
        if isinstance(first, _GridBounds):
            bounds = np.array([questions[number].bounds for number in numbers])
            union = np.stack((bounds[:, 0].min(axis=0), bounds[:, 1].max(axis=0)))
            answer = _GridCell(fitting_cell(union, first.cell))
            for number in numbers:
                self._workers[number].send(answer)
                del questions[number]
            return
        union, totals = add_windows(
            [(questions[number].lattice, questions[number].sums) for number in numbers]
        )
        self._grid_nodes = union.nodes
        for number, total in zip(numbers, totals, strict=True):
            self._workers[number].send(_GridTotal(total))
            del questions[number]

    def close(self) -> None:
        """End every worker process (waiting a little for each to finish on its own)."""
        for worker in self._workers:
            worker.close()
        self._workers = []


class _Worker:
    """One worker process and the whole model's links (host indices) that its group holds.

    Where the exchange stands, for an advance abandoned midway (:meth:`Workers._abandon`):
    ``last`` is the last message received from the worker, ``owed`` whether a message was sent
    to it since (so that it owes an answer), and ``mid_message`` whether a message is half sent
    or half read (an exception, such as an interrupt, inside the transfer): then the pipes can
    no longer be trusted."""

    def __init__(self, number: int, links: np.ndarray) -> None:
        self.number, self.links = number, links
        self.last: Any = None
        self.owed = False
        self.mid_message = False
        executable = sys.executable
        if not executable:
            raise WorkerError(
                "worker processes need a Python executable, and sys.executable is empty here; "
                "set SolverSettings.workers to 1"
            )
        try:
            self._process = subprocess.Popen(
                [executable, "-c", _BOOTSTRAP],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, **ONE_THREAD},
                # On Windows, no console window pops up for each worker of Blender's interface.
                creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),
            )
        except OSError as error:
            raise WorkerError(
                f"could not start a worker process with {executable}: {error}"
            ) from error
        _widen_pipes(self._process)
        self.send((list(sys.path), _enclosing_packages(), __name__))

    @classmethod
    def build(
        cls,
        number: int,
        model: Model,
        trees: np.ndarray,
        gravity: Any,
        settings: SolverSettings,
        constraints: ConstraintSolver | None,
    ) -> _Worker:
        """A worker process sent the model of ``model``'s ``trees`` to step (``build``). The
        model of the group lives only until it is sent, so the groups' models are not all in
        this process at once."""
        part, links = select_trees(model, trees)
        worker = cls(number, links)
        try:
            solver = None if constraints is None else constraints.spec_for(part, links)
            worker.send(_Build(part, gravity, settings, solver))
        except BaseException:
            worker.close()
            raise
        return worker

    def share(self, sample: _Sample) -> _Sample:
        """This group's part of a ``sample``: the per-link control fields at its links."""
        return _Sample(
            sample.base, fields_at_links(sample.updates, self.links), sample.obstacle_motion
        )

    def send(self, message: Any) -> None:
        self.mid_message = True
        try:
            pickle.dump(message, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise self._exited() from error
        self.mid_message, self.owed = False, True

    def receive(self) -> Any:
        self.mid_message = True
        try:
            message = pickle.load(self._process.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as error:
            raise self._exited() from error
        self.mid_message, self.owed, self.last = False, False, message
        return message

    def expect(self, kind: type) -> Any:
        """The worker's next message, a ``kind``; the error it reports instead is raised."""
        reply = self.receive()
        if isinstance(reply, _Failed):
            raise reply.error
        if not isinstance(reply, kind):
            raise WorkerError(
                f"worker process {self.number} answered {type(reply).__name__}, not {kind.__name__}"
            )
        return reply

    @property
    def answers(self) -> IO[bytes]:
        """The pipe the worker answers on."""
        return self._process.stdout

    def close(self) -> None:
        process = self._process
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def _exited(self) -> WorkerError:
        try:
            status = self._process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self._process.kill()
            status = "killed: it stopped answering"
        return WorkerError(
            f"worker process {self.number} ({sys.executable}) exited with status {status} "
            "while stepping its strands (its messages are on standard error); set "
            "SolverSettings.workers to 1 to step in this process"
        )


def _widen_pipes(process: subprocess.Popen) -> None:
    """Let each pipe hold a whole message of a few hundred thousand links (Linux): the writer
    then moves on without waiting for the reader to take it in 64 KiB pieces."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is None:
        return
    for pipe in (process.stdin, process.stdout):
        try:
            fcntl.fcntl(pipe.fileno(), set_size, PIPE_BYTES)
        except OSError:  # above the system's limit (/proc/sys/fs/pipe-max-size): keep the default
            pass


def _enclosing_packages() -> list[tuple[str, list[str]]]:
    """The packages enclosing this engine, outermost first, with their module search paths."""
    names = __name__.split(".")[:-1]
    packages = []
    for depth in range(1, len(names) + 1):
        name = ".".join(names[:depth])
        packages.append((name, list(getattr(sys.modules[name], "__path__", None) or [])))
    return packages


# --- the worker's side ----------------------------------------------------------------------


@dataclass(eq=False)
class _Group:
    """What a worker holds between messages: its model, workspace, step memory, state, control
    and strand interaction, and how the last advance found them (``before``, its interaction
    ``interaction_before``), to go back to."""

    model: Model
    data: Data
    memory: StepMemory
    state: State
    spare: State
    control: Control
    settings: SolverSettings
    constraints: ConstraintSolver | None
    interaction: Interaction | None = None
    before: StepSnapshot | None = None
    interaction_before: Interaction | None = None

    def remember(self) -> None:
        """Record the group as an advance finds it."""
        self.before = StepSnapshot.of(
            self.state, self.memory, self.control, self.constraints, self.interaction
        )
        self.interaction_before = self.interaction

    def go_back(self) -> None:
        """Put the group back as the last advance found it."""
        self.interaction = self.interaction_before
        self.state = self.before.restore(
            self.memory, self.control, self.constraints, self.interaction
        )


@dataclass(eq=False)
class _SharedGrid:
    """A worker's way to the grid its group shares with the other workers' (through the
    parent, :meth:`Workers._meet`)."""

    source: IO[bytes]
    send: Callable[[Any], None]

    def cell(self, bounds: np.ndarray, cell: float) -> float:
        self.send(_GridBounds(bounds, cell))
        return self._answer(_GridCell).cell

    def total(self, lattice: Lattice, sums: Any) -> Any:
        self.send(_GridSums(lattice, sums))
        return self._answer(_GridTotal).total

    def _answer(self, kind: type) -> Any:
        answer = pickle.load(self.source)
        if isinstance(answer, _Abort):
            raise _Aborted("the parent abandoned the advance")
        if not isinstance(answer, kind):
            raise WorkerError(
                f"a worker process waiting for {kind.__name__} got {type(answer).__name__}"
            )
        return answer


def keep_freed_memory() -> bool:
    """Ask glibc to serve and keep a worker's temporaries on the heap instead of mmap.

    The step's NumPy temporaries are a few hundred kilobytes each, above glibc's mmap threshold,
    so each would be mapped, page-faulted in and unmapped again (``docs/performance.md``).
    Raising the mmap and trim thresholds (to glibc's maximum of 32 MiB) lets freed blocks be
    reused. The setting is process-wide, so it is made only in the engine's own worker
    processes, never in the process that hosts the engine (Blender's). A no-op where the C
    library is not glibc; returns whether it applied.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    limit = 32 * 1024 * 1024
    return bool(mallopt(m_mmap_threshold, limit)) and bool(mallopt(m_trim_threshold, 2 * limit))


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """The worker's loop: answer the parent's messages on ``source`` on ``sink`` until the
    parent closes ``source``."""
    # Prints (a warning from NumPy, a debugging line) must not land in the message stream.
    sys.stdout = sys.stderr
    keep_freed_memory()

    def send(message: Any) -> None:
        pickle.dump(message, sink, protocol=pickle.HIGHEST_PROTOCOL)
        sink.flush()

    group = None
    while True:
        try:
            message = pickle.load(source)
        except EOFError:
            return
        try:
            if isinstance(message, _Build):
                model = message.model
                state = State.at_rest(model)
                solver = None
                if message.constraints is not None:
                    solver = message.constraints.solver(model)
                group = _Group(
                    model,
                    Data.for_model(model),
                    StepMemory.for_model(model),
                    state,
                    state.copy(),
                    Control.from_model(model, message.gravity),
                    message.settings,
                    solver,
                )
                send(_Ready())
            elif isinstance(message, _Advance):
                group.remember()
                try:
                    send(_advance(group, message, source, send))
                except BaseException:
                    group.go_back()
                    raise
            elif isinstance(message, _Rollback):
                group.go_back()
            else:
                raise WorkerError(
                    f"a worker process got an unknown message {type(message).__name__}"
                )
        except Exception as error:  # every failure goes back to the parent
            send(_Failed(_transferable(error)))


def _advance(group: _Group, message: _Advance, source: IO[bytes], send: Callable) -> _Done:
    """Take the substeps of one :class:`_Advance`; the :class:`_Done` answer."""
    model, state, control = group.model, group.state, group.control
    if message.interaction is not None:
        share = message.interaction.share
        if share is None:
            # The parent's control holds no interaction forces to send: its workers set them.
            group.interaction = None
            control.set_interaction(None, None, None)
        else:
            group.interaction = Interaction.from_share(model, share, _SharedGrid(source, send))
    state.q[...], state.w[...] = message.q, message.w
    state.base_rotation[...] = message.base_rotation
    state.base_position[...] = message.base_position
    state.time = message.start
    control.gravity = message.gravity
    for name, value in message.per_link.items():
        setattr(control, name, value)
    solver = group.constraints
    if message.forget:
        group.memory.forget()
        state.previous = None
        if solver is not None:
            solver.reset()
    samples = message.samples

    def sample(time: float) -> _Sample:
        if time not in samples:
            send(_SampleQuestion(time))
            answer = pickle.load(source)
            if isinstance(answer, _Abort):
                raise _Aborted("the parent abandoned the advance")
            if not isinstance(answer, _SampleAnswer):
                raise WorkerError(
                    f"a worker process waiting for a sample got {type(answer).__name__}"
                )
            samples[time] = answer.sample
        return samples[time]

    def obstacle_motion(time: float) -> ObstacleMotion:
        return sample(time).obstacle_motion

    constrain = None
    if solver is not None:
        constrain = Constrain(
            model,
            group.data,
            group.memory,
            control,
            solver,
            lambda time: sample(time).base,
            None if solver.obstacles is None else obstacle_motion,
        )

    def inputs(time: float) -> tuple[BaseMotion, dict[str, Any]]:
        taken = sample(time)
        return taken.base, taken.updates

    stepper = Stepper(
        model,
        group.data,
        group.memory,
        control,
        inputs,
        message.fields,
        group.settings,
        constrain,
        group.interaction,
    )
    group.state, group.spare, stats = stepper.advance(
        (state, group.spare), message.start, message.h, message.substeps
    )
    filled = () if message.fields is None else Control.FILLED_IN_PLACE
    return _Done(
        group.state.q,
        group.state.w,
        stats,
        {name: getattr(control, name) for name in filled},
        ConstraintStats() if solver is None else solver.stats,
        InteractionStats() if group.interaction is None else group.interaction.stats,
    )


def _transferable(error: Exception) -> Exception:
    """``error`` if it survives pickling, else a :class:`WorkerError` with its description."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # any failure to pickle: describe it instead
        return WorkerError(f"a worker process failed: {type(error).__name__}: {error}")
    return error
