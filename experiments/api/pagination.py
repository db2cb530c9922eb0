"""Pagination of API lists.

Lists of lab objects (hardware, testbeds, matrices, reports: hundreds, not millions) use
page numbers with a client-chosen size and an exact ``count``. Runs and metrics, which grow
to millions, use keyset cursors (``experiments.shared.keyset``): no ``count`` and no OFFSET.
"""

from __future__ import annotations

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.utils.urls import replace_query_param

from experiments.shared import keyset


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class RunCursorPagination(CursorPagination):
    """Runs (newest first) and metrics: ``WHERE (created, id) < cursor ORDER BY created, id
    LIMIT n + 1``, so the 20,000th page of a million runs costs what the first does, and no
    COUNT(*) over the table.

    The answer keeps DRF's cursor pagination's shape (``next``, ``previous``, ``results``;
    ``?cursor=`` and ``?page_size=``). DRF's own cursor is a position in the first ordering
    field plus an offset among rows that share it; a bulk request stores its 500 runs with
    one ``created``, so pages within such a batch read past every earlier row of it, and a
    batch longer than DRF's offset cap (1,000) could not be paged through. Here the cursor
    holds the whole key, (created, id), and ties cost nothing."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    ordering = ("-created", "-id")
    invalid_cursor_message = "Invalid cursor: follow the next and previous links of a page."

    def paginate_queryset(self, queryset, request, view=None):
        self.request = request
        self.page_size = self.get_page_size(request)
        self.base_url = request.build_absolute_uri()
        key = keyset.Key.of(self.get_ordering(request, queryset, view))
        try:
            found = keyset.page(
                queryset, key, self.page_size, request.query_params.get(self.cursor_query_param)
            )
        except keyset.BadCursor:
            raise NotFound(self.invalid_cursor_message) from None
        self.page = found.rows
        self.next_cursor, self.previous_cursor = found.next, found.previous
        self.display_page_controls = bool(found.next or found.previous)
        return self.page

    def _link(self, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        return replace_query_param(self.base_url, self.cursor_query_param, cursor)

    def get_next_link(self):
        return self._link(self.next_cursor)

    def get_previous_link(self):
        return self._link(self.previous_cursor)
