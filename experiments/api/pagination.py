"""Pagination of API lists: page numbers with a client-chosen size up to a maximum.

Lists of runs and metrics are ordered by a unique key, so pages never overlap.
"""

from __future__ import annotations

from rest_framework.pagination import CursorPagination, PageNumberPagination


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class RunCursorPagination(CursorPagination):
    """Runs and metrics: a cursor on (created, id) instead of an OFFSET, so the 2,000th page
    of 100,000 runs costs what the first does, and no COUNT(*) over the whole table."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    ordering = ("-created", "-id")
