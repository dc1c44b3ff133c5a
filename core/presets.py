"""Physical presets: strand parameters from material constants and cross-section geometry.

A strand's bending and twisting resistance are the textbook rigidities of an elastic rod,
``EI`` and ``GJ``, computed from Young's modulus ``E``, the shear modulus ``G`` and the second
moments of area ``I`` and torsion constant ``J`` of its cross-section (Timoshenko & Goodier,
*Theory of Elasticity*, §104 for the ellipse; the Super-Helices course notes, seed
``002_a86dd2d547a44106.txt``, "Hair mass and stiffness", set hair parameters the same way).

Cross-section
-------------
An ellipse with semi-axes ``a >= b``, described by its **mean radius** ``r = sqrt(a b)`` (the
radius of the circle of equal area, so mass per length does not depend on the ellipticity) and
its **ellipticity** ``e = a / b >= 1`` (the course notes' ``e = r_max / r_min``):
``a = r sqrt(e)``, ``b = r / sqrt(e)``. The major semi-axis ``a`` lies along the link's local
**x** axis and the minor ``b`` along its local **z** axis (``y`` runs along the strand, see
``docs/physics.md``). Then

- bending about x (the strand curls towards ±z, across its thin side):
  ``I_x = ∫ z² dA = π a b³ / 4`` — the soft direction;
- bending about z (towards ±x, across its wide side): ``I_z = ∫ x² dA = π a³ b / 4``;
- torsion: ``J = π a³ b³ / (a² + b²)`` (Saint-Venant's solution for the ellipse);
- mass per length ``ρ π a b = ρ π r²``.

For a round section (``e = 1``) these are ``π r⁴/4`` and ``π r⁴/2``. ``StrandParameters``
takes bending rigidity as ``(EI_x, EI_z)`` columns, which is the order returned here.

Units: SI throughout (kg/m³, Pa, m, N·m², kg/m, N·m²·s, N·s/m²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidInputError
from .model import StrandParameters
from .validation import array_above


def semi_axes(radius: Any, ellipticity: Any = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Semi-axes ``(a, b)`` (m) of the ellipse of mean radius ``sqrt(a b)`` and ratio ``a / b``.

    Parameters
    ----------
    radius : float or array, m
        Mean (equal-area) radius, > 0.
    ellipticity : float or array
        ``a / b >= 1``.
    """
    radius = array_above("radius", radius)
    ellipticity = array_above("ellipticity", ellipticity, 1.0, inclusive=True)
    root = np.sqrt(ellipticity)
    return radius * root, radius / root


def second_moments(radius: Any, ellipticity: Any = 1.0) -> np.ndarray:
    """Second moments of area ``(I_x, I_z)`` (..., 2), m⁴, about the link's x and z axes.

    ``I_x = π a b³/4`` (bending about the major axis, the soft way), ``I_z = π a³ b/4``.
    """
    a, b = semi_axes(radius, ellipticity)
    return np.stack((np.pi * a * b**3 / 4.0, np.pi * a**3 * b / 4.0), axis=-1)


def torsion_constant(radius: Any, ellipticity: Any = 1.0) -> np.ndarray:
    """Torsion constant ``J = π a³ b³ / (a² + b²)`` (m⁴) of the elliptic cross-section."""
    a, b = semi_axes(radius, ellipticity)
    return np.pi * a**3 * b**3 / (a**2 + b**2)


def bending_rigidity(youngs_modulus: Any, radius: Any, ellipticity: Any = 1.0) -> np.ndarray:
    """Bending rigidities ``(EI_x, EI_z)`` (..., 2), N·m², for ``StrandParameters.bend_stiffness``.

    Parameters
    ----------
    youngs_modulus : float or array, Pa
    radius : float or array, m, mean radius
    ellipticity : float or array, ``a / b >= 1``
    """
    modulus = array_above("youngs_modulus", youngs_modulus)
    return modulus[..., None] * second_moments(radius, ellipticity)


def torsional_rigidity(shear_modulus: Any, radius: Any, ellipticity: Any = 1.0) -> np.ndarray:
    """Torsional rigidity ``G J`` (N·m²) for ``StrandParameters.twist_stiffness``."""
    return array_above("shear_modulus", shear_modulus) * torsion_constant(radius, ellipticity)


def mass_per_length(density: Any, radius: Any) -> np.ndarray:
    """Mass per unit length ``ρ π r²`` (kg/m) of a rod of mean radius ``r`` (any ellipticity)."""
    return array_above("density", density) * np.pi * array_above("radius", radius) ** 2


