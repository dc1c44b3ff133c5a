"""Physical presets against closed forms, numerical integration of the cross-section, their cited
sources, and a cantilever simulation."""

import dataclasses

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from scipy import integrate

from oriented_strands.core import (
    BaseMotion,
    InvalidInputError,
    Simulation,
    SolverSettings,
    StrandSpec,
    build_model,
    presets,
)
from strands import polyline


def test_round_section_reduces_to_the_textbook_moments():
    r = 2.5e-4
    np.testing.assert_allclose(presets.second_moments(r), [np.pi * r**4 / 4] * 2, rtol=1e-14)
    np.testing.assert_allclose(presets.torsion_constant(r), np.pi * r**4 / 2, rtol=1e-14)
    np.testing.assert_allclose(presets.mass_per_length(1000.0, r), 1000.0 * np.pi * r**2)


@pytest.mark.parametrize("ellipticity", [1.0, 1.66, 13.3])
def test_second_moments_match_integration_over_the_ellipse(ellipticity):
    radius = 1.0
    a, b = presets.semi_axes(radius, ellipticity)
    assert a * b == pytest.approx(radius**2)
    assert a / b == pytest.approx(ellipticity)

    def over_ellipse(f):  # ∫∫ f(x, z) dz dx, x along the major axis a, z along b
        value, _ = integrate.dblquad(
            f,
            -a,
            a,
            lambda x: -b * np.sqrt(1 - (x / a) ** 2),
            lambda x: b * np.sqrt(1 - (x / a) ** 2),
        )
        return value

    # I about the link's x axis is ∫ z² dA; about z it is ∫ x² dA (dblquad passes (z, x)).
    expected = [over_ellipse(lambda z, x: z * z), over_ellipse(lambda z, x: x * x)]
    np.testing.assert_allclose(presets.second_moments(radius, ellipticity), expected, rtol=1e-8)


def _prandtl_torsion_constant(a: float, b: float, cells: int) -> float:
    """J = 2 ∫ φ dA with ∇²φ = −2 inside the ellipse, φ = 0 outside (finite differences)."""
    h = a / cells
    x = np.arange(-a + h / 2, a, h)
    z = np.arange(-b + h / 2, b, h)
    xx, zz = np.meshgrid(x, z, indexing="ij")
    inside = (xx / a) ** 2 + (zz / b) ** 2 < 1
    index = -np.ones(inside.shape, dtype=int)
    index[inside] = np.arange(inside.sum())
    rows, cols, values = [], [], []
    for shift in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        neighbour = np.roll(index, shift, axis=(0, 1))
        ok = inside & (neighbour >= 0)
        rows.append(index[ok])
        cols.append(neighbour[ok])
        values.append(np.ones(ok.sum()))
    n = int(inside.sum())
    laplacian = scipy.sparse.coo_matrix(
        (np.concatenate(values + [np.full(n, -4.0)]),
         (np.concatenate(rows + [np.arange(n)]), np.concatenate(cols + [np.arange(n)]))),
        shape=(n, n),
    ).tocsr() / h**2  # fmt: skip
    phi = scipy.sparse.linalg.spsolve(laplacian, np.full(n, -2.0))
    return 2.0 * phi.sum() * h * h


@pytest.mark.parametrize("ellipticity", [1.0, 2.0])
def test_torsion_constant_matches_the_prandtl_stress_function(ellipticity):
    a, b = presets.semi_axes(1.0, ellipticity)
    # The staircase boundary converges at first order (8% off on the fine grid at e = 2):
    # extrapolate from two grids (Richardson). 1% still tells J from, e.g., the polar moment
    # I_x + I_z, which is 56% larger at e = 2.
    coarse, fine = (_prandtl_torsion_constant(a, b, cells) for cells in (100, 200))
    assert presets.torsion_constant(1.0, ellipticity) == pytest.approx(2 * fine - coarse, rel=1e-2)


# Stated in the presets' docstrings (3 significant figures): (EI_x, EI_z), GJ (N·m²), kg/m.
STATED = {
    "straight hair": ((6.15e-9, 1.02e-8), 3.52e-9, 6.58e-6),
    "wavy hair": ((3.65e-9, 7.26e-9), 2.22e-9, 5.30e-6),
    "curly hair": ((3.31e-9, 9.11e-9), 2.22e-9, 5.47e-6),
    "green wood twig": ((0.127, 0.127), 0.0178, 0.0254),
    "leaf stem": ((1.19e-3, 1.19e-3), 2.77e-4, 7.07e-3),
    "grass blade": ((2.65e-6, 4.71e-4), 4.06e-6, 7.54e-4),
}


@pytest.mark.parametrize("name", sorted(STATED))
def test_presets_reproduce_their_stated_rigidities(name):
    preset = presets.PRESETS[name]
    bend, twist, mass = STATED[name]
    a, b = preset.radius * np.sqrt(preset.ellipticity), preset.radius / np.sqrt(preset.ellipticity)
    # Written out here from the textbook formulas, not through the module.
    e, g, rho = preset.youngs_modulus, preset.shear_modulus, preset.density
    np.testing.assert_allclose(
        [e * np.pi * a * b**3 / 4, e * np.pi * a**3 * b / 4], bend, rtol=5e-3
    )
    assert g * np.pi * a**3 * b**3 / (a**2 + b**2) == pytest.approx(twist, rel=5e-3)
    assert rho * np.pi * a * b == pytest.approx(mass, rel=5e-3)
    np.testing.assert_allclose(preset.bending_rigidity(), bend, rtol=5e-3)
    assert preset.torsional_rigidity() == pytest.approx(twist, rel=5e-3)
    parameters = preset.strand_parameters()
    np.testing.assert_allclose(parameters.bend_stiffness, [bend], rtol=5e-3)
    assert parameters.twist_stiffness == pytest.approx(twist, rel=5e-3)
    assert parameters.mass_per_length == pytest.approx(mass, rel=5e-3)
    assert preset.source


