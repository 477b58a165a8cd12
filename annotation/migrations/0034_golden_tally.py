"""The stored golden tally (annotation.quality.golden_tally), backfilled from the existing history.

The backfill counts what `annotation.quality.portrait.golden_counts_grouped` counts, with the
historical models: labels of work assignments on golden tasks and answers of finished
calibration attempts, each scored against the task's reference for the item, grouped by
expert, project and dimension in the database (two queries, one batch insert).
"""
from collections import defaultdict

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Count, F, OuterRef, Q, Subquery


def tally_backfill(apps, schema_editor):
    label = apps.get_model("annotation", "Label")
    answer = apps.get_model("annotation", "CalibrationAnswer")
    reference = apps.get_model("annotation", "GoldenReference")
    tally = apps.get_model("annotation", "GoldenTally")
    ref = Subquery(reference.objects.filter(task=OuterRef("task"), rubric_item=OuterRef("rubric_item"))
                   .values("value")[:1])
    sources = (
        label.objects.filter(assignment__kind="work", task__is_golden=True)
        .annotate(e=F("assignment__expert_id"), p=F("task__project_id")),
        answer.objects.filter(attempt__finished_at__isnull=False)
        .annotate(e=F("attempt__expert_id"), p=F("attempt__project_id")),
    )
    counts: dict[tuple[int, int, int], list[int]] = defaultdict(lambda: [0, 0])
    for qs in sources:
        rows = (qs.annotate(ref=ref).filter(ref__isnull=False).values("e", "p", "rubric_item__dimension_id")
                .annotate(total=Count("pk"), correct=Count("pk", filter=Q(value=F("ref")))).order_by())
        for row in rows:
            key = (row["e"], row["p"], row["rubric_item__dimension_id"])
            counts[key][0] += row["total"]
            counts[key][1] += row["correct"]
    tally.objects.bulk_create(
        (tally(expert_id=e, project_id=p, dimension_id=d, total=t, correct=c)
         for (e, p, d), (t, c) in sorted(counts.items()) if t), batch_size=2000)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0033_blind_test_convergence'),
        ('rubrics', '0004_rubricversion_published_by'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='GoldenTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('total', models.PositiveIntegerField(default=0)),
                ('correct', models.PositiveIntegerField(default=0)),
                ('dimension', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='rubrics.dimension')),
                ('expert', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.project')),
            ],
            options={
                'ordering': ['expert_id', 'project_id', 'dimension_id'],
                'constraints': [models.UniqueConstraint(fields=('expert', 'project', 'dimension'), name='golden_tally_one_per_dimension'), models.CheckConstraint(condition=models.Q(('correct__lte', models.F('total'))), name='golden_tally_correct_within_total')],
            },
        ),
        migrations.RunPython(tally_backfill, migrations.RunPython.noop),
    ]
