"""Project setup: lifecycle state, archive time, due date, and the append-only setting history.

The history refuses UPDATE in the database (like the ledger): a recorded change is what
happened. DELETE stays possible so that deleting a project still cascades.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.db import VendorSQL

PG_REFUSE_UPDATE = '''
CREATE OR REPLACE FUNCTION annotation_setting_change_refuse_update() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION 'UPDATE on % is refused: setting changes are append-only', TG_TABLE_NAME
    USING ERRCODE = 'check_violation';
END $$ LANGUAGE plpgsql;
'''


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0011_task_skip'),
        ('rubrics', '0002_taxonomy_and_immutability'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ProjectSettingChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('setting', models.CharField(max_length=40)),
                ('old_value', models.TextField(blank=True)),
                ('new_value', models.TextField(blank=True)),
                ('changed_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['-changed_at', '-id'],
            },
        ),
        migrations.AddField(
            model_name='project',
            name='archived_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='project',
            name='due_date',
            field=models.DateField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='project',
            name='state',
            field=models.CharField(choices=[('active', 'Active'), ('paused', 'Paused'), ('closed', 'Closed')], default='active', max_length=10),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('state__in', ['active', 'paused', 'closed'])), name='project_state_known'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('archived_at__isnull', True), ('state', 'closed'), _connector='OR'), name='project_archived_only_closed'),
        ),
        migrations.AddField(
            model_name='projectsettingchange',
            name='changed_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='projectsettingchange',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='setting_changes', to='annotation.project'),
        ),
        migrations.AddIndex(
            model_name='projectsettingchange',
            index=models.Index(fields=['project', '-changed_at'], name='setting_change_project_idx'),
        ),
        VendorSQL(
            postgresql=[
                PG_REFUSE_UPDATE,
                "CREATE TRIGGER annotation_setting_change_append_only BEFORE UPDATE "
                "ON annotation_projectsettingchange FOR EACH ROW "
                "EXECUTE FUNCTION annotation_setting_change_refuse_update()",
            ],
            sqlite=[
                "CREATE TRIGGER annotation_setting_change_append_only BEFORE UPDATE "
                "ON annotation_projectsettingchange "
                "BEGIN SELECT RAISE(ABORT, 'setting changes are append-only'); END",
            ],
            reverse_postgresql=[
                "DROP TRIGGER IF EXISTS annotation_setting_change_append_only ON annotation_projectsettingchange",
                "DROP FUNCTION IF EXISTS annotation_setting_change_refuse_update()",
            ],
            reverse_sqlite=["DROP TRIGGER IF EXISTS annotation_setting_change_append_only"],
        ),
    ]