def shear_modulus_from_poisson(youngs_modulus: Any, poisson_ratio: Any) -> np.ndarray:
    """Shear modulus ``E / (2 (1 + ν))`` (Pa) of an *isotropic* material, ``-1 < ν <= 1/2``.

    Fibres such as hair and wood are anisotropic: give their measured shear (torsional)
    modulus instead where one is known.
    """
    modulus = array_above("youngs_modulus", youngs_modulus)
    ratio = np.asarray(poisson_ratio, dtype=np.float64)
    if not np.isfinite(ratio).all() or (ratio <= -1.0).any() or (ratio > 0.5).any():
        raise InvalidInputError(
            f"poisson_ratio must lie in (-1, 0.5] for an isotropic material, got {poisson_ratio!r}"
        )
    return modulus / (2.0 * (1.0 + ratio))


def strand_parameters(
    *,
    density: Any,
    youngs_modulus: Any,
    radius: Any,
    ellipticity: Any = 1.0,
    shear_modulus: Any = None,
    poisson_ratio: Any = None,
    bend_damping: Any = 0.0,
    twist_damping: Any = 0.0,
    drag: Any = 0.0,
) -> StrandParameters:
    """:class:`StrandParameters` of a rod of a material and an elliptic cross-section.

    Give exactly one of ``shear_modulus`` (Pa) and ``poisson_ratio`` (isotropic materials).
    ``radius`` and ``ellipticity`` may be scalars or per-link arrays in strand order; with
    scalars, ``bend_stiffness`` is a ``(1, 2)`` row that broadcasts to every link (a bare
    ``(2,)`` pair would read as per-link values on a two-link model). ``radius`` of the result
    is the mean radius (the engine's link inertia is that of a round rod of equal area).
    Damping (N·m²·s) and drag (N·s/m²) pass through unchanged.
    """
    if (shear_modulus is None) == (poisson_ratio is None):
        raise InvalidInputError("give exactly one of shear_modulus and poisson_ratio")
    if shear_modulus is None:
        shear_modulus = shear_modulus_from_poisson(youngs_modulus, poisson_ratio)
    bend = bending_rigidity(youngs_modulus, radius, ellipticity)
    twist = torsional_rigidity(shear_modulus, radius, ellipticity)
    for name, value in (("bend_damping", bend_damping), ("twist_damping", twist_damping)):
        array_above(name, value, 0.0, inclusive=True)
    array_above("drag", drag, 0.0, inclusive=True)
    scalar = bend.ndim == 1
    return StrandParameters(
        mass_per_length=_scalar_or_array(mass_per_length(density, radius)),
        radius=_scalar_or_array(np.asarray(radius, dtype=np.float64)),
        bend_stiffness=bend[None] if scalar else bend,
        twist_stiffness=_scalar_or_array(twist),
        bend_damping=bend_damping,
        twist_damping=twist_damping,
        drag=drag,
    )


def _scalar_or_array(value: np.ndarray) -> float | np.ndarray:
    return float(value) if value.ndim == 0 else value


@dataclass(frozen=True)
class MaterialPreset:
    """A named material and cross-section, with where its numbers come from.

    Attributes
    ----------
    name : str
    density : float, kg/m³
    youngs_modulus : float, Pa
    shear_modulus : float, Pa (torsional modulus; measured, not derived, for anisotropic fibres)
    radius : float, m
        Mean (equal-area) radius of a typical cross-section; :meth:`strand_parameters` can
        take another.
    ellipticity : float
        ``a / b`` of the cross-section (major axis along the link's local x).
    damping_time : float, s
        Internal damping as a relaxation time: bend and twist damping are both
        ``γ = damping_time x min(EI_x, EI_z)`` (N·m²·s; one internal friction coefficient for
        all deformations, as in the course notes), so a thicker strand damps in proportion to
        its stiffness. The engine's bend damping is isotropic; it is set by the soft axis, the
        direction in which a flat strand visibly moves.
    drag : float, N·s/m²
        Air drag per unit length per unit relative speed.
    source : str
        Citations for every number above.
    """

    name: str
    density: float
    youngs_modulus: float
    shear_modulus: float
    radius: float
    ellipticity: float
    damping_time: float
    drag: float
    source: str

    def __post_init__(self) -> None:
        for name in ("density", "youngs_modulus", "shear_modulus", "radius"):
            array_above(f"{self.name}: {name}", getattr(self, name))
        array_above(f"{self.name}: ellipticity", self.ellipticity, 1.0, inclusive=True)
        for name in ("damping_time", "drag"):
            array_above(f"{self.name}: {name}", getattr(self, name), 0.0, inclusive=True)

    def bending_rigidity(self, radius: Any = None) -> np.ndarray:
        """``(EI_x, EI_z)`` (..., 2), N·m², at ``radius`` (m; default: the preset's)."""
        return bending_rigidity(self.youngs_modulus, self._radius(radius), self.ellipticity)

    def torsional_rigidity(self, radius: Any = None) -> np.ndarray:
        """``GJ`` (N·m²) at ``radius`` (m; default: the preset's)."""
        return torsional_rigidity(self.shear_modulus, self._radius(radius), self.ellipticity)

    def strand_parameters(self, radius: Any = None) -> StrandParameters:
        """:class:`StrandParameters` at ``radius`` (m, scalar or per-link; default: preset's)."""
        radius = self._radius(radius)
        damping = _scalar_or_array(self.damping_time * self.bending_rigidity(radius).min(axis=-1))
        return strand_parameters(
            density=self.density,
            youngs_modulus=self.youngs_modulus,
            shear_modulus=self.shear_modulus,
            radius=radius,
            ellipticity=self.ellipticity,
            bend_damping=damping,
            twist_damping=damping,
            drag=self.drag,
        )

    def _radius(self, radius: Any) -> Any:
        return self.radius if radius is None else radius


