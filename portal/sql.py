"""Hand-written SELECTs for the reads every API request makes: its token, and the job list page.

On those paths the ORM spends more time building and compiling a query than the database spends answering it
(about 0.5 ms against 0.1 ms for the token). A selector may then write its SELECT itself and read it with `fetch`,
which hands each value through the converters the ORM would apply for that model field, so the rows are the ORM's
on every database (SQLite's naive datetimes become aware, as they do through a queryset). Each such selector is
tested against the ORM query it replaces.
"""

from collections.abc import Sequence

from django.db import connection
from django.db.models import Field


def fetch(sql: str, params: Sequence, fields: Sequence[Field]) -> list[list]:
    """The rows of one SELECT whose columns are `fields`, in that order, converted as the ORM converts them."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    steps = [(i, col, converters) for i, col, converters in map(_converters, range(len(fields)), fields) if converters]
    if not steps:
        return [list(row) for row in rows]
    converted = []
    for row in rows:
        row = list(row)
        for i, col, converters in steps:
            for convert in converters:
                row[i] = convert(row[i], col, connection)
        converted.append(row)
    return converted


def _converters(index: int, field: Field):
    col = field.get_col(field.model._meta.db_table)
    return index, col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)


def placeholders(values: Sequence) -> str:
    """`%s, %s, …` for an IN list of these values."""
    return ", ".join(["%s"] * len(values))
