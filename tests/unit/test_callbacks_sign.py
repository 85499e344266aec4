"""Signing callback requests and checking their bodies: pure, no database, no HTTP."""

from __future__ import annotations

import hashlib
import hmac
import uuid

import pytest

import wai
from wai.callbacks.ingress._body import CallbackBody, parse_body
from wai.callbacks.signing import (
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    InvalidSignature,
    callback_url,
    check_secret,
    sign,
    verify,
)

SECRET = b"s" * 32
CID = uuid.UUID("6f1c2b7e-0d1a-4c55-9a8e-2f3b4c5d6e7f")


def test_sign_follows_the_documented_recipe() -> None:
    body = b'{"payload":{"paid":12}}'
    nonce = "n0nce-0123456789_abc"
    headers = sign(SECRET, CID, "complete", body, timestamp=1_700_000_000, nonce=nonce)
    message = f"1700000000.{nonce}.{CID}.complete.".encode() + body
    expected = hmac.new(SECRET, message, hashlib.sha256).hexdigest()
    assert headers == {
        TIMESTAMP_HEADER: "1700000000",
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: f"v2={expected}",
        "Content-Type": "application/json",
    }
    digest = verify(
        SECRET,
        str(CID),
        "complete",
        body,
        timestamp="1700000000",
        nonce=nonce,
        signature_header=f"v2={expected.upper()}",
        now=1_700_000_100,
    )
    assert digest == expected  # what the ingress remembers to refuse a replay


def test_sign_v1_without_a_nonce_is_still_accepted() -> None:
    body = b'{"payload":{"paid":12}}'
    headers = sign(SECRET, CID, "complete", body, timestamp=1_700_000_000, nonce=False)
    message = f"1700000000.{CID}.complete.".encode() + body
    expected = hmac.new(SECRET, message, hashlib.sha256).hexdigest()
    assert headers == {
        TIMESTAMP_HEADER: "1700000000",
        SIGNATURE_HEADER: f"v1={expected}",
        "Content-Type": "application/json",
    }
    verify(
        SECRET,
        str(CID),
        "complete",
        body,
        timestamp="1700000000",
        signature_header=f"v1={expected.upper()}",
        now=1_700_000_100,
    )


def test_sign_defaults_to_now_and_a_fresh_nonce_and_checks_its_inputs() -> None:
    headers = sign(SECRET, CID, "retry", b"{}")
    verify(
        SECRET,
        str(CID),
        "retry",
        b"{}",
        timestamp=headers[TIMESTAMP_HEADER],
        nonce=headers[NONCE_HEADER],
        signature_header=headers[SIGNATURE_HEADER],
    )
    again = sign(SECRET, CID, "retry", b"{}", timestamp=int(headers[TIMESTAMP_HEADER]))
    assert again[NONCE_HEADER] != headers[NONCE_HEADER]
    assert again[SIGNATURE_HEADER] != headers[SIGNATURE_HEADER]  # two requests, two ids
    for bad in ("short", "x" * 129, "no spaces allowed here", ""):
        with pytest.raises(wai.ValidationError, match="nonce"):
            sign(SECRET, CID, "retry", b"{}", nonce=bad)
    with pytest.raises(wai.ValidationError, match="action must be one of"):
        sign(SECRET, CID, "resolve", b"{}")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        sign(b"short", CID, "retry", b"{}")


@pytest.mark.parametrize("secret", [b"", b"x" * 31, "x" * 31, "\ud800" * 40, None, 42])
def test_check_secret_rejects_short_or_non_text_secrets(secret: object) -> None:
    with pytest.raises(ValueError, match="callback secret"):
        check_secret(secret)


def test_a_str_secret_signs_as_its_utf8_bytes() -> None:
    text = "k" * 40
    assert check_secret(text) == text.encode()
    signed = sign(text, CID, "retry", b"{}", timestamp=1, nonce=False)
    assert signed == sign(text.encode(), CID, "retry", b"{}", timestamp=1, nonce=False)


def test_callback_url_encodes_the_id() -> None:
    assert callback_url("https://hooks.example/", CID, "fail") == (
        f"https://hooks.example/callbacks/{CID}/fail"
    )
    assert callback_url("http://h", "a/b c", "retry") == "http://h/callbacks/a%2Fb%20c/retry"
    with pytest.raises(ValueError, match="action"):
        callback_url("http://h", CID, "delete")


def _good(ts: int = 1000) -> dict[str, str]:
    return sign(SECRET, CID, "complete", b"{}", timestamp=ts, nonce=False)


