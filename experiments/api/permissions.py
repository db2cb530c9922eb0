"""Who may do what through the API: the same rules as the pages.

Every signed-in user (token or session) reads everything; writing an object needs its owner
or staff, and published study data is read-only for everyone (``OwnedModel.can_edit``).
Parts (drives, NICs, members, targets, pools, parameters, metrics, share links) follow their
parent.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission


def owner_of(obj):
    """The object whose ``can_edit`` decides for ``obj`` (itself, or its parent)."""
    for parent in ("profile", "testbed", "tuning_set", "run", "report"):
        if not hasattr(obj, "can_edit") and hasattr(obj, parent):
            return getattr(obj, parent)
    return obj


class OwnerOrStaffWrites(BasePermission):
    message = "Only the owner or staff may change this; published study data is read-only."

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated)

    def has_object_permission(self, request, view, obj) -> bool:
        if request.method in SAFE_METHODS:
            return True
        target = owner_of(obj)
        can_edit = getattr(target, "can_edit", None)
        if can_edit is None:
            return bool(request.user.is_staff)
        return can_edit(request.user)


class StaffWrites(BasePermission):
    """Objects without an owner (workers): everyone reads, staff writes."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or request.user.is_staff
