"""Reserved for the Experts issue (calibration, golden references, control tasks)."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("annotation", "0004_assignment_kind_and_tier")]

    operations: list = []
