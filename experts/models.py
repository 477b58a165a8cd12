"""Who judges: accounts with a role, and expert profiles."""
import secrets

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    EXPERT = "expert", _("Expert")
    PM = "pm", _("Project manager")
    ADMIN = "admin", _("Administrator")


class User(AbstractUser):
    """A platform account. The role decides which pages and endpoints it reaches."""

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.EXPERT)

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"

    @property
    def is_expert(self) -> bool:
        return self.role == Role.EXPERT

    @property
    def is_pm(self) -> bool:
        return self.role == Role.PM

    @property
    def is_platform_admin(self) -> bool:
        return self.role == Role.ADMIN or self.is_superuser


class Tier(models.TextChoices):
    BRONZE = "bronze", _("Bronze")
    SILVER = "silver", _("Silver")
    GOLD = "gold", _("Gold")
    PLATINUM = "platinum", _("Platinum")


TIER_ORDER = [Tier.BRONZE, Tier.SILVER, Tier.GOLD, Tier.PLATINUM]


def new_pseudonym() -> str:
    return "E-" + secrets.token_hex(4).upper()


class ExpertProfile(models.Model):
    """An expert's standing on the platform. `pseudonym` is what exports and peers see."""

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        PAUSED = "paused", _("Paused")

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="expert_profile")
    pseudonym = models.CharField(max_length=20, unique=True, default=new_pseudonym)
    credentials = models.CharField(max_length=200, blank=True)
    languages = models.CharField(max_length=100, blank=True, default="zh")
    weekly_capacity = models.PositiveIntegerField(default=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    tier = models.CharField(max_length=10, choices=Tier.choices, default=Tier.BRONZE)
    max_concurrent_leases = models.PositiveSmallIntegerField(default=1)
    specialties = models.ManyToManyField("rubrics.Dimension", blank=True, related_name="specialists")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(max_concurrent_leases__gte=1), name="expert_lease_limit_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pseudonym} ({self.user.username})"

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE
