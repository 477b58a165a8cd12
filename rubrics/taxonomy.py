"""The HeartBench taxonomy: 15 abilities under 5 categories, plus the gate dimension "其他".

(code, Chinese name, English name, category)
"""
DIMENSIONS: list[tuple[str, str, str, str]] = [
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
GATE_NAME_ZH = "其他"


def taxonomy_ensure(dimension_model=None) -> int:
    """Create any missing taxonomy rows (tests after a flush use it; the data migration has its own copy)."""
    if dimension_model is None:
        from rubrics.models import Dimension as dimension_model
    existing = set(dimension_model.objects.values_list("code", flat=True))
    missing = [
        dimension_model(code=code, name_zh=zh, name_en=en, category=category, is_gate=category == "gate",
                        sort_order=order)
        for order, (code, zh, en, category) in enumerate(DIMENSIONS) if code not in existing
    ]
    dimension_model.objects.bulk_create(missing)
    return len(missing)
