"""The shape of a personal access token: `gpp_<prefix>_<secret>`.

The prefix (10 hex characters) is stored in clear to find the row and to show which token is which; the secret
(32 random bytes) is never stored, only the SHA-256 of the whole token. A hash this fast is right here because
the secret has 256 bits of entropy: there is nothing to guess, unlike a password.
"""

import hashlib
import re
import secrets

TOKEN_RE = re.compile(r"^gpp_([0-9a-f]{10})_[A-Za-z0-9_-]{43}$")


def new_token() -> tuple[str, str]:
    """A fresh (prefix, token)."""
    prefix = secrets.token_hex(5)
    return prefix, f"gpp_{prefix}_{secrets.token_urlsafe(32)}"


def split_token(raw: str) -> str | None:
    """The prefix of a well-formed token, else None."""
    match = TOKEN_RE.match(raw or "")
    return match.group(1) if match else None


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()
