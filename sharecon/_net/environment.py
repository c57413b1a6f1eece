"""The ``SHARECON_*`` environment variables of the connection settings: one table, read by
the command line (``sharecon.cli``) and the worker (``sharecon.worker``) alike.

Keys are the settings' names (the CLI's option destinations, the worker's
``WorkerConfig`` fields); values are the variables. docs/cli.md and docs/worker.md list
them (tests/docs/test_env_tables.py checks).
"""

from __future__ import annotations

__all__ = ["CONNECTION_ENV", "FILE_SECURITY_SETTINGS", "KERBEROS_SETTINGS", "OAUTH_SETTINGS"]

#: Connection setting -> the environment variable that gives it when no flag does.
CONNECTION_ENV: dict[str, str] = {
    "bootstrap": "SHARECON_BOOTSTRAP",
    "client_id": "SHARECON_CLIENT_ID",
    "timeout": "SHARECON_TIMEOUT",
    "tls": "SHARECON_TLS",
    "tls_ca": "SHARECON_TLS_CA",
    "tls_cert": "SHARECON_TLS_CERT",
    "tls_key": "SHARECON_TLS_KEY",
    "tls_key_password": "SHARECON_TLS_KEY_PASSWORD",
    "command_config": "SHARECON_COMMAND_CONFIG",
    "sasl_mechanism": "SHARECON_SASL_MECHANISM",
    "sasl_username": "SHARECON_SASL_USERNAME",
    "sasl_password": "SHARECON_SASL_PASSWORD",
    "oauth_token_url": "SHARECON_OAUTH_TOKEN_URL",
    "oauth_client_id": "SHARECON_OAUTH_CLIENT_ID",
    "oauth_scope": "SHARECON_OAUTH_SCOPE",
    # The client secret has no flag: a command line is visible to every user of the machine.
    "oauth_client_secret": "SHARECON_OAUTH_CLIENT_SECRET",
    "kerberos_principal": "SHARECON_KERBEROS_PRINCIPAL",
    "kerberos_keytab": "SHARECON_KERBEROS_KEYTAB",
    "kerberos_service_name": "SHARECON_KERBEROS_SERVICE_NAME",
}

#: The Kerberos (GSSAPI) settings.
KERBEROS_SETTINGS = ("kerberos_principal", "kerberos_keytab", "kerberos_service_name")
#: The OAUTHBEARER settings that have a flag: naming one without that mechanism is an error,
#: as for the Kerberos ones (it would be ignored, and the login would be something else).
OAUTH_SETTINGS = ("oauth_token_url", "oauth_client_id", "oauth_scope")

#: The TLS and SASL settings a properties file (``command_config``) gives instead: naming
#: one of them next to the file is an error, in the CLI and the worker alike.
FILE_SECURITY_SETTINGS = (
    "tls_ca",
    "tls_cert",
    "tls_key",
    "sasl_mechanism",
    "sasl_username",
    *OAUTH_SETTINGS,
    *KERBEROS_SETTINGS,
)
