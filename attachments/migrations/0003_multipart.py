from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("attachments", "0002_text_search_index")]

    operations = [
        migrations.AddField(
            model_name="attachment",
            name="multipart_upload_id",
            field=models.CharField(blank=True, max_length=1024, null=True),
        ),
    ]
