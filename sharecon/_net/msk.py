"""AWS MSK IAM authentication: OAUTHBEARER tokens made by AWS's own signer library.

Amazon MSK's IAM listeners take, from clients other than Java, an OAUTHBEARER token that
is a SigV4-presigned ``kafka-cluster:Connect`` URL, base64url-encoded. AWS's
``aws-msk-iam-sasl-signer-python`` makes it from the usual credential chain (environment,
profile, instance role, or an assumed role); this module only wraps it as a token
provider, imported lazily so the ``aws`` extra stays optional.

The signer is synchronous (botocore), so it runs in a worker thread. Signing is local:
only the credential chain may reach the network (an instance role asks the instance
metadata service; ``role_arn`` asks STS).
"""

from __future__ import annotations

import importlib
from typing import Any

import anyio

from sharecon import errors
from sharecon._net.oauth import RefreshingTokenProvider
from sharecon._net.sasl import OAuthBearerToken

__all__ = ["MskIamTokenProvider", "msk_iam_token_provider"]

_SIGNER = "aws_msk_iam_sasl_signer.MSKAuthTokenProvider"


def _signer() -> Any:
    try:
        module = importlib.import_module(_SIGNER)
    except ImportError:
        raise errors.ConfigError(
            "AWS MSK IAM needs AWS's signer library: pip install 'sharecon[aws]'"
        ) from None
    return module


class MskIamTokenProvider(RefreshingTokenProvider):
    """OAUTHBEARER tokens for an MSK cluster's IAM listener (port 9098, or 9198 public).

    Signed tokens are valid for 15 minutes; a new one is made at about 80 % of that.

    :param region: the cluster's AWS region, e.g. ``"eu-west-1"``.
    :param profile: a named profile from ``~/.aws/config`` instead of the default chain.
    :param role_arn: a role to assume (through STS) and sign as.
    :param role_session_name: the STS session name with ``role_arn``.
    """

    def __init__(
        self,
        region: str,
        *,
        profile: str | None = None,
        role_arn: str | None = None,
        role_session_name: str | None = None,
    ) -> None:
        if not region or not region.replace("-", "").isalnum():
            raise errors.ConfigError(f"AWS region {region!r} is not a region name like eu-west-1")
        if profile and role_arn:
            raise errors.ConfigError("give profile= or role_arn=, not both")
        if role_session_name and not role_arn:
            raise errors.ConfigError("role_session_name= needs role_arn=")
        self._provider = _signer()  # fail now, at configuration, when the extra is missing
        super().__init__()
        self.region = region
        self.profile = profile
        self.role_arn = role_arn
        self.role_session_name = role_session_name
        self._what = f"the MSK IAM signer ({region})"

    def __repr__(self) -> str:
        extra = f", profile={self.profile!r}" if self.profile else ""
        extra += f", role_arn={self.role_arn!r}" if self.role_arn else ""
        return f"MskIamTokenProvider({self.region!r}{extra})"

    def _sign(self) -> tuple[str, int]:
        provider = self._provider
        if self.role_arn:
            if self.role_session_name:
                result = provider.generate_auth_token_from_role_arn(
                    self.region, self.role_arn, self.role_session_name
                )
            else:
                result = provider.generate_auth_token_from_role_arn(self.region, self.role_arn)
        elif self.profile:
            result = provider.generate_auth_token_from_profile(self.region, self.profile)
        else:
            result = provider.generate_auth_token(self.region)
        token, expiry_ms = result
        return str(token), int(expiry_ms)

    async def _fetch_with_retries(self) -> OAuthBearerToken:
        try:
            token, expiry_ms = await anyio.to_thread.run_sync(self._sign, abandon_on_cancel=True)
        except errors.KafkaError:
            raise
        except Exception as exc:
            # botocore's messages name the missing piece ("Unable to locate credentials"),
            # never the secret key.
            raise errors.OAuthTokenError(
                f"{self._what} could not sign a token: {type(exc).__name__}: {exc}"
            ) from None
        return OAuthBearerToken(token, expiry_ms / 1000, principal="aws-msk-iam")


def msk_iam_token_provider(
    region: str,
    *,
    profile: str | None = None,
    role_arn: str | None = None,
    role_session_name: str | None = None,
) -> MskIamTokenProvider:
    """A token provider for AWS MSK IAM (needs ``pip install 'sharecon[aws]'``).

    :raises ConfigError: the ``aws`` extra is not installed, or an argument is wrong.
    """
    return MskIamTokenProvider(
        region, profile=profile, role_arn=role_arn, role_session_name=role_session_name
    )
