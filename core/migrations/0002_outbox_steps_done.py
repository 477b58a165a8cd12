from django.db import migrations, models


class Migration(migrations.Migration):
    """A batch of follow-up work counts its tasks as each one commits (core.outbox.follow_ups_run)."""

    dependencies = [
        ("core", "0001_outbox"),
    ]

    operations = [
        migrations.AddField(
            model_name="outboxtask",
            name="steps_done",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
