"""boto3 clients built one way for every sink, and AWS errors mapped to CdcErrors at the boundary.

Credentials only ever come from boto3's default chain (profile, environment, SSO, instance
role): cdc never takes a key on argv or in cdc.toml. Throttling and 5xx answers are retried
by botocore's "standard" mode (exponential backoff with full jitter, capped at 20 s); what is
still failing after that reaches us as a ClientError and is sorted into transient/permanent.
"""

from __future__ import annotations

import functools
from typing import Any

from cdc.config import AWSSettings
from cdc.errors import CdcError, ConfigError, ConnectError, TransientError

# botocore's standard mode: attempts include the first call; backoff is base * 2**n with jitter.
# https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html
MAX_ATTEMPTS = 10

_THROTTLING = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "ProvisionedThroughputExceededException", "LimitExceededException", "SlowDown",
    "RequestLimitExceeded", "RequestTimeout", "RequestTimeoutException", "InternalFailure",
    "InternalError", "ServiceUnavailable", "KMSThrottlingException", "ConditionalRequestConflict",
})
_ACCESS = frozenset({
    "AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "InvalidAccessKeyId",
    "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId",
    "KMSAccessDeniedException", "AllAccessDisabled",
})


def make_client(service: str, aws: AWSSettings) -> Any:
    """A boto3 client for `service` honouring --profile/--region/--endpoint-url and the default chain."""
    import boto3
    import botocore.config
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=aws.profile, region_name=aws.region)
    except botocore.exceptions.ProfileNotFound as exc:
        raise ConfigError(
            f"AWS profile {aws.profile!r} is not configured ({exc})",
            hint="check --profile / CDC_AWS_PROFILE against ~/.aws/config",
        ) from None
    if session.region_name is None:
        raise ConfigError(
            f"no AWS region for {service}",
            hint="pass --region, set CDC_AWS_REGION or AWS_REGION, or give the profile a region",
        )
    config = botocore.config.Config(
        retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
        connect_timeout=10,
        read_timeout=aws.read_timeout,
        user_agent_extra="cdc-ship",
    )
    # endpoint_url None lets boto3 honour AWS_ENDPOINT_URL(_S3/_KINESIS) from the environment.
    client = session.client(service, endpoint_url=aws.endpoint_url, config=config)
    client.meta.events.register("before-parse", functools.partial(refuse_cut_answer, client.meta.endpoint_url))
    return client


def refuse_cut_answer(endpoint_url: str, operation_model: Any, response_dict: dict[str, Any], **_: Any) -> None:
    """Raise (a botocore ConnectionClosedError) for an answer shorter than its Content-Length.

    botocore reads answers with urllib3's length check off, so an answer whose connection ends early (a FIN in
    mid-answer; an RST is an error already) parses as a short one: truncated JSON becomes {"message": <the cut
    text>}, an empty body {}; a PutRecords answer arrives without its Records (found by CI's network-fault run).
    Streamed bodies check their own length; a HEAD answer's Content-Length is the object's, with no body.
    """
    body, headers = response_dict.get("body"), response_dict.get("headers") or {}
    if operation_model.has_streaming_output or operation_model.http.get("method") == "HEAD" \
            or response_dict.get("status_code") in (204, 304) or not isinstance(body, bytes):
        return
    declared = str(headers.get("content-length", ""))
    if declared.isdigit() and len(body) < int(declared):
        raise _cut_answer_error()(endpoint_url=endpoint_url, received=len(body), declared=int(declared))


@functools.cache
def _cut_answer_error() -> type[Any]:
    import botocore.exceptions

    class CutAnswerError(botocore.exceptions.ConnectionClosedError):  # type: ignore[misc]  # botocore: untyped
        # A ConnectionClosedError, so that map_error and botocore's own callers treat it as the dropped link it is.
        fmt = "the answer from {endpoint_url} was cut short: {received} of its {declared} bytes came"

    return CutAnswerError


def sse_params(aws: AWSSettings) -> dict[str, str]:
    """The server-side encryption parameters of every PutObject and CreateMultipartUpload (aws.sse).

    UploadPart needs none: SSE-S3 and SSE-KMS are fixed when the upload is created (only SSE-C repeats them).
    """
    if aws.sse is None:
        return {}
    params = {"ServerSideEncryption": aws.sse}
    if aws.sse == "aws:kms" and aws.sse_kms_key_id:
        params["SSEKMSKeyId"] = aws.sse_kms_key_id
    return params


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError ('' for anything else)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def http_status(exc: BaseException) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def is_transient(code: str, status: int = 0) -> bool:
    return code in _THROTTLING or status >= 500 or status == 429


def map_error(exc: Exception, what: str, *, missing_hint: str) -> CdcError:
    """Turn a botocore exception into a CdcError that names `what` failed and how to fix it."""
    import botocore.exceptions
    import botocore.parsers

    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return ConnectError(
            f"{what}: no AWS credentials found",
            hint="use the default chain: AWS_PROFILE/--profile, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            "in the environment, SSO (aws sso login) or an instance role",
        )
    if isinstance(exc, (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)):
        return TransientError(f"{what}: cannot reach AWS ({exc})", hint="check the network, --region and --endpoint-url")
    if isinstance(exc, (botocore.exceptions.IncompleteReadError, botocore.parsers.ResponseParserError)):
        return TransientError(f"{what}: AWS's answer was cut short ({exc})", hint="check the network; rerun")
    code, status = error_code(exc), http_status(exc)
    message = (getattr(exc, "response", None) or {}).get("Error", {}).get("Message", "") or str(exc)
    if is_transient(code, status):
        return TransientError(
            f"{what}: still failing after {MAX_ATTEMPTS} attempts: {code or status} {message}",
            hint="the service is throttling or failing; rerun later (nothing was checkpointed past the failure), "
            "or add capacity (shards, request rate)",
        )
    if code in _ACCESS or status == 403:
        return ConnectError(
            f"{what}: access denied ({code or status}: {message})",
            hint="grant the caller the needed IAM actions (kinesis:PutRecords, kinesis:DescribeStreamSummary, "
            "s3:PutObject, s3:GetObject, s3:ListBucket; kms:GenerateDataKey and kms:Decrypt on the key of "
            "--sse aws:kms) or pick the right --profile",
        )
    if status == 404 or code in ("ResourceNotFoundException", "NoSuchBucket", "NotFound", "404"):
        return CdcError(f"{what}: not found ({code or status}: {message})", hint=missing_hint)
    return CdcError(f"{what}: {code or status}: {message}", hint=missing_hint)
