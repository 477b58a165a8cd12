from django.db import migrations, models


class Migration(migrations.Migration):
    """The drain's look at the pending batches of follow-up work, oldest first (core.outbox.follow_ups_drain)."""

    dependencies = [
        ("core", "0002_outbox_steps_done"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="outboxtask",
            index=models.Index(condition=models.Q(("done_at__isnull", True), ("name", "core.follow_ups_run")),
                               fields=["id"], name="outbox_batch_pending_idx"),
        ),
    ]
