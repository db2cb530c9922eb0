"""Who may subscribe to what: a testbed's operators (owner, operators, staff) to the testbed;
a matrix's owner, staff, or whoever operates every testbed it names, to the matrix. Checked
when a subscription is made and again for every alert (a revoked operator hears nothing)."""

from __future__ import annotations

from experiments.models import Matrix, Testbed


def subscribe_refused(user, *, testbed: Testbed | None = None, matrix: Matrix | None = None):
    """Why ``user`` may not subscribe to ``testbed`` or ``matrix``, or None."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return "sign in first"
    if testbed is not None:
        if testbed.published:
            return f"testbed {testbed.name!r} is published study data: it has no alerts"
        if not testbed.can_operate(user):
            return f"you are not an operator of testbed {testbed.name!r}"
        return None
    if matrix is not None:
        if matrix.can_edit(user):
            return None
        testbeds = list(matrix.testbeds.all())
        if testbeds and all(t.can_operate(user) for t in testbeds):
            return None
        return f"matrix {matrix.name!r} is not yours and you do not operate its testbeds"
    return "name a testbed or a matrix"
