from django.db import migrations

INDEX = "attachments_text_fts"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON attachments_attachment "
            "USING GIN (to_tsvector('simple'::regconfig, COALESCE(text, '')))"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("attachments", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
