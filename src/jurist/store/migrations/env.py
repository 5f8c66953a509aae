"""Alembic environment: runs on the connection the Store hands over."""

from alembic import context

from jurist.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only when run by the alembic CLI
    from sqlalchemy import create_engine

    connection = create_engine(context.config.get_main_option("sqlalchemy.url")).connect()

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
