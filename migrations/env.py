"""Alembic environment: bpestore hands in an open connection (see store/db.py).

Run from the command line (see alembic.ini), it opens the database the CLI
would: ``-x db=PATH_OR_URL``, else ``$BPESTORE_DB``, else ./bpestore.db.
"""

from alembic import context

from bpestore.store.db import make_engine, resolve_url
from bpestore.store.schema import include_object, metadata

config = context.config


def run_with(conn) -> None:
    context.configure(connection=conn, target_metadata=metadata,
                      include_object=include_object(conn.dialect.name),
                      render_as_batch=conn.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


if "connection" in config.attributes:
    run_with(config.attributes["connection"])
else:
    engine = make_engine(resolve_url(context.get_x_argument(as_dictionary=True).get("db")))
    try:
        with engine.connect().execution_options(bpestore_write=True) as conn, conn.begin():
            run_with(conn)
    finally:
        engine.dispose()