# --- hair ----------------------------------------------------------------------------------------
# Density: the course notes (seed 002, "Hair mass and stiffness"): 1.3 g/cm³. Moduli: the notes
# take Young's modulus "from existing tables [Rob02]" (Robbins, Chemical and Physical Behavior
# of Human Hair); Robbins' appendix lists, at 65% relative humidity, Young's modulus
# 3.89e10 dyn/cm² = 3.89 GPa and torsional modulus 0.89e10 dyn/cm² = 0.89 GPa. (Hair is
# anisotropic: E/(2G) - 1 = 1.19 is no Poisson ratio, hence the measured G.) Cross-sections
# (our copy of the notes does not reproduce their appendix table): mean cross-sectional area and
# ellipticity of Asian (straight), Caucasian (wavy) and African-American (curly) hair, Table 3
# of TRI Princeton's "Hair Ethnicity" review (5063, 4079, 4210 µm²; 1.29, 1.41, 1.66), with
# r = sqrt(area / π). Damping: the notes fit the internal friction γ in [5e-11, 5e-10] N·m²·s
# (1e-10 for a curly clump); 0.02 s x EI (soft axis) lands inside that range for all three.
# Drag: the notes' air-hair friction ν, 5e-6 N·s/m² for disciplined (straight) to 5e-5 for fuzzy
# hair; wavy hair takes their geometric mean.
_HAIR_SOURCE = (
    "density 1.3 g/cm³ and damping/drag ranges: Super-Helices course notes (Bertails et al., "
    "seed 002, 'Hair mass and stiffness', 'Internal friction', 'Air-hair friction'); E = 3.89 GPa,"
    " G = 0.89 GPa: Robbins, Chemical and Physical Behavior of Human Hair, appendix (65% RH); "
    "cross-section area and ellipticity: TRI Princeton, 'Hair Ethnicity', Table 3"
)
_HAIR_DENSITY = 1300.0
_HAIR_E = 3.89e9
_HAIR_G = 0.89e9
_HAIR_DAMPING_TIME = 0.02

STRAIGHT_HAIR = MaterialPreset(
    name="straight hair",
    density=_HAIR_DENSITY,
    youngs_modulus=_HAIR_E,
    shear_modulus=_HAIR_G,
    radius=math.sqrt(5063e-12 / math.pi),  # 40.1 µm
    ellipticity=1.29,
    damping_time=_HAIR_DAMPING_TIME,
    drag=5e-6,
    source=_HAIR_SOURCE + " (Asian hair)",
)
"""Straight (Asian-type) hair: EI = (6.15e-9, 1.02e-8) N·m², GJ = 3.52e-9 N·m², 6.58e-6 kg/m."""

WAVY_HAIR = MaterialPreset(
    name="wavy hair",
    density=_HAIR_DENSITY,
    youngs_modulus=_HAIR_E,
    shear_modulus=_HAIR_G,
    radius=math.sqrt(4079e-12 / math.pi),  # 36.0 µm
    ellipticity=1.41,
    damping_time=_HAIR_DAMPING_TIME,
    drag=math.sqrt(5e-6 * 5e-5),
    source=_HAIR_SOURCE + " (Caucasian hair)",
)
"""Wavy (Caucasian-type) hair: EI = (3.65e-9, 7.26e-9) N·m², GJ = 2.22e-9 N·m², 5.30e-6 kg/m."""

