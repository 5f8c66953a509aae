"""Alembic environment: runs on the connection the Store hands over."""

from alembic import context

from jurist.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only when run by the alembic CLI
    from sqlalchemy import create_engine

    from jurist.store.store import connect_args

    url = context.config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("set sqlalchemy.url in the alembic configuration, or migrate through jurist's Store")
    connection = create_engine(url, connect_args=connect_args(url)).connect()  # a silent server: an error, not a hang

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
