from django.db import migrations

from core.db import VendorSQL

# The taxonomy as it stood when this migration was written, copied from
# rubrics.taxonomy.DIMENSIONS rather than imported: a later edit there must not change
# what this migration loads (a changed taxonomy gets its own data migration).
# (code, Chinese name, English name, category)
DIMENSIONS = [
    ("verbal-expression", "言语表达", "Verbal expression", "personality"),
    ("curiosity", "好奇心", "Curiosity", "personality"),
    ("warmth", "温暖", "Warmth", "personality"),
    ("first-person", "第一人称使用", "First-person usage", "personality"),
    ("autonomy", "自主性", "Autonomy", "personality"),
    ("humor", "幽默", "Humor", "personality"),
    ("self-awareness", "自我认知", "Self-awareness", "personality"),
    ("emotional-coping", "情绪应对", "Emotional coping", "emotion"),
    ("emotional-understanding", "情绪理解", "Emotional understanding", "emotion"),
    ("emotional-perception", "情绪感知", "Emotional perception", "emotion"),
    ("emotional-reaction", "情绪反应", "Emotional reaction", "emotion"),
    ("proactivity", "主动性", "Proactivity", "social"),
    ("relationship-building", "关系构建", "Relationship building", "social"),
    ("motivation", "动机", "Motivation", "motivation"),
    ("morality", "道德", "Morality", "morality"),
    ("other", "其他", "Other (gate)", "gate"),
]


def load_taxonomy(apps, schema_editor):
    Dimension = apps.get_model("rubrics", "Dimension")
    for order, (code, zh, en, category) in enumerate(DIMENSIONS):
        Dimension.objects.update_or_create(
            code=code,
            defaults={"name_zh": zh, "name_en": en, "category": category,
                      "is_gate": category == "gate", "sort_order": order},
        )


def unload_taxonomy(apps, schema_editor):
    # Only the rows this migration loaded; rubric items still pointing at one (PROTECT)
    # stop the rollback, because unloading a taxonomy in use would orphan them.
    Dimension = apps.get_model("rubrics", "Dimension")
    Dimension.objects.filter(code__in=[code for code, *_ in DIMENSIONS]).delete()


PG_ITEM_GUARD = """
CREATE OR REPLACE FUNCTION rubrica_refuse_published_item() RETURNS trigger AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND EXISTS (
       SELECT 1 FROM rubrics_rubricversion WHERE id = OLD.version_id AND status = 'published') THEN
    RAISE EXCEPTION 'rubric version % is published and cannot change', OLD.version_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND EXISTS (
       SELECT 1 FROM rubrics_rubricversion WHERE id = NEW.version_id AND status = 'published') THEN
    RAISE EXCEPTION 'rubric version % is published and cannot change', NEW.version_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""
PG_VERSION_GUARD = """
CREATE OR REPLACE FUNCTION rubrica_refuse_published_version() RETURNS trigger AS $$
BEGIN
  IF OLD.status = 'published' THEN
    RAISE EXCEPTION 'rubric version % is published and cannot change', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""
MSG = "'published rubric versions cannot change'"

SQLITE = [
    f"""CREATE TRIGGER rubrica_item_insert_guard BEFORE INSERT ON rubrics_rubricitem
        WHEN EXISTS (SELECT 1 FROM rubrics_rubricversion WHERE id = NEW.version_id AND status = 'published')
        BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_item_update_guard BEFORE UPDATE ON rubrics_rubricitem
        WHEN EXISTS (SELECT 1 FROM rubrics_rubricversion WHERE id IN (OLD.version_id, NEW.version_id)
                     AND status = 'published')
        BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_item_delete_guard BEFORE DELETE ON rubrics_rubricitem
        WHEN EXISTS (SELECT 1 FROM rubrics_rubricversion WHERE id = OLD.version_id AND status = 'published')
        BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_version_update_guard BEFORE UPDATE ON rubrics_rubricversion
        WHEN OLD.status = 'published' BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_version_delete_guard BEFORE DELETE ON rubrics_rubricversion
        WHEN OLD.status = 'published' BEGIN SELECT RAISE(ABORT, {MSG}); END""",
]

REVERSE_SQLITE = [
    f"DROP TRIGGER IF EXISTS {name}" for name in (
        "rubrica_item_insert_guard", "rubrica_item_update_guard", "rubrica_item_delete_guard",
        "rubrica_version_update_guard", "rubrica_version_delete_guard",
    )
]
REVERSE_POSTGRESQL = [
    "DROP TRIGGER IF EXISTS rubrica_version_guard ON rubrics_rubricversion",
    "DROP TRIGGER IF EXISTS rubrica_item_guard ON rubrics_rubricitem",
    "DROP FUNCTION IF EXISTS rubrica_refuse_published_version()",
    "DROP FUNCTION IF EXISTS rubrica_refuse_published_item()",
]


class Migration(migrations.Migration):
    dependencies = [("rubrics", "0001_initial")]

    operations = [
        migrations.RunPython(load_taxonomy, unload_taxonomy),
        VendorSQL(
            postgresql=[
                PG_ITEM_GUARD,
                PG_VERSION_GUARD,
                "CREATE TRIGGER rubrica_item_guard BEFORE INSERT OR UPDATE OR DELETE ON rubrics_rubricitem "
                "FOR EACH ROW EXECUTE FUNCTION rubrica_refuse_published_item()",
                "CREATE TRIGGER rubrica_version_guard BEFORE UPDATE OR DELETE ON rubrics_rubricversion "
                "FOR EACH ROW EXECUTE FUNCTION rubrica_refuse_published_version()",
            ],
            sqlite=SQLITE,
            reverse_postgresql=REVERSE_POSTGRESQL,
            reverse_sqlite=REVERSE_SQLITE,
        ),
    ]
