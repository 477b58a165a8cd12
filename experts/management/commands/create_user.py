"""`create_user --role expert|pm|admin --username U [--password P]`: prints the API token."""
from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from experts.models import Role
from experts.services import user_create


class Command(BaseCommand):
    help = ("Create an account with a role and print its API token (only the token, on one line). "
            "Without --password a random password is set.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--role", required=True, help=f"one of: {', '.join(Role.values)}")
        parser.add_argument("--username", required=True)
        parser.add_argument("--password", default=None,
                            help="checked by the password validators; random when left out")
        parser.add_argument("--email", default="")

    def handle(self, *args, **options) -> None:
        try:
            _user, token = user_create(username=options["username"], role=options["role"],
                                       password=options["password"], email=options["email"])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(token)
