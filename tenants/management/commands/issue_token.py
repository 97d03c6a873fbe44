"""Print a new personal access token for a user: for scripts, CI and the demo, where no one clicks in the UI."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenants.services import access_token_create


class Command(BaseCommand):
    help = "Issue a personal access token for USERNAME and print it (it is shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--expires", type=int, metavar="DAYS", help="days until it expires (default: never)")
        parser.add_argument("--name", default="issued from the command line", help="what the token is for")

    def handle(self, *args, username, expires=None, name="", **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user named {username!r}.")
        try:
            token, raw = access_token_create(actor=user, name=name, expires_in_days=expires)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stderr.write(f"Token {token.prefix}… for {username}"
                          + (f", expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else ""))
        self.stdout.write(raw)
