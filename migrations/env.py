"""Alembic environment: bpestore hands in an open connection (see store/db.py).

Running ``alembic`` from the command line also works: it uses the URL in
``-x db=URL`` or ``$BPESTORE_DB`` (a plain path means SQLite).
"""

import os

from alembic import context
from sqlalchemy import create_engine

config = context.config
connection = config.attributes.get("connection")


def run_with(conn) -> None:
    context.configure(connection=conn, render_as_batch=conn.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


if connection is not None:
    run_with(connection)
else:
    url = context.get_x_argument(as_dictionary=True).get("db") or os.environ.get("BPESTORE_DB", "bpestore.db")
    if "://" not in url:
        url = f"sqlite:///{url}"
    with create_engine(url).begin() as conn:
        run_with(conn)
