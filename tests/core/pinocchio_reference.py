"""Build the Pinocchio model of an engine model, as the independent multi-body reference."""

import numpy as np
import pinocchio as pin


def level_major_parents(model) -> np.ndarray:
    """Host parent index of every level-major link (-1 at a base)."""
    parents = np.full(model.n_links, -1)
    for depth, (start, stop) in enumerate(model.level_bounds):
        if depth:
            parents[start:stop] = model.backend.to_host(model.level_parent[depth])
    return parents


def build(model, free_flyer: bool):
    """Pinocchio model with the same links (spherical joints) and the engine-to-Pinocchio order.

    Pinocchio needs every subtree's joints contiguous (depth-first order); the engine stores links
    level-major, so the joints are added depth-first and ``order[k]`` is the engine link of the
    k-th Pinocchio spherical joint.
    """
    to_host = model.backend.to_host
    offsets, mass = to_host(model.joint_offset).T, to_host(model.mass)
    inertia, length = to_host(model.inertia).T, to_host(model.length)
    parents = level_major_parents(model)
    children = {link: [] for link in range(-1, model.n_links)}
    for link, parent in enumerate(parents):
        children[int(parent)].append(link)
    reference = pin.Model()
    root = (
        reference.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
        if free_flyer
        else 0
    )
    joint_of, order = {}, []
    stack = list(reversed(children[-1]))
    while stack:
        link = stack.pop()
        parent_joint = root if parents[link] < 0 else joint_of[parents[link]]
        placement = pin.SE3(np.eye(3), offsets[link].copy())
        joint_of[link] = reference.addJoint(
            parent_joint, pin.JointModelSpherical(), placement, f"link{link}"
        )
        com = np.array([0.0, 0.5 * length[link], 0.0])
        reference.appendBodyToJoint(
            joint_of[link], pin.Inertia(mass[link], com, np.diag(inertia[link])), pin.SE3.Identity()
        )
        order.append(link)
        stack.extend(reversed(children[link]))
    return reference, np.array(order)


def joint_vector(order: np.ndarray, per_link: np.ndarray) -> np.ndarray:
    """Engine per-link (N, k) values -> Pinocchio's joint-ordered flat vector."""
    return per_link[order].reshape(-1)


def engine_vector(order: np.ndarray, flat: np.ndarray, width: int) -> np.ndarray:
    """Pinocchio's joint-ordered flat vector -> engine per-link (N, width)."""
    result = np.empty((len(order), width))
    result[order] = flat.reshape(-1, width)
    return result


def configuration(order, q_wxyz: np.ndarray, base_pose=None) -> np.ndarray:
    """Pinocchio configuration: free-flyer pose (if given) then (x, y, z, w) per spherical joint."""
    joints = joint_vector(order, np.roll(q_wxyz, -1, axis=1))
    if base_pose is None:
        return joints
    base = np.concatenate((base_pose[:3, 3], pin.Quaternion(base_pose[:3, :3]).coeffs()))
    return np.concatenate((base, joints))


def joint_permutation(order: np.ndarray) -> np.ndarray:
    """Index array p with engine_flat[p] = pinocchio_flat for 3-DOF joints (link-major flats)."""
    return (3 * order[:, None] + np.arange(3)).reshape(-1)
