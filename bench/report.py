"""From case results to findings: side-by-side ratios, scaling fits, targets, tables.

A *case* is the dict a worker printed (see :mod:`bench.worker`), plus ``status``
(``"measured"``, ``"skipped"`` or ``"failed"``) and, when not measured, ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

PEERS = ("engine", "blender", "mujoco")

# The targets (issue 2, "Speed").
TARGET_CASE = (1000, 25)
TARGET_LINK_STEPS_PER_SECOND = 9e5
TARGET_SPEEDUP_OVER_BLENDER = 3.0
TARGET_PER_LINK_COST_RATIO = 1.2
PER_LINK_RATIO_LINKS = (16, 64)
TARGET_MEMORY_CASE = (10000, 32)
TARGET_MEMORY_BYTES = 1 << 30

# Other processes' CPU use (cores) during a case above which the table says so.
OTHER_LOAD_NOTE = 0.1

Case = dict[str, Any]


def measured(cases: Sequence[Case], peer: str) -> dict[tuple[int, int], Case]:
    """The peer's measured cases by ``(strands, links)``."""
    return {
        (case["strands"], case["links"]): case
        for case in cases
        if case["peer"] == peer and case["status"] == "measured"
    }


def side_by_side(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Per size measured by the engine and at least one peer: each peer's seconds per frame and
    its ratio to the engine's (above 1: the engine is faster)."""
    engine = measured(cases, "engine")
    others = {peer: measured(cases, peer) for peer in PEERS[1:]}
    rows = []
    for size in sorted(engine, key=lambda size: (size[1], size[0])):
        row: dict[str, Any] = {"strands": size[0], "links": size[1]}
        row["engine_seconds_per_frame"] = engine[size]["seconds_per_frame"]
        for peer, results in others.items():
            if size in results:
                seconds = results[size]["seconds_per_frame"]
                row[f"{peer}_seconds_per_frame"] = seconds
                row[f"{peer}_over_engine"] = seconds / row["engine_seconds_per_frame"]
        if len(row) > 3:
            rows.append(row)
    return rows


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Exponent ``p`` of ``cost ∝ size**p`` through the first and last of ``(size, cost)``."""
    (size_a, cost_a), (size_b, cost_b) = points[0], points[-1]
    return math.log(cost_b / cost_a) / math.log(size_b / size_a)


def scaling(cases: Sequence[Case], peer: str) -> dict[str, Any]:
    """How the peer's cost per frame grows with links and with strands.

    - ``per_link_cost_ratio``: by strand count, (seconds per link at n = 64) / (at n = 16); 1
      means linear in n, 4 quadratic.
    - ``exponent_in_links``: by strand count, ``p`` in ``cost ∝ n**p`` between the smallest and
      largest measured n.
    - ``exponent_in_strands``: by link count, ``p`` in ``cost ∝ B**p`` between the two largest
      measured strand counts (small counts measure fixed per-level overhead, not strands).
    - ``per_strand_seconds``: by link count, seconds per frame per strand for each strand count.
    """
    results = measured(cases, peer)
    strand_counts = sorted({size[0] for size in results})
    link_counts = sorted({size[1] for size in results})
    short, long = PER_LINK_RATIO_LINKS
    per_link_ratio, in_links, in_strands, per_strand = {}, {}, {}, {}
    for strands in strand_counts:
        row = [
            (n, results[(strands, n)]["seconds_per_frame"])
            for n in link_counts
            if (strands, n) in results
        ]
        if (strands, short) in results and (strands, long) in results:
            per_link_ratio[strands] = (results[(strands, long)]["seconds_per_frame"] / long) / (
                results[(strands, short)]["seconds_per_frame"] / short
            )
        if len(row) >= 2:
            in_links[strands] = _slope(row)
    for links in link_counts:
        column = [
            (b, results[(b, links)]["seconds_per_frame"])
            for b in strand_counts
            if (b, links) in results
        ]
        per_strand[links] = {b: seconds / b for b, seconds in column}
        if len(column) >= 2:
            in_strands[links] = _slope(column[-2:])
    return {
        "per_link_cost_ratio": per_link_ratio,
        "exponent_in_links": in_links,
        "exponent_in_strands": in_strands,
        "per_strand_seconds": per_strand,
    }


def targets(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """The issue's speed and memory targets, each with its measured value and verdict.

    ``met`` is None when a figure it needs was not measured.
    """
    engine = measured(cases, "engine")
    blender = measured(cases, "blender")
    engine_target = engine.get(TARGET_CASE)
    blender_target = blender.get(TARGET_CASE)
    ratios = scaling(cases, "engine")["per_link_cost_ratio"]
    # The largest strand count shows the per-link cost itself; small ones mostly overhead.
    ratio_strands = max(ratios) if ratios else None
    memory_case = engine.get(TARGET_MEMORY_CASE)
    strands, links = TARGET_CASE
    found = [
        (
            f"{strands:,} x {links} link-steps/s >= {TARGET_LINK_STEPS_PER_SECOND:.1e}",
            engine_target and engine_target["link_steps_per_second"],
            lambda value: value >= TARGET_LINK_STEPS_PER_SECOND,
        ),
        (
            f"{strands:,} x {links} Blender s/frame / engine s/frame >= "
            f"{TARGET_SPEEDUP_OVER_BLENDER:g}",
            engine_target
            and blender_target
            and blender_target["seconds_per_frame"] / engine_target["seconds_per_frame"],
            lambda value: value >= TARGET_SPEEDUP_OVER_BLENDER,
        ),
        (
            f"per-link cost n={PER_LINK_RATIO_LINKS[1]} / n={PER_LINK_RATIO_LINKS[0]} <= "
            f"{TARGET_PER_LINK_COST_RATIO:g}"
            + (f" (at {ratio_strands:,} strands)" if ratio_strands else ""),
            ratio_strands and ratios[ratio_strands],
            lambda value: value <= TARGET_PER_LINK_COST_RATIO,
        ),
        (
            f"peak memory {TARGET_MEMORY_CASE[0]:,} x {TARGET_MEMORY_CASE[1]} < 1 GiB",
            memory_case and engine_memory_bytes(memory_case),
            lambda value: value < TARGET_MEMORY_BYTES,
        ),
    ]
    return [
        {"target": name, "value": value or None, "met": None if not value else bool(test(value))}
        for name, value, test in found
    ]


def _bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def engine_memory_bytes(case: Case) -> int:
    """The engine's peak memory: what this process traced, plus the peak resident memory of its
    worker processes (interpreters included) where it stepped in several."""
    return case["peak_traced_bytes"] + case.get("workers_peak_resident_bytes", 0)


def _memory(case: Case) -> str:
    if "peak_traced_bytes" in case:
        return f"{_bytes(engine_memory_bytes(case))} peak"
    if "peak_rss_growth_bytes" in case:
        return f"{_bytes(case['peak_rss_growth_bytes'])} RSS+"
    if "memory_bytes" in case:
        return f"{_bytes(case['memory_bytes'])} used"
    return "-"


def _notes(case: Case) -> str:
    if case["status"] != "measured":
        return f"{case['status']}: {case['reason']}"
    load = case.get("other_load_cores")
    busy = f"; other load {load:.2f} cores" if load is not None and load >= OTHER_LOAD_NOTE else ""
    if case["peer"] == "mujoco":
        one_thread = case["one_thread_seconds_per_frame"]
        return f"{case['threads']} threads; 1 thread {one_thread:.4g} s{busy}"
    if case["peer"] == "blender":
        return f"quality {case['quality']}, {case['keys_per_hair']} keys/hair{busy}"
    processes = case.get("processes", 1)
    split = f"; {processes} processes" if processes > 1 else ""
    return f"build {case['build_seconds']:.2g} s{split}{busy}"


def case_table(cases: Sequence[Case]) -> str:
    """Every case, one line each."""
    header = (
        f"{'peer':<8} {'strands':>7} {'links':>5} {'s/frame':>9} {'link-steps/s':>13} "
        f"{'Newton it.':>10} {'memory':>15}  notes"
    )
    lines = [header, "-" * len(header)]
    for case in cases:
        if case["status"] == "measured":
            iterations = (
                f"{case['newton_iterations_mean']:.1f}/{case['newton_iterations_max']}"
                if "newton_iterations_mean" in case
                else "-"
            )
            figures = (
                f"{case['seconds_per_frame']:>9.4g} {case['link_steps_per_second']:>13,.0f} "
                f"{iterations:>10} {_memory(case):>15}"
            )
        else:
            figures = f"{'-':>9} {'-':>13} {'-':>10} {'-':>15}"
        lines.append(
            f"{case['peer']:<8} {case['strands']:>7,} {case['links']:>5} {figures}  {_notes(case)}"
        )
    return "\n".join(lines)


def side_by_side_table(rows: Sequence[dict[str, Any]]) -> str:
    """Seconds per frame of every peer on the same strands, and their ratio to the engine's."""
    header = (
        f"{'strands':>7} {'links':>5} {'engine':>9} {'blender':>9} {'mujoco':>9} "
        f"{'blender/engine':>14} {'mujoco/engine':>13}"
    )
    lines = [header, "-" * len(header)]

    def cell(row: dict[str, Any], key: str, width: int, form: str) -> str:
        return f"{row[key]:>{width}{form}}" if key in row else f"{'-':>{width}}"

    for row in rows:
        lines.append(
            f"{row['strands']:>7,} {row['links']:>5} "
            + " ".join(cell(row, f"{peer}_seconds_per_frame", 9, ".4g") for peer in PEERS)
            + f" {cell(row, 'blender_over_engine', 14, '.2f')}"
            + f" {cell(row, 'mujoco_over_engine', 13, '.2f')}"
        )
    return "\n".join(lines)


def scaling_text(peer: str, fits: dict[str, Any]) -> str:
    """The peer's scaling fits in a few lines."""

    def listing(values: dict[int, float], label: str) -> str:
        return ", ".join(f"{label}={key:,}: {value:.2f}" for key, value in values.items()) or "-"

    short, long = PER_LINK_RATIO_LINKS
    return "\n".join(
        [
            f"{peer}:",
            f"  per-link cost n={long} / n={short}: {listing(fits['per_link_cost_ratio'], 'B')}",
            f"  cost exponent in links:          {listing(fits['exponent_in_links'], 'B')}",
            f"  cost exponent in strands:        {listing(fits['exponent_in_strands'], 'n')}",
        ]
    )


def targets_text(verdicts: Sequence[dict[str, Any]]) -> str:
    """One line per target: value and verdict."""
    lines = []
    for verdict in verdicts:
        value = verdict["value"]
        shown = "not measured" if value is None else f"{value:.3g}"
        state = {None: "", True: "MET", False: "NOT MET"}[verdict["met"]]
        lines.append(f"  {verdict['target']:<58} {shown:>14}  {state}".rstrip())
    return "\n".join(lines)


def render(cases: Sequence[Case], summary: dict[str, Any]) -> str:
    """The whole report as text."""
    parts = ["Cases", case_table(cases)]
    if summary["side_by_side"]:
        parts += ["", "Seconds per frame on the same strands"]
        parts.append(side_by_side_table(summary["side_by_side"]))
    parts += ["", "Scaling"]
    parts += [scaling_text(peer, fits) for peer, fits in summary["scaling"].items()]
    parts += ["", "Targets (issue 2)", targets_text(summary["targets"])]
    return "\n".join(parts)


def summarize(cases: Sequence[Case]) -> dict[str, Any]:
    """Side-by-side ratios, scaling fits of every peer measured, and the targets."""
    return {
        "side_by_side": side_by_side(cases),
        "scaling": {peer: scaling(cases, peer) for peer in PEERS if measured(cases, peer)},
        "targets": targets(cases),
    }
