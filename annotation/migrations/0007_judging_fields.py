"""Judge runs: a claim on each pending result (so two workers never ask twice), and an rps ceiling."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0006_judging_agreement"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgetaskresult",
            name="claimed_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="judgerun",
            constraint=models.CheckConstraint(
                condition=models.Q(("requests_per_second__lte", 50)), name="judge_run_rps_max"
            ),
        ),
    ]
