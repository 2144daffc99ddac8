"""An index for the console's ref search: `ref:wedding:smith` is a prefix (LIKE 'wedding:smith%').

On PostgreSQL a plain btree serves LIKE prefixes only under the C collation, so the
index uses varchar_pattern_ops (which also serves the exact `ref =` of the "same ref"
link). SQLite gets a plain index: Django's startswith there is a case-insensitive LIKE
no index serves, but the exact match still uses it.
"""

from django.db import migrations

INDEX = "att_ref_prefix"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON attachments_attachment "
                              "(ref varchar_pattern_ops)")
    else:
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON attachments_attachment (ref)")


def drop(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("attachments", "0020_variant_claims")]
    operations = [migrations.RunPython(create, drop)]
