"""A month of statements for 500 teams × 6 flavors (about 2.2 million hourly usage rows) in PostgreSQL (issue 6).

The floor is a plain `SUM … GROUP BY team, flavor` over the same rows, run from a bare cursor; the portal's
selector does the same scan but also prices every hour at the rate in force then (two flavors change price mid-month,
two MIG slices take a share of their parent's rate), rounds the lines and reads the collection ledger.
"""

import statistics
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from bench.support import django_setup, table, test_database

TEAMS = 500
REPEATS = 5
MONTH = (2026, 10)


def _seed(start: datetime, end: datetime) -> int:
    from django.db import connection

    from billing.models import CollectedHour, RateCard
    from tenants.models import Cluster, GpuFlavor, Team, TeamNamespace

    cluster = Cluster.objects.create(name="bench", server="http://127.0.0.1:9", cohort="bench")
    whole = [GpuFlavor.objects.create(cluster=cluster, name=name, gpu_model=name.upper(), capacity=4096,
                                      node_labels={"pool": name}) for name in ("h100", "a100", "l40s", "b200")]
    for size in (1, 3):  # MIG slices of the H100, priced as their share of it
        GpuFlavor.objects.create(cluster=cluster, name=f"h100-{size}g", gpu_model="H100",
                                 resource_name=f"nvidia.com/mig-{size}g.{size * 10}gb", sharing="mig",
                                 gpu_fraction=(Decimal(size) / 7).quantize(Decimal("0.0001")), capacity=4096,
                                 node_labels={"mig": str(size)})
    whole[0].gpu_model = "H100"
    whole[0].save()
    middle = start + timedelta(days=15)
    for i, flavor in enumerate(whole):
        if i < 2:  # a price change in the middle of the month
            RateCard.objects.create(flavor=flavor, price_per_gpu_hour=Decimal("2.4000") + i, effective_from=start,
                                    effective_to=middle)
            RateCard.objects.create(flavor=flavor, price_per_gpu_hour=Decimal("2.9000") + i, effective_from=middle)
        else:
            RateCard.objects.create(flavor=flavor, price_per_gpu_hour=Decimal("1.1000") * (i + 1),
                                    effective_from=start)
    teams = Team.objects.bulk_create([Team(slug=f"t{i:03d}", name=f"Team {i}", cost_center=f"CC-{i % 40}")
                                      for i in range(TEAMS)])
    TeamNamespace.objects.bulk_create([TeamNamespace(team=t, cluster=cluster) for t in teams])
    hours = int((end - start) / timedelta(hours=1))
    CollectedHour.objects.bulk_create([CollectedHour(cluster=cluster, hour=start + timedelta(hours=h),
                                                     state="collected", collected_at=end) for h in range(hours - 5)])
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO billing_usagehour (team_id, flavor_id, cluster_id, namespace, hour, allocated_gpu_hours,
                                           used_gpu_hours, gpu_memory_used_gib_avg, energy_kwh, utilisation_signal)
            SELECT t.id, f.id, f.cluster_id, t.slug, h, a.alloc, round(a.alloc * ((t.id + extract(hour FROM h)::int)
                   %% 11) / 10.0, 6), 0, 0, ''
            FROM tenants_team t CROSS JOIN tenants_gpuflavor f
            CROSS JOIN generate_series(%s::timestamptz, %s::timestamptz - interval '1 hour', interval '1 hour') h
            CROSS JOIN LATERAL (SELECT ((t.id * 7 + f.id * 3) %% 8 + 1)::numeric(14, 6) AS alloc) a
        """, [start, end])
        cursor.execute("ANALYZE billing_usagehour")
        cursor.execute("SELECT count(*) FROM billing_usagehour")
        return cursor.fetchone()[0]


def _floor(start: datetime, end: datetime) -> tuple[float, Decimal]:
    from django.db import connection

    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT team_id, flavor_id, SUM(allocated_gpu_hours), SUM(used_gpu_hours) "
                       "FROM billing_usagehour WHERE hour >= %s AND hour < %s GROUP BY team_id, flavor_id",
                       [start, end])
        rows = cursor.fetchall()
    return time.perf_counter() - began, sum(r[2] for r in rows)


def _portal(month, now) -> tuple[float, list]:
    from billing import selectors
    from tenants.models import Team

    began = time.perf_counter()
    statements = list(selectors.statements_for(teams=Team.objects.select_related("parent"), month=month,
                                               now=now).values())
    return time.perf_counter() - began, statements


def run() -> str:
    django_setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        return ("## Monthly statements (500 teams × 6 flavors)\n\nNot run: needs `DATABASE_URL` pointing at "
                "PostgreSQL (the rows are generated there with generate_series).\n")
    from billing import selectors

    month = selectors.parse_month(f"{MONTH[0]}-{MONTH[1]:02d}")
    start, end = selectors.month_bounds(month)
    now = end + timedelta(days=1)
    with test_database():
        began = time.perf_counter()
        rows = _seed(start, end)
        seeded = time.perf_counter() - began
        _floor(start, end), _portal(month, now)  # warm the cache and the connection
        floors, portals = [], []
        for _ in range(REPEATS):
            elapsed, floor_total = _floor(start, end)
            floors.append(elapsed)
            elapsed, statements = _portal(month, now)
            portals.append(elapsed)
        allocated = sum(s.allocated_gpu_hours for s in statements)
        if allocated != floor_total:
            raise RuntimeError(f"the statements hold {allocated} GPU-hours, the rows {floor_total}")
        for statement in statements:
            if statement.total_cost != sum(line.cost for line in statement.lines):
                raise RuntimeError(f"{statement.team.slug}: lines do not add up")
        tracemalloc.start()
        _portal(month, now)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        lines = sum(len(s.lines) for s in statements)
        total = sum(s.total_cost for s in statements)
    floor, portal = statistics.median(floors), statistics.median(portals)
    return (
        "## Monthly statements (500 teams × 6 flavors)\n\n"
        f"{rows:,} hourly usage rows for {datetime(*MONTH, 1, tzinfo=UTC):%B %Y} in PostgreSQL (seeded in "
        f"{seeded:.0f} s with generate_series); every team's statement from `billing.selectors.statements_for` "
        "(one aggregate query grouping by team, flavor and utilisation signal with one `SUM … FILTER` per rate "
        "segment and each signal's first and last hour, Decimal "
        "pricing, rounding, the collection ledger) against the floor, a bare `SUM … GROUP BY team, flavor` over the "
        f"same rows. Median of {REPEATS}. "
        "Target: ratio ≤ 1.4×.\n\n"
        + table(["floor (SUM … GROUP BY)", "statements", "ratio", "lines", "total", "peak Python memory"],
                [[f"{floor * 1000:.0f} ms", f"{portal * 1000:.0f} ms", f"**{portal / floor:.2f}×**", lines,
                  f"{total:,} USD", f"{peak / 2**20:.1f} MiB"]])
        + "\n"
    )
