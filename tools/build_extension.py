"""Build the extension zip with Blender's own builder, through the bpy module.

Equivalent to ``blender --command extension build``: the bundled ``bl_pkg`` add-on validates
blender_manifest.toml and packs the files it selects (``[build] paths_exclude_pattern``).
Run it in the venv that has bpy (``make build``).
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", type=Path, default=REPO_ROOT)
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "dist")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="oriented-strands-blender-user-") as user_resources:
        # Read once, at `import bpy`: Blender's config and extension repositories then live in
        # a throw-away folder instead of the user's home.
        os.environ["BLENDER_USER_RESOURCES"] = user_resources
        import bpy  # noqa: F401  (starting Blender puts bl_pkg on sys.path)
        from bl_pkg import bl_extension_cli

        return bl_extension_cli.cli_extension_handler(
            ["build", "--source-dir", str(args.source_dir), "--output-dir", str(args.output_dir)]
        )


if __name__ == "__main__":
    sys.exit(main())
