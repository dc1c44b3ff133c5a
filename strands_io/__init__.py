"""The Blender-free half of the adapter: from what was read of a scene to the engine and back.

``scene`` reads Blender data into the records here and writes results back into Blender;
everything in between lives in this package, which imports the engine (``core``) and never
``bpy``, so its rules are tested without Blender (``tests/strands_io``):

- ``records``: plain records of what is read from a scene (drawn curves, where hair roots sit on
  their surface, force fields, obstacle shapes);
- ``geometry``: the wire mesh's splines, arc-length resampling, branch detection, frames on
  surface triangles, rigid parts of matrices, quaternions;
- ``layout``: drawn curves to a forest of ``StrandSpec`` (:class:`~.layout.StrandLayout`);
- ``parameters``: the settings records, the artist's values mapped to the engine's per-link
  parameters, substeps per frame and the material presets;
- ``cache``: a strand system's sampled input (:class:`~.cache.PreparedInput`) and the runtime
  that builds its model and keeps every simulated frame (:class:`~.cache.StrandSystemRuntime`);
- ``errors``: :class:`~.errors.SceneInputError`, input that cannot become strands.

Its modules are imported by name; this file imports nothing.
"""
