"""A sweep batch's queries: every stored key in one round trip on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attachments.models import Derivative
from sweeper.reaping import batch_query, stored_keys
from tests.sweeper.support import DAY, T0, all_keys, make_attachment

pytestmark = pytest.mark.django_db

LATER = T0 + 8 * DAY


def test_a_batch_knows_every_stored_key_of_its_rows(alice):
    plain = make_attachment(alice, files=False, thumbnail=False, served=False)
    full = make_attachment(alice, files=False, quarantined=True)
    Derivative.objects.create(
        attachment=full,
        kind="preview",
        storage_key=f"{full.storage_key}.preview.webp",
        content_type="image/webp",
        size=4,
    )
    make_attachment(alice, files=False, created_at=T0 + 4 * DAY)  # not expired at LATER: not in the batch

    with CaptureQueriesContext(connection) as queries:
        rows = list(batch_query(LATER, None, 10, lock=False))
        keys = stored_keys(rows)

    assert keys == {plain.pk: [plain.storage_key], full.pk: keys[full.pk]}
    assert (
        sorted(keys[full.pk]) == sorted(all_keys(full)) and len(keys[full.pk]) == 5
    )  # original, quarantine, served, 2 derived
    # PostgreSQL brings the derivative keys with the rows; elsewhere one more query
    assert len(queries.captured_queries) == (1 if connection.vendor == "postgresql" else 2)
