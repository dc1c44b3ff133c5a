"""Bake and render every example into the gallery: ``make gallery``.

Each example runs in a fresh Blender process (``python examples/<name>.py``) into a scratch
folder; its stills (JPEG) and clip (MP4) are copied into ``--output`` (``docs/gallery`` by
default) and a page, ``README.md``, lists each with what it shows, its counts, the seconds per
simulated frame on this machine, the settings that matter and its figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = ("long_hair", "rabbit_ears", "curly_bangs", "braid", "lanterns", "jungle")
HERE = Path(__file__).resolve().parent


def page(summaries: list[dict]) -> str:
    """The gallery's Markdown page."""
    lines = [
        "# Gallery",
        "",
        "Scenes after the method paper's (Hadap, *Oriented Strands*, §7), each built from code by",
        "a script in `examples/`, simulated as an artist plays it (the live preview steps every",
        "frame), baked and rendered with Cycles on the CPU. Regenerate them all with",
        "`make gallery`; run one with `python examples/<name>.py --output DIR` in the Blender",
        "environment. Seconds per frame are the simulation's on the machine that made them (two",
        "cores).",
        "",
    ]
    for summary in summaries:
        name = summary["name"]
        lines += [
            f"## {summary['title']}",
            "",
            summary["description"],
            "",
            f"`examples/{name}.py`: {summary['strands']} strands, {summary['segments']} segments,"
            f" {summary['frames']} frames at 24 fps, {summary['seconds_per_frame']:.3f} s per"
            f" simulated frame. Clip: [{summary['clip']}]({summary['clip']}).",
            "",
            " ".join(f"![{name}, frame {still[-7:-4]}]({still})" for still in summary["stills"]),
            "",
            "| setting | value |",
            "|---|---|",
            *(f"| {key} | {value} |" for key, value in summary["parameters"].items()),
            "",
            "| figure | value |",
            "|---|---|",
            *(f"| {key} | {value:.4g} |" for key, value in summary["figures"].items()),
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=Path("docs/gallery"))
    parser.add_argument("--only", nargs="*", choices=EXAMPLES, help="some examples only")
    arguments = parser.parse_args(argv)
    output = arguments.output
    output.mkdir(parents=True, exist_ok=True)
    summaries = []
    with tempfile.TemporaryDirectory(prefix="oriented-strands-gallery-") as scratch:
        for name in arguments.only or EXAMPLES:
            folder = Path(scratch) / name
            command = [sys.executable, str(HERE / f"{name}.py"), "--output", str(folder)]
            subprocess.run(command, check=True)
            summary = json.loads((folder / f"{name}.json").read_text())
            for file in (*summary["stills"], summary["clip"]):
                shutil.copyfile(folder / file, output / file)
            (output / f"{name}.json").write_text(json.dumps(summary, indent=1))
            summaries.append(summary)
    kept = [
        json.loads((output / f"{name}.json").read_text())
        for name in EXAMPLES
        if (output / f"{name}.json").exists()
    ]
    (output / "README.md").write_text(page(kept))
    print(f"gallery: {len(summaries)} example(s) rendered into {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
