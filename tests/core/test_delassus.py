"""The constraint rows' operator against the dense ``h G N⁻¹ Gᵀ``: the Newton matrix from inverse
dynamics plus the step's joint block, the rows' Jacobians by central differences of forward
kinematics."""

import numpy as np

from oriented_strands.core import (
    StrandParameters,
    StrandSpec,
    build_model,
    dynamics,
    integrators,
    spatial,
)
from oriented_strands.core.delassus import delassus_operator, operator_columns
from oriented_strands.core.state import Control
from strands import polyline, random_tree


def _bent_forest(backend, rng, specs):
    """A model of ``specs`` without gravity, its workspace and control, and joint rotations
    turned randomly (about 0.3 rad) away from the rest shape."""
    model = build_model(
        specs, StrandParameters(bend_stiffness=1e-2, twist_stiffness=5e-3), backend=backend
    )
    data, control = dynamics.Data.for_model(model), Control.from_model(model, (0.0, 0.0, 0.0))
    xp = model.xp
    q = spatial.quat_multiply(
        xp,
        model.rest_rotation,
        spatial.quat_exp(xp, backend.from_host(rng.normal(0, 0.3, (3, model.n_links)))),
    )
    return model, data, control, q


def test_the_operator_from_test_solves_is_h_g_inverse_newton_matrix_g_transposed(backend):
    """The Delassus operator of point and joint rows on a branched tree and a straight strand
    (rows padded to one size) equals ``h G N⁻¹ Gᵀ`` built densely: ``N`` the mass matrix from
    inverse dynamics plus the step's joint block, ``G`` the rows' Jacobians by central
    differences of forward kinematics."""
    rng = np.random.default_rng(3)
    specs = random_tree(rng) + [StrandSpec(polyline(4, 0.2, start=(0.5, 0.0, 0.0)))]
    model, data, control, q = _bent_forest(backend, rng, specs)
    xp, device, host, h = model.xp, backend.from_host, backend.to_host, 0.01
    zero = xp.zeros((3, model.n_links), dtype=model.backend.float)
    # Rows (strand, link, fraction or None for a joint row, direction); tree 1 is padded.
    rows = [[(0, 4, 0.7, rng.normal(size=3)), (1, 2, 1.0, rng.normal(size=3)),
             (3, 1, 0.3, rng.normal(size=3)), (2, 1, None, rng.normal(size=3))],
            [(4, 3, 1.0, rng.normal(size=3)), (4, 1, None, rng.normal(size=3))]]  # fmt: skip
    m = 4
    level_major = np.zeros((2, m), dtype=np.int64)
    level_major[1] = model.link_order[model.link_offsets[4]]
    fraction, direction, joint = np.zeros((2, m)), np.zeros((3, 2, m)), np.zeros((2, m), bool)
    for t, tree_rows in enumerate(rows):
        for i, (strand, link, at, towards) in enumerate(tree_rows):
            level_major[t, i] = model.link_order[model.link_offsets[strand] + link]
            fraction[t, i] = 0.0 if at is None else at
            direction[:, t, i] = towards / np.linalg.norm(towards)
            joint[t, i] = at is None

    def points(rotations):
        dynamics.forward_kinematics(
            model, data, rotations, control.base_rotation, control.base_position
        )
        links = device(level_major)
        return host(
            data.r[:, links] + (device(fraction) * model.length[links]) * data.oR[:, 1, links]
        )

    # Dense reference: G (rows x 3N) by central differences, N by inverse-dynamics columns.
    n = 3 * model.n_links
    jacobian = np.zeros((2, m, n))
    for k in range(n):
        turn = np.zeros(n)
        turn[k] = 1e-6
        step = device(turn.reshape(3, -1))
        ahead = points(spatial.quat_multiply(xp, q, spatial.quat_exp(xp, step)))
        behind = points(spatial.quat_multiply(xp, q, spatial.quat_exp(xp, -step)))
        jacobian[:, :, k] = np.einsum("itm,itm->tm", direction, ahead - behind) / 2e-6
    for t in range(2):
        for i in range(m):
            if joint[t, i]:
                jacobian[t, i] = 0.0
                jacobian[t, i, np.arange(3) * model.n_links + level_major[t, i]] = direction[
                    :, t, i
                ]
    bias = host(dynamics.inverse_dynamics(model, data, q, zero, zero, control)).ravel()
    mass = np.zeros((n, n))
    for k in range(n):
        unit = np.zeros(n)
        unit[k] = 1.0
        accelerated = dynamics.inverse_dynamics(
            model, data, q, zero, device(unit.reshape(3, -1)), control
        )
        mass[:, k] = host(accelerated).ravel() - bias
    block = integrators.joint_block(model, control, q, h)
    newton = mass.copy()
    host_block = host(block)
    for link in range(model.n_links):
        index = np.arange(3) * model.n_links + link
        newton[np.ix_(index, index)] += host_block[:, :, link]
    expected = h * np.einsum("tin,nk,tjk->tij", jacobian, np.linalg.inv(newton), jacobian)

    dynamics.inverse_dynamics(model, data, q, zero, zero, control)
    dynamics.factorize(model, data, block)
    links = device(level_major)
    arm = data.r[:, links] + (device(fraction) * model.length[links]) * data.oR[:, 1, links]
    operator = delassus_operator(model, data, links, arm, device(direction), device(joint), h)
    np.testing.assert_allclose(
        host(operator), expected, rtol=1e-6, atol=1e-9 * np.abs(expected).max()
    )
    assert np.abs(expected[1, 2:]).max() == 0.0  # the padding rows stay empty