def test_hair_presets_follow_the_course_notes():
    for preset in (presets.STRAIGHT_HAIR, presets.WAVY_HAIR, presets.CURLY_HAIR):
        parameters = preset.strand_parameters()
        assert preset.density == 1300.0  # "1.3 g·cm⁻³"
        # Internal friction γ in [5e-11, 5e-10] kg·m³/s, air-hair friction ν in [5e-6, 5e-5].
        assert 5e-11 <= parameters.bend_damping <= 5e-10
        assert 5e-6 <= parameters.drag <= 5e-5
        # "about 0.1 mm in diameter"
        assert 60e-6 < 2 * preset.radius < 100e-6
        # Units sanity: a hair's elasto-gravity length (EI / (μ g))^(1/3), beyond which it can
        # no longer hold itself out straight, is a few centimetres.
        soft = preset.bending_rigidity()[0]
        assert 0.01 < (soft / (parameters.mass_per_length * 9.81)) ** (1 / 3) < 0.1
    assert presets.STRAIGHT_HAIR.ellipticity < presets.WAVY_HAIR.ellipticity
    assert presets.WAVY_HAIR.ellipticity < presets.CURLY_HAIR.ellipticity


def test_poisson_ratio_gives_the_isotropic_twist_to_bend_ratio():
    # Round isotropic rod: EI / GJ = (E / 2G) = 1 + ν.
    parameters = presets.strand_parameters(
        density=1000.0, youngs_modulus=1e9, poisson_ratio=0.3, radius=1e-3
    )
    ratio = parameters.bend_stiffness[0, 0] / parameters.twist_stiffness
    assert ratio == pytest.approx(1.3, rel=1e-14)


def test_radius_scales_rigidity_as_r4_and_mass_as_r2():
    preset = presets.GREEN_TWIG
    thin, thick = preset.strand_parameters(1e-3), preset.strand_parameters(2e-3)
    np.testing.assert_allclose(thick.bend_stiffness / thin.bend_stiffness, 16.0)
    assert thick.twist_stiffness / thin.twist_stiffness == pytest.approx(16.0)
    assert thick.mass_per_length / thin.mass_per_length == pytest.approx(4.0)
    per_link = preset.strand_parameters(np.array([1e-3, 2e-3, 3e-3]))
    assert per_link.bend_stiffness.shape == (3, 2)
    np.testing.assert_allclose(per_link.bend_stiffness[1], thick.bend_stiffness[0])


def test_blade_bends_flatwise_and_edgewise_as_euler_bernoulli(backend):
    """Link x is the major axis: a load along link z bends about x with EI_x, one along link x
    bends about z with EI_z; each tip deflection is the cantilever's w L⁴ / (8 EI)."""
    # Without air drag, which would make the blade creep to rest over seconds.
    parameters = dataclasses.replace(presets.GRASS_BLADE.strand_parameters(), drag=0.0)
    length, n = 0.04, 16
    model = build_model(
        [StrandSpec(polyline(n, length, direction=(1.0, 0.0, 0.0)))], parameters, backend=backend
    )
    rotation, _ = Simulation(model).link_frames()
    link_x, link_z = rotation[0][:, 0], rotation[0][:, 2]
    w = parameters.mass_per_length * 9.81
    settings = SolverSettings(substeps=2, newton_tolerance=1e-10, newton_max_iterations=20)
    for load_axis, rigidity in ((link_z, parameters.bend_stiffness[0, 0]),
                                (link_x, parameters.bend_stiffness[0, 1])):  # fmt: skip
        sim = Simulation(model, settings, gravity=-9.81 * load_axis)
        for _ in range(12):
            sim.advance(1 / 24, BaseMotion.still(np.eye(4)[None]))
        deflection = -(sim.points()[-1] - model.rest_points[-1]) @ load_axis
        # Discrete Voronoi joints: w L⁴ / (8 EI) (1 + 1/n²) (docs/physics.md).
        expected = w * length**4 / (8 * rigidity) * (1 + 1 / n**2)
        assert deflection == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"radius": -1e-3}, "radius must be > 0"),
        ({"radius": np.nan}, "radius must be finite"),
        ({"ellipticity": 0.5}, "ellipticity must be >= 1"),
        ({"youngs_modulus": 0.0}, "youngs_modulus must be > 0"),
        ({"poisson_ratio": 0.7, "shear_modulus": None}, r"poisson_ratio must lie in \(-1, 0.5\]"),
        ({"poisson_ratio": 0.3}, "exactly one of shear_modulus and poisson_ratio"),
        ({"drag": -1.0}, "drag must be >= 0"),
    ],
)
def test_bad_material_input_is_refused(arguments, message):
    base = {"density": 1000.0, "youngs_modulus": 1e9, "shear_modulus": 4e8, "radius": 1e-3}
    with pytest.raises(InvalidInputError, match=message):
        presets.strand_parameters(**{**base, **arguments})
