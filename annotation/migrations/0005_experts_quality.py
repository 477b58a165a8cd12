"""Expert quality: golden references, calibration attempts and answers, control-task results,
and the project's quality settings (calibration threshold and size, retry delay, control-task
rate, pause rule, and the lowest tier for hard tasks)."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0004_assignment_kind_and_tier"),
        ("rubrics", "0002_taxonomy_and_immutability"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='CalibrationAnswer',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('value', models.PositiveSmallIntegerField()),
                ('answered_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['attempt_id', 'task_id', 'rubric_item_id'],
            },
        ),
        migrations.CreateModel(
            name='CalibrationAttempt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('in_progress', 'In progress'), ('passed', 'Passed'), ('failed', 'Failed'), ('stale', 'Stale (rubric changed)')], default='in_progress', max_length=12)),
                ('threshold_pct', models.PositiveSmallIntegerField()),
                ('items_total', models.PositiveIntegerField(default=0)),
                ('items_correct', models.PositiveIntegerField(default=0)),
                ('score_pct', models.DecimalField(blank=True, decimal_places=2, max_digits=5, null=True)),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('stale_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['-started_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='CalibrationTask',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveSmallIntegerField()),
            ],
            options={
                'ordering': ['attempt_id', 'position'],
            },
        ),
        migrations.CreateModel(
            name='ControlResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('items_total', models.PositiveSmallIntegerField()),
                ('items_correct', models.PositiveSmallIntegerField()),
                ('scored_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['-scored_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='GoldenReference',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('value', models.PositiveSmallIntegerField()),
                ('rationale', models.TextField(blank=True)),
                ('created_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['task_id', 'rubric_item_id'],
            },
        ),
        migrations.AddField(
            model_name='project',
            name='calibration_retry_delay_s',
            field=models.PositiveIntegerField(default=3600, help_text='Seconds a failed calibration waits before it can be retried.'),
        ),
        migrations.AddField(
            model_name='project',
            name='calibration_size',
            field=models.PositiveSmallIntegerField(default=10, help_text='Golden tasks drawn for one calibration attempt (10–20).'),
        ),
        migrations.AddField(
            model_name='project',
            name='calibration_threshold_pct',
            field=models.PositiveSmallIntegerField(default=80, help_text='Share of golden items an expert must get right to pass calibration (0–100).'),
        ),
        migrations.AddField(
            model_name='project',
            name='control_pause_below_pct',
            field=models.PositiveSmallIntegerField(default=60, help_text='An expert whose control-task accuracy over the window falls below this is paused.'),
        ),
        migrations.AddField(
            model_name='project',
            name='control_rate_pct',
            field=models.PositiveSmallIntegerField(default=5, help_text='Share of leases that are silent control tasks (0–100).'),
        ),
        migrations.AddField(
            model_name='project',
            name='control_window',
            field=models.PositiveSmallIntegerField(default=10, help_text='Control tasks the pause rule looks back over.'),
        ),
        migrations.AddField(
            model_name='project',
            name='hard_min_tier',
            field=models.CharField(choices=[('bronze', 'Bronze'), ('silver', 'Silver'), ('gold', 'Gold'), ('platinum', 'Platinum')], default='silver', help_text='Lowest tier that takes hard tasks.', max_length=10),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('calibration_threshold_pct__lte', 100)), name='project_calibration_threshold_range'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('calibration_size__gte', 10), ('calibration_size__lte', 20)), name='project_calibration_size_range'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('control_rate_pct__lte', 100)), name='project_control_rate_range'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('control_pause_below_pct__lte', 100)), name='project_control_pause_range'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.CheckConstraint(condition=models.Q(('control_window__gte', 1)), name='project_control_window_positive'),
        ),
        migrations.AddField(
            model_name='calibrationanswer',
            name='rubric_item',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rubrics.rubricitem'),
        ),
        migrations.AddField(
            model_name='calibrationanswer',
            name='task',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.task'),
        ),
        migrations.AddField(
            model_name='calibrationattempt',
            name='expert',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='calibration_attempts', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='calibrationattempt',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='calibration_attempts', to='annotation.project'),
        ),
        migrations.AddField(
            model_name='calibrationattempt',
            name='rubric_version',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rubrics.rubricversion'),
        ),
        migrations.AddField(
            model_name='calibrationanswer',
            name='attempt',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='answers', to='annotation.calibrationattempt'),
        ),
        migrations.AddField(
            model_name='calibrationtask',
            name='attempt',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tasks', to='annotation.calibrationattempt'),
        ),
        migrations.AddField(
            model_name='calibrationtask',
            name='task',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.task'),
        ),
        migrations.AddField(
            model_name='controlresult',
            name='assignment',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='control_result', to='annotation.assignment'),
        ),
        migrations.AddField(
            model_name='controlresult',
            name='expert',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='control_results', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='controlresult',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='control_results', to='annotation.project'),
        ),
        migrations.AddField(
            model_name='goldenreference',
            name='rubric_item',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rubrics.rubricitem'),
        ),
        migrations.AddField(
            model_name='goldenreference',
            name='task',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='golden_references', to='annotation.task'),
        ),
        migrations.AddIndex(
            model_name='calibrationattempt',
            index=models.Index(fields=['expert', 'project', 'status'], name='calibration_expert_idx'),
        ),
        migrations.AddConstraint(
            model_name='calibrationattempt',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'in_progress')), fields=('expert', 'project'), name='calibration_one_open_attempt'),
        ),
        migrations.AddConstraint(
            model_name='calibrationattempt',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['passed', 'failed']), _negated=True), models.Q(('finished_at__isnull', False), ('score_pct__isnull', False)), _connector='OR'), name='calibration_finished_has_score'),
        ),
        migrations.AddConstraint(
            model_name='calibrationattempt',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'in_progress'), _negated=True), models.Q(('finished_at__isnull', True), ('score_pct__isnull', True)), _connector='OR'), name='calibration_open_has_no_score'),
        ),
        migrations.AddConstraint(
            model_name='calibrationattempt',
            constraint=models.CheckConstraint(condition=models.Q(('status', 'stale'), ('stale_at__isnull', True), _connector='OR'), name='calibration_stale_at_matches_status'),
        ),
        migrations.AddConstraint(
            model_name='calibrationattempt',
            constraint=models.CheckConstraint(condition=models.Q(('items_correct__lte', models.F('items_total'))), name='calibration_correct_within_total'),
        ),
        migrations.AddConstraint(
            model_name='calibrationattempt',
            constraint=models.CheckConstraint(condition=models.Q(('threshold_pct__lte', 100)), name='calibration_threshold_range'),
        ),
        migrations.AddConstraint(
            model_name='calibrationanswer',
            constraint=models.UniqueConstraint(fields=('attempt', 'task', 'rubric_item'), name='calibration_answer_once'),
        ),
        migrations.AddConstraint(
            model_name='calibrationanswer',
            constraint=models.CheckConstraint(condition=models.Q(('value__in', [0, 1])), name='calibration_answer_binary'),
        ),
        migrations.AddConstraint(
            model_name='calibrationtask',
            constraint=models.UniqueConstraint(fields=('attempt', 'task'), name='calibration_task_once'),
        ),
        migrations.AddConstraint(
            model_name='calibrationtask',
            constraint=models.UniqueConstraint(fields=('attempt', 'position'), name='calibration_task_position_unique'),
        ),
        migrations.AddConstraint(
            model_name='calibrationtask',
            constraint=models.CheckConstraint(condition=models.Q(('position__gte', 1)), name='calibration_task_position_positive'),
        ),
        migrations.AddIndex(
            model_name='controlresult',
            index=models.Index(fields=['expert', 'project', 'scored_at'], name='control_expert_idx'),
        ),
        migrations.AddConstraint(
            model_name='controlresult',
            constraint=models.CheckConstraint(condition=models.Q(('items_correct__lte', models.F('items_total'))), name='control_correct_within_total'),
        ),
        migrations.AddConstraint(
            model_name='goldenreference',
            constraint=models.UniqueConstraint(fields=('task', 'rubric_item'), name='golden_reference_one_per_item'),
        ),
        migrations.AddConstraint(
            model_name='goldenreference',
            constraint=models.CheckConstraint(condition=models.Q(('value__in', [0, 1])), name='golden_reference_value_binary'),
        ),
    ]