def test_the_operator_solves_later_columns_on_the_trees_that_have_them(backend):
    """One tree with 8 rows among six with 2: columns 2–7 are solved on a model of that tree
    alone (a sub-model with the factorisation gathered), and the operator equals the one from
    whole-forest solves of every column within 1e-12 (relative to its largest entry)."""
    rng = np.random.default_rng(5)
    specs = random_tree(rng) + [
        StrandSpec(polyline(5, 0.2, start=(0.3 * k, 0.5, 0.0))) for k in range(5)
    ]
    model, data, control, q = _bent_forest(backend, rng, specs)
    xp, device, host, h = model.xp, backend.from_host, backend.to_host, 0.01
    zero = xp.zeros((3, model.n_links), dtype=model.backend.float)
    dynamics.inverse_dynamics(model, data, q, zero, zero, control)
    dynamics.factorize(model, data, integrators.joint_block(model, control, q, h))
    n_trees, m = model.n_trees, 8
    counts = np.array([8] + [2] * (n_trees - 1))
    link_tree = host(model.link_tree)
    level_major = np.tile(np.arange(n_trees)[:, None], (1, m))
    joint = np.zeros((n_trees, m), bool)
    for t in range(n_trees):
        links = np.nonzero(link_tree == t)[0]
        level_major[t, : counts[t]] = rng.choice(links, counts[t])
        joint[t, : counts[t]] = rng.random(counts[t]) < 0.3
    direction = rng.normal(size=(3, n_trees, m))
    direction[:, np.arange(m)[None, :] >= counts[:, None]] = 0.0
    fraction = rng.random((n_trees, m)) * ~joint
    links = device(level_major)
    arm = data.r[:, links] + (device(fraction) * model.length[links]) * data.oR[:, 1, links]
    rows = (links, arm, device(direction), device(joint))
    operator = host(delassus_operator(model, data, *rows, h, counts))
    whole = xp.zeros((n_trees, m, m), dtype=model.backend.float)
    operator_columns(model, data, *rows, h, range(m), whole)
    whole = host(whole)
    assert np.abs(operator - whole).max() <= 1e-12 * np.abs(whole).max()
    assert np.abs(whole[1:, :, 2:]).max() == 0.0
    np.testing.assert_array_equal(host(delassus_operator(model, data, *rows, h)), operator)
