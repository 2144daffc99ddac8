"""The intent on PostgreSQL: row, room in the tenant's counter and audit entry in ONE statement.

As a transaction (BEGIN, UPDATE the counter, INSERT the row, INSERT the audit
entry, COMMIT) an intent makes five round trips and costs about a sixth more CPU
and time; this makes one (bench/tricks_bench.py measures it with and without).

The ORM compiles every part from the models; only the
`WITH room AS (UPDATE … RETURNING 1), made AS (INSERT … SELECT … FROM room RETURNING 1)
INSERT … SELECT … FROM made` around them is ours, made by splitting each compiled
INSERT at " VALUES (". That leans on Django's SQL classes (InsertQuery,
UpdateQuery, not documented API) and on the shape of the INSERT they compile:
tests/quotas/test_fastpath_insert.py fails when either changes (pyproject pins
Django 5.2). The subject's pending cap is a NOT EXISTS in the counter's UPDATE.
False (not PostgreSQL, no room, the cap reached, no counter yet, an INSERT of
another shape, a subject quota set) sends the caller to the reads and
quotas.quota_reserve in a transaction, which say why.
"""

from __future__ import annotations

from typing import cast

from django.db import connection
from django.db.models import Exists, Model, QuerySet
from django.db.models.sql import InsertQuery, UpdateQuery

from ...models import Attachment
from ...services.quotas import counter_with_room, room_taken, subject_quota_on


def _insert_sql(row: Model, *, with_pk: bool) -> tuple[str, str, tuple] | None:
    """(`INSERT INTO t (cols)`, `values`, params) of the row's compiled INSERT.

    None when it is not of the shape `… VALUES (…)`.
    """
    meta = row._meta
    fields = [f for f in meta.local_concrete_fields if with_pk or f is not meta.auto_field]
    query = InsertQuery(type(row))
    query.insert_values(fields, [row])
    [(sql, params)] = query.get_compiler(connection.alias).as_sql()
    head, found, values = sql.partition(" VALUES (")
    if not found or not values.endswith(")"):
        return None
    return head, values[:-1], tuple(params)


def attachment_insert_reserving(attachment: Attachment, audit: Model, *, unless: QuerySet) -> bool:
    """Insert a new row, take its room in the counter and insert `audit`: one statement.

    Nothing is done when `unless` finds a row (the subject's pending cap is reached).
    False = not done (the caller takes the transaction path, which says why).
    """
    if connection.vendor != "postgresql" or subject_quota_on():
        return False
    counter = counter_with_room(attachment.tenant, attachment.declared_size).filter(~Exists(unless))
    update = cast(UpdateQuery, counter.query.chain(UpdateQuery))
    update.add_update_values(room_taken(attachment.declared_size))
    update_sql, update_params = update.get_compiler(connection.alias).as_sql()
    row, entry = _insert_sql(attachment, with_pk=True), _insert_sql(audit, with_pk=False)
    if row is None or entry is None:
        return False  # an INSERT we cannot rewrite (the test fails first): the transaction works
    sql = (
        f"WITH room AS ({update_sql} RETURNING 1), "
        f"made AS ({row[0]} SELECT {row[1]} FROM room RETURNING 1) "
        f"{entry[0]} SELECT {entry[1]} FROM made"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, (*update_params, *row[2], *entry[2]))
        inserted = cursor.rowcount == 1
    if inserted:
        attachment._state.adding = False
        attachment._state.db = connection.alias
    return inserted
