"""Who is asking: people and their roles, API keys, sign-in with an OpenID Connect
provider, the sessions each person owns, and the audit trail (README "Sign-in, roles and
the audit trail"). Below the API, the CLI and MCP; above storage and config."""
