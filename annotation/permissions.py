"""Who may do what, on which project: guardian object permissions plus the account role."""
from django.contrib.contenttypes.models import ContentType
from django.db.models import BooleanField, CharField, Exists, Expression, ExpressionWrapper, OuterRef, Q, Value
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import assign_perm, remove_perm

from experts.models import User

MANAGE = "annotation.manage_project"
ANNOTATE = "annotation.annotate_project"


def _has_object_perm(user: User, codename: str, project) -> bool:
    """Whether `user` holds `codename` on `project`, directly or through a group: one query.

    The same answer as guardian's `ObjectPermissionChecker(user).has_perm` (an inactive
    user holds nothing, a superuser everything), which asks twice, once for the user's own
    and once for their groups' permissions. Read fresh on every call, never cached.
    """
    if not user.is_active:
        return False
    if user.is_superuser:
        return True
    content_type = ContentType.objects.get_for_model(project)  # cached in the process
    where = {"content_type_id": content_type.pk, "object_pk": str(project.pk), "permission__codename": codename}
    direct = UserObjectPermission.objects.filter(user_id=user.pk, **where).values("pk")
    grouped = GroupObjectPermission.objects.filter(group__user=user.pk, **where).values("pk")
    return direct.union(grouped, all=True).exists()


def project_content_type_id() -> int:
    return ContentType.objects.get_by_natural_key("annotation", "project").pk  # cached in the process


def _object_perm_expression(user: User, codename: str, content_type_id: int | None = None) -> Expression:
    """`_has_object_perm` for each project row of a query (`OuterRef("pk")`), as a boolean expression."""
    if not user.is_active:
        return Value(False)
    if user.is_superuser:
        return Value(True)
    where = {"content_type_id": content_type_id if content_type_id is not None else project_content_type_id(),
             "object_pk": Cast(OuterRef("pk"), CharField()), "permission__codename": codename}
    direct = UserObjectPermission.objects.filter(user_id=user.pk, **where)
    grouped = GroupObjectPermission.objects.filter(group__user=user.pk, **where)
    return ExpressionWrapper(Q(Exists(direct)) | Q(Exists(grouped)), output_field=BooleanField())


def can_annotate_expression(user: User, content_type_id: int | None = None) -> Expression:
    """`can_annotate` as an annotation of a Project query: read with the project, in its query.

    `content_type_id` (`project_content_type_id()`) is for a query prepared once (`core.prepared`),
    which binds it late like every value it reads."""
    if not (user.is_authenticated and user.is_expert):
        return Value(False)
    return _object_perm_expression(user, ANNOTATE.split(".", 1)[1], content_type_id)


def can_manage(user: User, project) -> bool:
    return user.is_authenticated and (user.is_platform_admin
                                      or (user.is_pm and _has_object_perm(user, MANAGE.split(".", 1)[1], project)))


def can_annotate(user: User, project) -> bool:
    return user.is_authenticated and user.is_expert and _has_object_perm(user, ANNOTATE.split(".", 1)[1], project)


def grant_manage(user: User, project) -> None:
    assign_perm("manage_project", user, project)


def grant_annotate(user: User, project) -> None:
    assign_perm("annotate_project", user, project)


def revoke_manage(user: User, project) -> None:
    remove_perm("manage_project", user, project)


def revoke_annotate(user: User, project) -> None:
    remove_perm("annotate_project", user, project)


def is_member(user: User, project) -> bool:
    """Holds the project's membership permission of their role (admins are never members)."""
    if user.is_platform_admin:
        return False
    perm = MANAGE if user.is_pm else ANNOTATE
    # Read fresh: membership may have changed in this request.
    return _has_object_perm(user, perm.split(".", 1)[1], project)
