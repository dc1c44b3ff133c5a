"""Worker processes: groups of trees stepped at once, each in a Python process of its own.

Trees are independent and the implicit step treats each tree on its own
(:func:`.integrators.step_implicit`), so a large model can be split into groups of trees, each a
model of its own (:func:`.model.select_trees`), stepped side by side with the same result up to
rounding (NumPy's vectorised kernels may sum in another order on arrays of another length).
The groups run in processes rather than threads: the step is a few hundred NumPy calls per
depth level, each on a few hundred to a few thousand links, and a call holds the interpreter
lock for its overhead, so threads mostly waited for each other (two threads were 15-25 % slower
than one on 1,000 strands of 25 links; two processes are 1.5 times faster, docs/performance.md).

Each worker is ``sys.executable`` (Blender's own Python inside Blender) running a short
bootstrap that reads everything else from its standard input; the two ends exchange pickled
messages over the worker's standard input and output (its prints go to standard error):

- the bootstrap: the parent's ``sys.path`` and the packages enclosing this one, so the worker
  imports the engine under the same name as the parent, also where that is a package Blender
  made up in memory (``bl_ext.<repository>`` for an extension);
- ``build``: the group's model, gravity, settings, and its obstacles and joint limits if any;
  the worker answers ``ready``;
- ``advance``: the group's joint state and the control fields that changed, the force fields,
  and the base motion, animated control fields and obstacles' motion at every substep's end
  (and start, with constraints), sampled once, in the parent; a subdivided step needs other
  times, which the worker asks the parent for (``sample``) while it steps, and the parent
  answers whichever worker asks (:meth:`Workers._answers`). With strand interaction the
  message carries the group's share of it when it changed (:class:`.InteractionShare`), and at
  every substep's start the groups meet on one grid (:mod:`.interaction`): each worker sends the
  bounds of its links (``grid_bounds``), and once every worker still stepping has, the parent
  answers each with the cell of the grid over them all (``grid_cell``); each then sends its node
  sums over its window of that grid (``grid_sums``), and is answered with every group's sums
  added over its window (``grid_total``). The worker answers
  with its new joint state and statistics (``done``) or the error that stopped it
  (``error``), and keeps its state, control and Newton predictor for the next frame.

A worker that dies or cannot start is reported as a :class:`WorkerError` naming its exit status.
"""

from __future__ import annotations

import os
import pickle
import selectors
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .constraints import ConstraintSolver, ConstraintStats
from .dynamics import Data
from .errors import WorkerError
from .integrators import SolverSettings, StepStats
from .interaction import (
    Interaction,
    InteractionStats,
    Lattice,
    add_windows,
    fitting_cell,
)
from .model import Model, select_trees
from .state import Control, State, StepMemory
from .stepping import Constrain, Stepper, fields_at_links

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

if TYPE_CHECKING:
    from .base_motion import BaseMotion
    from .fields import ForceFields
    from .obstacles import ObstacleMotion

# Automatic splitting asks for at least this many links per depth level and process. Two
# processes against one, measured here on 25-link strands: 1,000 strands 1.4-1.6x, 500 strands
# 1.3-1.4x, 250 strands 1.15-1.25x (docs/performance.md); below 500 strands the gain does not
# repay a process's start (0.2-0.5 s, paid again whenever a preview restarts).
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
    link_tree = model.backend.to_host(model.link_tree)
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
    the control holds another array for it (as :meth:`.Simulation.set_parameter`, ``set_pose``
    and the animated samples give): a field changed in place, behind the simulation's back,
    would not reach the workers.
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
        self._workers: list[_Worker] = []
        gravity = control.gravity[:, 0]
        try:
            for trees in tree_groups(model, count):
                self._workers.append(
                    _Worker.build(len(self._workers), model, trees, gravity, settings, constraints)
                )
            # The processes start side by side: each answers once it has imported the engine.
            for worker in self._workers:
                worker.expect("ready")
        except BaseException:
            self.close()
            raise
        self._clear_predictors = False
        self._constrained = constraints is not None
        self._sent_control = {name: getattr(control, name) for name in Control.PER_LINK}
        # The strand interaction and its settings as the workers last had them.
        self._sent_interaction: tuple[Interaction | None, Any] = (None, None)
        # Nodes of the last grid the groups met on.
        self._grid_nodes = 0

    def __len__(self) -> int:
        return len(self._workers)

    @property
    def closed(self) -> bool:
        """Whether the processes have ended (:meth:`close`, or an exchange cut short)."""
        return not self._workers

    def clear_predictors(self) -> None:
        """Let every worker's next step start from the current velocities, and its constraints
        from nothing (after a reset)."""
        self._clear_predictors = True

    def advance(
        self,
        state: State,
        control: Control,
        inputs: Callable[[float], tuple[BaseMotion, dict[str, Any]]],
        fields: ForceFields | None,
        h: float,
        times: list[float],
        obstacle_motion: Callable[[float], ObstacleMotion] | None = None,
        interaction: Interaction | None = None,
    ) -> tuple[StepStats, ConstraintStats, InteractionStats]:
        """Step every group through substeps of ``h`` ending at ``times``, from ``state`` (the
        whole model's) under ``control`` and ``inputs``; writes the new joint state into
        ``state`` and, with ``fields``, the air velocity and forces of the last substep into
        ``control``. With constraints, ``obstacle_motion(t)`` gives the obstacles' motion at a
        substep's start; with ``interaction`` (the whole model's) the groups interact on one
        grid. Returns the statistics of the last substep, over all workers.

        ``state`` is left as it was if any worker fails: the first error is raised once every
        worker has answered.
        """
        start = state.time
        clear, self._clear_predictors = self._clear_predictors, False

        def sample(t: float) -> tuple:
            motion, updates = inputs(t)
            return motion, updates, None if obstacle_motion is None else obstacle_motion(t)

        # Constraints also look at the base and the obstacles at every substep's start, which
        # the steps compute as their end minus h (not always bit for bit the last end).
        starts = [t - h for t in times] if self._constrained else []
        samples = {t: sample(t) for t in starts + times}
        # Only the control fields replaced since the last advance travel (see the class notes).
        changed = {
            name: value
            for name in Control.PER_LINK
            for value in (getattr(control, name),)
            if self._sent_control[name] is not value
        }
        settings = None if interaction is None else interaction.settings
        sent, sent_settings = self._sent_interaction
        # (share,) where the group's interaction changed, None where it holds.
        renewed = interaction is not sent or settings is not sent_settings
        try:
            for worker in self._workers:
                links = worker.links
                per_link = {
                    name: None if value is None else value[..., links]
                    for name, value in changed.items()
                }
                worker.send(
                    (
                        "advance",
                        state.q[:, links],
                        state.w[:, links],
                        state.base_rotation,
                        state.base_position,
                        start,
                        control.gravity,
                        per_link,
                        fields,
                        {t: worker.share(sample) for t, sample in samples.items()},
                        h,
                        len(times),
                        clear,
                        (None if interaction is None else interaction.share(links),)
                        if renewed
                        else None,
                    )
                )
            replies = self._answers(sample)
        except BaseException:
            # An exchange cut short (an interrupt, a sample that failed, a dead worker) leaves
            # messages in the pipes: these workers cannot go on.
            self.close()
            raise
        self._sent_control.update(changed)
        self._sent_interaction = (interaction, settings)
        failure = next((reply[1] for reply in replies if reply[0] == "error"), None)
        if failure is not None:
            raise failure
        results, constraint_stats, interacted_stats = [], [], []
        for worker, (_, q, w, stats, field_values, constrained, interacted) in zip(
            self._workers, replies, strict=True
        ):
            state.q[:, worker.links] = q
            state.w[:, worker.links] = w
            for name, value in field_values.items():
                getattr(control, name)[..., worker.links] = value
            results.append(stats)
            constraint_stats.append(constrained)
            interacted_stats.append(interacted)
        fallbacks = sorted(
            (fallback for result in results for fallback in result.fallbacks),
            key=lambda fallback: (fallback.time, fallback.strand),
        )
        return (
            StepStats(
                max(result.iterations for result in results),
                # NaN where any group's is (not computed), as np.max has it.
                float(np.max([result.residual_norm for result in results])),
                max(result.largest_update for result in results),
                sum(result.subdivisions for result in results),
                tuple(fallbacks),
                sum(result.second_order_trees for result in results),
            ),
            ConstraintStats(
                max(result.largest_problem for result in constraint_stats),
                sum(result.contacts for result in constraint_stats),
                sum(result.limit_rows for result in constraint_stats),
                sum(result.bilateral_rows for result in constraint_stats),
            ),
            InteractionStats(
                self._grid_nodes if any(result.cells for result in interacted_stats) else 0,
                max(result.peak_density_ratio for result in interacted_stats),
            ),
        )

    def _answers(self, sample: Callable[[float], tuple]) -> list[tuple]:
        """Every worker's answer to an ``advance``, in worker order, serving the samples they
        ask for as they ask, and the grid they meet on once every worker still stepping has
        asked (one worker at a time on Windows, whose pipes cannot be waited on together:
        there a worker's question waits until the workers before it have answered or reached
        the grid)."""
        answers: dict[int, tuple] = {}
        # The grid questions of the workers waiting for the others.
        waiting: dict[int, tuple] = {}

        def take(worker: _Worker, reply: tuple) -> None:
            if reply[0] in GRID_QUESTIONS:
                waiting[worker.number] = reply
            else:
                answers[worker.number] = reply
            if waiting and len(waiting) + len(answers) == len(self._workers):
                self._meet(waiting)
                waiting.clear()

        if sys.platform == "win32":
            while len(answers) < len(self._workers):
                for worker in self._workers:
                    if worker.number not in answers and worker.number not in waiting:
                        take(worker, worker.finish(sample))
            return [answers[worker.number] for worker in self._workers]
        with selectors.DefaultSelector() as selector:
            for worker in self._workers:
                selector.register(worker.answers, selectors.EVENT_READ, worker)
            while len(answers) < len(self._workers):
                for key, _ in selector.select():
                    worker = key.data
                    # A worker has one message under way at most: it waits for the answer to
                    # a question, and its reply is its last, so a whole message is there to read.
                    reply = worker.receive()
                    if reply[0] == "sample":
                        worker.answer(sample, reply[1])
                        continue
                    take(worker, reply)
                    if worker.number in answers:
                        selector.unregister(key.fileobj)
        return [answers[worker.number] for worker in self._workers]

    def _meet(self, questions: dict[int, tuple]) -> None:
        """Answer the grid ``questions`` of the workers still stepping (worker number to
        question), all asked at the same substep."""
        kinds = {question[0] for question in questions.values()}
        if len(kinds) != 1:
            raise WorkerError(f"worker processes out of step on the strand grid: {sorted(kinds)}")
        numbers = sorted(questions)
        if kinds == {"grid_bounds"}:
            bounds = np.array([questions[number][1] for number in numbers])
            union = np.stack((bounds[:, 0].min(axis=0), bounds[:, 1].max(axis=0)))
            cell = fitting_cell(union, questions[numbers[0]][2])
            for number in numbers:
                self._workers[number].send(("grid_cell", cell))
            return
        union, totals = add_windows([questions[number][1:] for number in numbers])
        self._grid_nodes = union.nodes
        for number, total in zip(numbers, totals, strict=True):
            self._workers[number].send(("grid_total", total))

    def close(self) -> None:
        """End every worker process (waiting a little for each to finish on its own)."""
        for worker in self._workers:
            worker.close()
        self._workers = []


