"""Appeals of rejections and statement lines; the ledger's `adjustment` kind for their corrections."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.db import VendorSQL

# SQLite rebuilds payments_ledgerentry for the changed kind and constraints, and the
# append-only triggers of 0002 go with the dropped table: create them again, after the
# rebuild going forward and after the reverse rebuild going back.
_PERIOD_CLOSED = "EXISTS (SELECT 1 FROM payments_period WHERE id = NEW.period_id AND status = 'closed')"
SQLITE_LEDGER_GUARD = [
    f"CREATE TRIGGER IF NOT EXISTS payments_ledgerentry_{name} BEFORE {event} ON payments_ledgerentry "
    f"FOR EACH ROW{when} BEGIN SELECT RAISE(ABORT, '{event} on payments_ledgerentry is refused: "
    f"payments rows are append-only'); END"
    for name, event, when in (("no_update", "UPDATE", ""), ("no_delete", "DELETE", ""),
                              ("period_open", "INSERT", f" WHEN {_PERIOD_CLOSED}"))
]
SQLITE_LEDGER_DROP = [f"DROP TRIGGER IF EXISTS payments_ledgerentry_{name}"
                      for name in ("no_update", "no_delete", "period_open")]


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0018_appeals'),
        ('payments', '0002_append_only_triggers'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        VendorSQL(postgresql=[], sqlite=[], reverse_postgresql=[], reverse_sqlite=SQLITE_LEDGER_GUARD),
        migrations.CreateModel(
            name='Appeal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('rejection', 'Rejection'), ('statement_line', 'Statement line')], max_length=16, verbose_name='kind')),
                ('status', models.CharField(choices=[('open', 'Open'), ('accepted', 'Accepted'), ('denied', 'Denied')], default='open', max_length=10, verbose_name='status')),
                ('reason', models.TextField(verbose_name='reason')),
                ('created_at', models.DateTimeField(verbose_name='created at')),
                ('rejected_at', models.DateTimeField(blank=True, null=True, verbose_name='rejected at')),
                ('rejected_reason', models.CharField(blank=True, choices=[('spam', 'Spam'), ('copy_paste', 'Copy-paste'), ('guidelines', 'Guideline violation'), ('other', 'Other')], max_length=12, verbose_name='rejection reason')),
                ('rejected_text', models.TextField(blank=True, verbose_name='rejection text')),
                ('decided_at', models.DateTimeField(blank=True, null=True, verbose_name='decided at')),
                ('decision_reason', models.TextField(blank=True, verbose_name='decision reason')),
            ],
            options={
                'verbose_name': 'appeal',
                'verbose_name_plural': 'appeals',
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='ledgerentry',
            name='ledger_one_entry_per_assignment_kind',
        ),
        migrations.RemoveConstraint(
            model_name='ledgerentry',
            name='ledger_kind_shape',
        ),
        migrations.AlterField(
            model_name='ledgerentry',
            name='kind',
            field=models.CharField(choices=[('earning', 'Earning'), ('reversal', 'Reversal'), ('adjustment', 'Appeal correction')], max_length=10, verbose_name='kind'),
        ),
        migrations.AddConstraint(
            model_name='ledgerentry',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'adjustment'), _negated=True), fields=('assignment', 'kind'), name='ledger_one_entry_per_assignment_kind'),
        ),
        migrations.AddConstraint(
            model_name='ledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('amount__gte', 0), ('kind', 'earning'), ('reverses__isnull', True)), models.Q(('amount__lte', 0), ('kind', 'reversal'), ('reverses__isnull', False), models.Q(('reason', ''), _negated=True)), models.Q(('amount__gt', 0), ('kind', 'adjustment'), ('reverses__isnull', True), models.Q(('reason', ''), _negated=True)), _connector='OR'), name='ledger_kind_shape'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='assignment',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='appeals', to='annotation.assignment', verbose_name='assignment'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='correction',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='appeal_correction', to='payments.ledgerentry', verbose_name='correction'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='decided_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='decided by'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='entry',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='appeals', to='payments.ledgerentry', verbose_name='statement line'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='expert',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='appeals', to=settings.AUTH_USER_MODEL, verbose_name='expert'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='appeals', to='annotation.project', verbose_name='project'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='rejected_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='rejected by'),
        ),
        migrations.AddIndex(
            model_name='appeal',
            index=models.Index(fields=['project', 'status'], name='appeal_project_status_idx'),
        ),
        migrations.AddIndex(
            model_name='appeal',
            index=models.Index(fields=['expert', 'created_at'], name='appeal_expert_idx'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'rejection')), fields=('assignment',), name='appeal_one_per_rejection'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'statement_line')), fields=('entry',), name='appeal_one_per_statement_line'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('entry__isnull', True), ('kind', 'rejection'), ('rejected_at__isnull', False)), models.Q(('entry__isnull', False), ('kind', 'statement_line')), _connector='OR'), name='appeal_kind_shape'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='appeal_reason_given'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('correction__isnull', True), ('decided_at__isnull', True), ('status', 'open')), models.Q(('decided_at__isnull', False), ('status', 'accepted'), models.Q(('decision_reason', ''), _negated=True)), models.Q(('correction__isnull', True), ('decided_at__isnull', False), ('status', 'denied'), models.Q(('decision_reason', ''), _negated=True)), _connector='OR'), name='appeal_status_shape'),
        ),
        VendorSQL(postgresql=[], sqlite=SQLITE_LEDGER_GUARD, reverse_postgresql=[],
                  reverse_sqlite=SQLITE_LEDGER_DROP),
    ]
