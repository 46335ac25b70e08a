"""The only layer that speaks SQL: connections, transactions, migrations and the queries the
library runs. Nothing above this package builds SQL text."""
