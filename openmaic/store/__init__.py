"""PostgreSQL: the connection host, the embedded server, migrations and the named queries."""