class _Worker:
    """One worker process and the whole model's links (host indices) that its group holds."""

    def __init__(self, number: int, links: np.ndarray) -> None:
        self.number, self.links = number, links
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
            solver = None if constraints is None else constraints.arguments_for(part, links)
            worker.send(("build", part, gravity, settings, solver))
        except BaseException:
            worker.close()
            raise
        return worker

    def share(self, sample: tuple) -> tuple:
        """This group's part of a sample ``(base motion, control fields, obstacle motion)``:
        the per-link control fields at its links."""
        motion, updates, obstacle_motion = sample
        return motion, fields_at_links(updates, self.links), obstacle_motion

    def send(self, message: tuple) -> None:
        try:
            pickle.dump(message, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise self._exited() from error

    def receive(self) -> tuple:
        try:
            return pickle.load(self._process.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as error:
            raise self._exited() from error

    def expect(self, kind: str) -> tuple:
        reply = self.receive()
        if reply[0] == "error":
            raise reply[1]
        if reply[0] != kind:
            raise WorkerError(f"worker process {self.number} answered {reply[0]!r}, not {kind!r}")
        return reply

    @property
    def answers(self) -> IO[bytes]:
        """The pipe the worker answers on."""
        return self._process.stdout

    def answer(self, sample: Callable[[float], tuple], time: float) -> None:
        """Send the sample at ``time`` the worker asked for."""
        self.send(("sample", self.share(sample(time))))

    def finish(self, sample: Callable[[float], tuple]) -> tuple:
        """The answer to an ``advance`` or the worker's next grid question, serving the samples
        it asks for meanwhile."""
        while True:
            reply = self.receive()
            if reply[0] != "sample":
                return reply
            self.answer(sample, reply[1])

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


# The questions a worker asks to meet the other groups on the strand grid.
GRID_QUESTIONS = ("grid_bounds", "grid_sums")

# --- the worker's side ----------------------------------------------------------------------


@dataclass(eq=False)
class _Group:
    """What a worker holds between messages: its model, workspace, step memory, state and
    control."""

    model: Model
    data: Data
    memory: StepMemory
    state: State
    spare: State
    control: Control
    settings: SolverSettings
    constraints: ConstraintSolver | None
    interaction: Interaction | None = None


@dataclass(eq=False)
class _SharedGrid:
    """A worker's way to the grid its group shares with the other workers' (through the
    parent, :meth:`Workers._meet`)."""

    source: IO[bytes]
    send: Callable[[tuple], None]

    def cell(self, bounds: np.ndarray, cell: float) -> float:
        self.send(("grid_bounds", bounds, cell))
        return self._answer("grid_cell")

    def total(self, lattice: Lattice, sums: Any) -> Any:
        self.send(("grid_sums", lattice, sums))
        return self._answer("grid_total")

    def _answer(self, kind: str) -> Any:
        answer, value = pickle.load(self.source)
        if answer != kind:
            raise WorkerError(f"a worker process asking for {kind!r} got {answer!r}")
        return value


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """The worker's loop: answer the parent's messages on ``source`` on ``sink`` until the
    parent closes ``source``."""
    # Prints (a warning from NumPy, a debugging line) must not land in the message stream.
    sys.stdout = sys.stderr

    def send(message: tuple) -> None:
        pickle.dump(message, sink, protocol=pickle.HIGHEST_PROTOCOL)
        sink.flush()

    group = None
    while True:
        try:
            kind, *body = pickle.load(source)
        except EOFError:
            return
        try:
            if kind == "build":
                model, gravity, settings, constraints = body
                state = State.at_rest(model)
                control = Control.from_model(model, gravity)
                solver = None if constraints is None else ConstraintSolver(model, *constraints)
                data = Data.for_model(model)
                group = _Group(
                    model,
                    data,
                    StepMemory.for_model(model),
                    state,
                    state.copy(),
                    control,
                    settings,
                    solver,
                )
                send(("ready",))
            elif kind == "advance":
                send(_advance(group, body, source, send))
            else:
                raise WorkerError(f"a worker process got an unknown message {kind!r}")
        except Exception as error:  # every failure goes back to the parent
            send(("error", _transferable(error)))


def _advance(group: _Group, body: list, source: IO[bytes], send: Callable) -> tuple:
    """Take the substeps of one ``advance`` message; the ``done`` answer."""
    (q, w, base_rotation, base_position, start, gravity, per_link, fields, samples, h, substeps,
     clear, interaction) = body  # fmt: skip
    model, state, control = group.model, group.state, group.control
    if interaction is not None:
        (share,) = interaction
        if share is None:
            # The parent's control holds no interaction forces to send: its workers set them.
            group.interaction = None
            control.set_interaction(None, None, None)
        else:
            group.interaction = Interaction.from_share(model, share, _SharedGrid(source, send))
    state.q[...], state.w[...] = q, w
    state.base_rotation[...], state.base_position[...] = base_rotation, base_position
    state.time = start
    control.gravity = gravity
    for name, value in per_link.items():
        setattr(control, name, value)
    solver = group.constraints
    if clear:
        group.memory.forget()
        state.previous = None
        if solver is not None:
            solver.reset()

    def sample(time: float) -> tuple:
        if time not in samples:
            send(("sample", time))
            _, samples[time] = pickle.load(source)
        return samples[time]

    constrain = None
    if solver is not None:
        obstacle_motion = None if solver.obstacles is None else (lambda time: sample(time)[2])
        constrain = Constrain(
            model,
            group.data,
            group.memory,
            control,
            solver,
            lambda time: sample(time)[0],
            obstacle_motion,
        )
    stepper = Stepper(
        model,
        group.data,
        group.memory,
        control,
        lambda time: sample(time)[:2],
        fields,
        group.settings,
        constrain,
        group.interaction,
    )
    group.state, group.spare, stats = stepper.advance((state, group.spare), start, h, substeps)
    field_values = (
        {} if fields is None else {name: getattr(control, name) for name in Control.FILLED_IN_PLACE}
    )
    constrained = ConstraintStats() if solver is None else solver.stats
    interacted = InteractionStats() if group.interaction is None else group.interaction.stats
    return ("done", group.state.q, group.state.w, stats, field_values, constrained, interacted)


def _transferable(error: Exception) -> Exception:
    """``error`` if it survives pickling, else a :class:`WorkerError` with its description."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # any failure to pickle: describe it instead
        return WorkerError(f"a worker process failed: {type(error).__name__}: {error}")
    return error
