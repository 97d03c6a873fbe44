"""Hand-written SELECTs for the reads every API request makes: its token, and the job list page.

On those paths the ORM spends more time building and compiling a query than the database spends answering it
(about 0.5 ms against 0.1 ms for the token). A selector may then write its SELECT itself and read it with `fetch`,
which hands each value through the converters the ORM would apply for that model field, so the rows are the ORM's
on every database (SQLite's naive datetimes become aware, as they do through a queryset). Each such selector is
tested against the ORM query it replaces.
"""

import functools
from collections.abc import Sequence

from django.db import connection
from django.db.models import Field


def fetch(sql: str, params: Sequence, fields: tuple[Field, ...]) -> list[Sequence]:
    """The rows of one SELECT whose columns are `fields`, in that order, converted as the ORM converts them."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    steps = _conversions(connection.ops, fields)
    if not steps:  # PostgreSQL's driver already hands back the ORM's values for these columns
        return rows
    converted = []
    for row in rows:
        row = list(row)
        for i, col, converters in steps:
            for convert in converters:
                row[i] = convert(row[i], col, connection)
        converted.append(row)
    return converted


@functools.lru_cache(maxsize=64)
def _conversions(ops, fields: tuple[Field, ...]) -> tuple:
    """Per database connection (its operations object) and column list: the columns that need converting."""
    steps = []
    for index, field in enumerate(fields):
        col = field.get_col(field.model._meta.db_table)
        converters = ops.get_db_converters(col) + col.get_db_converters(ops.connection)
        if converters:
            steps.append((index, col, converters))
    return tuple(steps)


def placeholders(values: Sequence) -> str:
    """`%s, %s, …` for an IN list of these values."""
    return ", ".join(["%s"] * len(values))
