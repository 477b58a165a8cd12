"""The case library and the FAQ, with trigram indexes for Chinese search on PostgreSQL.

PostgreSQL's full-text search does not segment Chinese, so search matches substrings
(`icontains`, which Django writes as `UPPER(col::text) LIKE UPPER(%s)`) and ranks by trigram
similarity; the GIN trigram indexes are on that same expression so the planner can use them.
SQLite has neither pg_trgm nor GIN: `TrigramExtension` does nothing there, and the indexes
are PostgreSQL statements only (core.db.VendorSQL).
"""
import django.db.models.deletion
from django.contrib.postgres.operations import TrigramExtension
from django.conf import settings
from django.db import migrations, models

from core.db import VendorSQL

SEARCHED = {
    "annotation_case": ("title", "problem", "disagreement", "discussion", "reading"),
    "annotation_faqentry": ("question", "answer"),
}
TRIGRAM_INDEXES = [f'CREATE INDEX "{table}_{column}_trgm" ON "{table}" USING gin ((UPPER("{column}"::text)) gin_trgm_ops)'
                   for table, columns in SEARCHED.items() for column in columns]


class PostgresTrigramExtension(TrigramExtension):
    """pg_trgm on PostgreSQL only: Django's operation skips other vendors going forwards, not backwards."""

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


DROP_TRIGRAM_INDEXES = [f'DROP INDEX IF EXISTS "{table}_{column}_trgm"' for table, columns in SEARCHED.items()
                        for column in columns]


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0018_appeals'),
        ('rubrics', '0004_rubricversion_published_by'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        PostgresTrigramExtension(),
        migrations.CreateModel(
            name='Case',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('title', models.CharField(max_length=200)),
                ('problem', models.TextField()),
                ('disagreement', models.TextField(blank=True)),
                ('discussion', models.TextField(blank=True)),
                ('reading', models.TextField(help_text='The agreed reading of the item.')),
                ('outcome', models.CharField(blank=True, choices=[('hit', 'Hit'), ('miss', 'Miss'), ('ambiguous', 'Item is ambiguous')], max_length=10)),
                ('scenes', models.JSONField(blank=True, default=list)),
                ('status', models.CharField(choices=[('draft', 'Draft'), ('published', 'Published')], default='draft', max_length=10)),
                ('read_count', models.PositiveIntegerField(default=0)),
                ('created_at', models.DateTimeField()),
                ('updated_at', models.DateTimeField()),
                ('published_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('dimensions', models.ManyToManyField(blank=True, related_name='cases', to='rubrics.dimension')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cases', to='annotation.project')),
                ('published_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('question', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='cases', to='annotation.question')),
            ],
            options={
                'ordering': ['-published_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='CaseItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('item_key', models.CharField(max_length=110)),
                ('question_ref', models.CharField(help_text="The question's external id.", max_length=100)),
                ('case', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='annotation.case')),
            ],
            options={
                'ordering': ['case_id', 'question_ref', 'item_key'],
            },
        ),
        migrations.CreateModel(
            name='CaseRead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('read_at', models.DateTimeField()),
                ('case', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reads', to='annotation.case')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='FaqEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('question', models.TextField()),
                ('asked_at', models.DateTimeField()),
                ('item_key', models.CharField(blank=True, max_length=110)),
                ('scenes', models.JSONField(blank=True, default=list)),
                ('answer', models.TextField(blank=True)),
                ('answered_at', models.DateTimeField(blank=True, null=True)),
                ('answered_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('asked_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('dimensions', models.ManyToManyField(blank=True, related_name='faq_entries', to='rubrics.dimension')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='faq_entries', to='annotation.project')),
                ('source_question', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='faq_entries', to='annotation.question')),
            ],
            options={
                'verbose_name': 'FAQ entry',
                'verbose_name_plural': 'FAQ entries',
                'ordering': ['-answered_at', '-asked_at', '-id'],
            },
        ),
        migrations.AddIndex(
            model_name='case',
            index=models.Index(fields=['project', 'status', '-read_count'], name='case_project_most_read_idx'),
        ),
        migrations.AddConstraint(
            model_name='case',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['draft', 'published'])), name='case_status_known'),
        ),
        migrations.AddConstraint(
            model_name='case',
            constraint=models.CheckConstraint(condition=models.Q(('outcome', ''), ('outcome__in', ['hit', 'miss', 'ambiguous']), _connector='OR'), name='case_outcome_known'),
        ),
        migrations.AddConstraint(
            model_name='case',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('published_at__isnull', True), ('status', 'draft')), models.Q(('published_at__isnull', False), ('status', 'published')), _connector='OR'), name='case_published_at_matches_status'),
        ),
        migrations.AddIndex(
            model_name='caseitem',
            index=models.Index(fields=['item_key'], name='case_item_key_idx'),
        ),
        migrations.AddConstraint(
            model_name='caseitem',
            constraint=models.UniqueConstraint(fields=('case', 'item_key'), name='case_item_unique'),
        ),
        migrations.AddConstraint(
            model_name='caseread',
            constraint=models.UniqueConstraint(fields=('case', 'user'), name='case_read_once_per_user'),
        ),
        migrations.AddIndex(
            model_name='faqentry',
            index=models.Index(fields=['project', 'answered_at'], name='faq_project_answered_idx'),
        ),
        migrations.AddConstraint(
            model_name='faqentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('answer', ''), ('answered_at__isnull', True)), models.Q(models.Q(('answer', ''), _negated=True), ('answered_at__isnull', False)), _connector='OR'), name='faq_answered_at_matches_answer'),
        ),
        VendorSQL(postgresql=TRIGRAM_INDEXES, sqlite=[], reverse_postgresql=DROP_TRIGRAM_INDEXES, reverse_sqlite=[]),
    ]