CURLY_HAIR = MaterialPreset(
    name="curly hair",
    density=_HAIR_DENSITY,
    youngs_modulus=_HAIR_E,
    shear_modulus=_HAIR_G,
    radius=math.sqrt(4210e-12 / math.pi),  # 36.6 µm
    ellipticity=1.66,
    damping_time=_HAIR_DAMPING_TIME,
    drag=5e-5,
    source=_HAIR_SOURCE + " (African-American hair)",
)
"""Curly (African-type) hair: EI = (3.31e-9, 9.11e-9) N·m², GJ = 2.22e-9 N·m², 5.47e-6 kg/m."""

# --- foliage -------------------------------------------------------------------------------------
# Plant tissue varies by an order of magnitude between species, seasons and water content: these
# are representative values inside the published ranges, to start from and tune, not
# measurements of one species. Drag: the linearisation ½ ρ_air C_d w v_ref of quadratic drag on
# a blunt section of width w (C_d ≈ 1.2 for a cylinder across the flow, ρ_air = 1.2 kg/m³) at a
# breeze of v_ref = 5 m/s.


def _linearised_drag(width: float, speed: float = 5.0) -> float:
    return 0.5 * 1.2 * 1.2 * width * speed


GREEN_TWIG = MaterialPreset(
    name="green wood twig",
    density=900.0,
    youngs_modulus=2.0e9,
    shear_modulus=0.14e9,
    radius=3e-3,
    ellipticity=1.0,
    damping_time=0.01,
    drag=_linearised_drag(6e-3),
    source=(
        "E: living branches with bark 0.7-4.6 GPa (Cannell & Morgan, Young's modulus of sections"
        " of living branches and tree trunks, Tree Physiology 3, 1987); G/E ≈ 0.07, the "
        "longitudinal shear-to-Young ratio of hardwoods (USDA Wood Handbook, ch. 5, elastic "
        "ratios); density: green (wet) wood 0.8-1.1 g/cm³ (Wood Handbook, ch. 4)"
    ),
)
"""Green twig, 6 mm thick: EI = 0.127 N·m² about both axes, GJ = 0.0178 N·m², 0.0254 kg/m."""

LEAF_STEM = MaterialPreset(
    name="leaf stem",
    density=1000.0,
    youngs_modulus=0.3e9,
    shear_modulus=0.3e9 / 8.6,
    radius=1.5e-3,
    ellipticity=1.0,
    damping_time=0.01,
    drag=_linearised_drag(3e-3),
    source=(
        "twist-to-bend ratio EI/GJ ≈ 4.3 measured on tree petioles (Louf et al., Sci. Rep. 8, "
        "16433, 2018; 2.7-8.0 in Vogel 1992), i.e. E/G = 8.6 for a round section; E = 0.3 GPa "
        "representative of fresh petiole tissue (order 0.1-1 GPa); density of water-filled "
        "tissue ≈ water"
    ),
)
"""Leaf stem, 3 mm thick: EI = 1.19e-3 N·m², GJ = 2.77e-4 N·m² (EI/GJ = 4.3), 7.07e-3 kg/m."""

GRASS_BLADE = MaterialPreset(
    name="grass blade",
    density=800.0,
    youngs_modulus=0.5e9,
    shear_modulus=0.5e9 / (2.0 * 1.3),
    radius=math.sqrt(2e-3 * 0.15e-3),  # a 4 mm wide, 0.3 mm thick blade
    ellipticity=2e-3 / 0.15e-3,
    damping_time=0.01,
    drag=_linearised_drag(4e-3),
    source=(
        "a flat blade as an ellipse 4 mm wide and 0.3 mm thick; E = 0.5 GPa representative of "
        "grass leaves, whose stiffness lies in their longitudinal fibres (Vincent, The mechanical"
        " design of grass, J. Mater. Sci. 17, 1982); G from an isotropic Poisson ratio of 0.3; "
        "density of leaf tissue with air spaces, below water"
    ),
)
"""Grass blade: EI = (2.65e-6, 4.71e-4) N·m² (178x stiffer edgewise), GJ = 4.06e-6 N·m²."""

PRESETS: dict[str, MaterialPreset] = {
    preset.name: preset
    for preset in (STRAIGHT_HAIR, WAVY_HAIR, CURLY_HAIR, GREEN_TWIG, LEAF_STEM, GRASS_BLADE)
}
"""Every preset by name."""
