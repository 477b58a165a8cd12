"""Ties and thin panels get their own zones; rejected submissions; extra experts for ties."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import F

from core.db import VendorSQL

# SQLite rebuilds annotation_assignment for the new columns and constraints, and its
# slot-guard triggers (0003, 0008) go with the dropped table: create them again, after
# the rebuild going forward and after the reverse rebuild going back.
SQLITE_WHEN = "WHEN NEW.slot > (SELECT overlap FROM annotation_task WHERE id = NEW.task_id)"
SQLITE_BODY = "BEGIN SELECT RAISE(ABORT, 'assignment slot beyond the task overlap'); END"
SQLITE_GUARD = [
    f"CREATE TRIGGER IF NOT EXISTS rubrica_assignment_slot_insert BEFORE INSERT ON annotation_assignment "
    f"{SQLITE_WHEN} {SQLITE_BODY}",
    f"CREATE TRIGGER IF NOT EXISTS rubrica_assignment_slot_update BEFORE UPDATE OF slot, task_id "
    f"ON annotation_assignment {SQLITE_WHEN} {SQLITE_BODY}",
]


def zones_reclassify(apps, schema_editor):
    """Existing verdicts: a 1-1 or 2-2 tie was stored as a miss, a panel of one as unanimous."""
    consensus = apps.get_model("annotation", "ItemConsensus")
    consensus.objects.filter(total_votes=F("hit_votes") * 2).update(zone="tied", majority=None, provenance="")
    consensus.objects.filter(total_votes=1).update(zone="single", provenance="single")
    consensus.objects.filter(zone="unanimous").update(provenance="unanimous")
    consensus.objects.filter(zone="split").update(provenance="majority")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0014_export_jobs'),
        ('rubrics', '0003_rubric_version_guidelines'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        VendorSQL(postgresql=[], sqlite=[], reverse_postgresql=[], reverse_sqlite=SQLITE_GUARD),
        migrations.RemoveConstraint(
            model_name='assignment',
            name='assignment_submitted_at_matches_status',
        ),
        migrations.RemoveConstraint(
            model_name='itemconsensus',
            name='consensus_majority_binary',
        ),
        migrations.AddField(
            model_name='assignment',
            name='rejected_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='assignment',
            name='rejected_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='assignment',
            name='rejected_reason',
            field=models.CharField(blank=True, choices=[('spam', 'Spam'), ('copy_paste', 'Copy-paste'), ('guidelines', 'Guideline violation'), ('other', 'Other')], max_length=12),
        ),
        migrations.AddField(
            model_name='assignment',
            name='rejected_text',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='itemconsensus',
            name='provenance',
            field=models.CharField(blank=True, choices=[('unanimous', 'Unanimous'), ('majority', 'Majority'), ('extra_expert', 'Extra expert'), ('adjudicated', 'Adjudicated'), ('single', 'Single label')], max_length=12),
        ),
        migrations.AddField(
            model_name='project',
            name='tie_extra_cap',
            field=models.PositiveSmallIntegerField(default=2, help_text='Most extra experts one task may get to resolve ties (0–5).'),
        ),
        migrations.AddField(
            model_name='project',
            name='tie_extra_experts',
            field=models.BooleanField(default=True, help_text='Draw one more expert for a task whose panel leaves an item tied.'),
        ),
        migrations.AddField(
            model_name='task',
            name='extra_slots',
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='assignment',
            name='status',
            field=models.CharField(choices=[('leased', 'Leased'), ('submitted', 'Submitted'), ('expired', 'Expired'), ('released', 'Given back'), ('rejected', 'Rejected')], default='leased', max_length=10),
        ),
        migrations.AlterField(
            model_name='itemconsensus',
            name='majority',
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='itemconsensus',
            name='zone',
            field=models.CharField(choices=[('unanimous', 'Unanimous'), ('split', 'Split'), ('tied', 'Tied'), ('single', 'Single label')], max_length=10),
        ),
        migrations.RunPython(zones_reclassify, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='assignment',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ('submitted', 'rejected')), ('submitted_at__isnull', False)), models.Q(models.Q(('status__in', ('submitted', 'rejected')), _negated=True), ('submitted_at__isnull', True)), _connector='OR'), name='assignment_submitted_at_matches_status'),
        ),
        migrations.AddConstraint(
            model_name='assignment',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('rejected_at__isnull', False), ('rejected_reason__in', ['spam', 'copy_paste', 'guidelines', 'other']), ('status', 'rejected')), models.Q(models.Q(('status', 'rejected'), _negated=True), ('rejected_at__isnull', True), ('rejected_reason', '')), _connector='OR'), name='assignment_rejected_matches_status'),
        ),
        migrations.AddConstraint(
            model_name='itemconsensus',
            constraint=models.CheckConstraint(condition=models.Q(('majority__in', [0, 1]), ('majority__isnull', True), _connector='OR'), name='consensus_majority_binary'),
        ),
        migrations.AddConstraint(
            model_name='itemconsensus',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('majority__isnull', True), ('provenance', ''), ('zone', 'tied')), models.Q(('majority__isnull', False), ('zone__in', ['unanimous', 'split', 'single'])), _connector='OR'), name='consensus_tied_has_no_majority'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('tie_extra_cap__lte', 5)), name='project_tie_extra_cap_range'),
        ),
        migrations.AddConstraint(
            model_name='task',
            constraint=models.CheckConstraint(condition=models.Q(('extra_slots__lt', models.F('overlap'))), name='task_extra_within_overlap'),
        ),
            VendorSQL(postgresql=[], sqlite=SQLITE_GUARD, reverse_postgresql=[], reverse_sqlite=[
            "DROP TRIGGER IF EXISTS rubrica_assignment_slot_insert",
            "DROP TRIGGER IF EXISTS rubrica_assignment_slot_update",
        ]),
    ]
