"""Print a team's monthly statement as FOCUS-style CSV or as JSON (for finance, scripts and spreadsheets)."""

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from billing import selectors
from tenants.models import Team


class Command(BaseCommand):
    help = "Print the statement of one team (or every team with --team all) for one month."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="the team's slug, or 'all' for every team")
        parser.add_argument("--month", required=True, help="YYYY-MM")
        parser.add_argument("--format", choices=["csv", "json"], default="csv", dest="fmt")

    def handle(self, *args, team, month, fmt, **options):
        try:
            month = selectors.parse_month(month)
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from None
        # Archived teams are included: a statement is history.
        teams = Team.objects.select_related("parent").order_by("slug")
        if team != "all":
            teams = teams.filter(slug=team)
            if not teams:
                raise CommandError(f"No team with the slug {team!r}.")
        statements = list(selectors.statements_for(teams=teams, month=month).values())
        if fmt == "csv":
            selectors.write_focus_csv(statements, self.stdout)
            return
        payload = [selectors.statement_json(s) for s in statements]
        self.stdout.write(json.dumps(payload[0] if team != "all" else payload, indent=2))