@pytest.mark.parametrize(
    ("timestamp", "signature", "now", "message"),
    [
        (None, _good()[SIGNATURE_HEADER], 1000, "missing X-Wai-Timestamp"),
        ("", _good()[SIGNATURE_HEADER], 1000, "integer unix seconds"),
        ("1000.0", _good()[SIGNATURE_HEADER], 1000, "integer unix seconds"),
        ("-5", _good()[SIGNATURE_HEADER], 1000, "integer unix seconds"),
        (
            "\u0661\u0660\u0660\u0660",
            _good()[SIGNATURE_HEADER],
            1000,
            "integer unix seconds",
        ),  # non-ASCII digits
        ("1000", _good()[SIGNATURE_HEADER], 1301, "outside the ±300s window"),
        ("1000", _good()[SIGNATURE_HEADER], 699, "outside the ±300s window"),
        ("1000", None, 1000, "missing X-Wai-Signature"),
        ("1000", "v2=" + "0" * 64, 1000, "a v2 signature needs X-Wai-Nonce"),
        ("1000", "v3=" + "0" * 64, 1000, "v2=<64 hex digits>"),
        ("1000", _good()[SIGNATURE_HEADER][:-1], 1000, "v2=<64 hex digits>"),
        ("1000", "v1=" + "0" * 64, 1000, "does not match"),
        ("1001", _good()[SIGNATURE_HEADER], 1000, "does not match"),
    ],
)
def test_verify_says_what_is_wrong(
    timestamp: str | None, signature: str | None, now: float, message: str
) -> None:
    with pytest.raises(InvalidSignature, match=message):
        verify(
            SECRET,
            str(CID),
            "complete",
            b"{}",
            timestamp=timestamp,
            signature_header=signature,
            now=now,
        )


def test_verify_checks_the_nonce() -> None:
    v2 = sign(SECRET, CID, "complete", b"{}", timestamp=1000, nonce="a" * 16)
    ts, sig = v2[TIMESTAMP_HEADER], v2[SIGNATURE_HEADER]
    v1 = _good()[SIGNATURE_HEADER]
    for nonce, signature, message in [
        ("b" * 16, sig, "does not match"),  # the nonce is signed
        ("a" * 15, sig, "16 to 128 characters"),
        ("a" * 16, v1, "a v1 signature takes no X-Wai-Nonce"),
    ]:
        with pytest.raises(InvalidSignature, match=message):
            verify(
                SECRET,
                str(CID),
                "complete",
                b"{}",
                timestamp=ts,
                nonce=nonce,
                signature_header=signature,
                now=1000,
            )


def test_verify_binds_the_id_the_action_the_body_and_the_secret() -> None:
    good = _good()
    ts, sig = good[TIMESTAMP_HEADER], good[SIGNATURE_HEADER]
    verify(SECRET, str(CID), "complete", b"{}", timestamp=ts, signature_header=sig, now=1000)
    for secret, cid, action, body in [
        (b"t" * 32, str(CID), "complete", b"{}"),
        (SECRET, str(uuid.uuid4()), "complete", b"{}"),
        (SECRET, str(CID).upper(), "complete", b"{}"),
        (SECRET, str(CID), "fail", b"{}"),
        (SECRET, str(CID), "complete", b"{} "),
    ]:
        with pytest.raises(InvalidSignature, match="does not match"):
            verify(secret, cid, action, body, timestamp=ts, signature_header=sig, now=1000)


@pytest.mark.parametrize(
    ("action", "body", "parsed"),
    [
        ("complete", b"{}", CallbackBody("complete")),
        ("complete", b'{"payload": {"a": [1, null]}}', CallbackBody("complete", {"a": [1, None]})),
        ("resume", b'{"payload": "x"}', CallbackBody("resume", "x")),
        ("fail", b'{"error": "declined"}', CallbackBody("fail", error="declined")),
        ("heartbeat", b'{"timeout": 60}', CallbackBody("heartbeat", timeout=60.0)),
        ("retry", b"{}", CallbackBody("retry")),
    ],
)
def test_parse_body_accepts_each_action(action: str, body: bytes, parsed: CallbackBody) -> None:
    assert parse_body(action, body) == parsed


@pytest.mark.parametrize(
    ("action", "body", "message"),
    [
        ("complete", b"", "not valid JSON"),
        ("complete", b"{", "not valid JSON"),
        ("complete", b"\xff", "not UTF-8"),
        ("complete", b"[]", "must be a JSON object"),
        ("complete", b"null", "must be a JSON object"),
        ("complete", b'{"payload": NaN}', "not valid JSON"),
        ("complete", b'{"payload": 1e999}', "cannot be encoded"),
        ("complete", b'{"payload": "\\u0000"}', "NUL"),
        ("complete", b'{"payload": "\\ud800"}', "lone surrogate"),
        ("complete", b"[" * 100_000, "not valid JSON"),
        ("complete", b'{"error": "x"}', "unknown field 'error'"),
        ("retry", b'{"payload": 1}', "unknown field 'payload' for retry"),
        ("fail", b"{}", "needs the field 'error'"),
        ("fail", b'{"error": 42}', "error must be a string"),
        ("heartbeat", b"{}", "needs the field 'timeout'"),
        ("heartbeat", b'{"timeout": 0}', "timeout must be"),
        ("heartbeat", b'{"timeout": "60"}', "timeout must be"),
        ("heartbeat", b'{"timeout": true}', "timeout must be"),
    ],
)
def test_parse_body_rejects_bad_bodies(action: str, body: bytes, message: str) -> None:
    with pytest.raises(wai.ValidationError, match=message):
        parse_body(action, body)
