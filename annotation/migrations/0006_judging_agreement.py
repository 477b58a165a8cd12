"""Reserved for the Quality issue (judge runs, judge labels, agreement reports)."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("annotation", "0005_experts_quality")]

    operations: list = []
