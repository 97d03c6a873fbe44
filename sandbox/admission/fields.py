"""Field errors and name checks worded as k8s.io/apimachinery words them.

- Names: pkg/util/validation/validation.go (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, IsQualifiedName,
  IsRelaxedEnvVarName), at the Kubernetes release the sandbox reports.
- Errors: pkg/util/validation/field/errors.go: `<field>: Invalid value: <value>: <detail>`, `Required value`,
  `Duplicate value`, `Unsupported value ... supported values`, `Forbidden`; an aggregate of several is `[a, b]`.
"""

from __future__ import annotations

import json
import re

from ..errors import ApiError

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_RE, _SUBDOMAIN_RE = re.compile(f"^{_LABEL_FMT}$"), re.compile(f"^{_SUBDOMAIN_FMT}$")
_DNS1035_RE, _QNAME_RE = re.compile(f"^{_DNS1035_FMT}$"), re.compile(f"^{_QNAME_FMT}$")


def regex_error(message: str, fmt: str, *examples: str) -> str:
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {listed}regex used for validation is '{fmt}')"


def is_dns1123_label(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_RE.match(value):
        errs.append(regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                                "'-', and must start and end with an alphanumeric character", _LABEL_FMT, "my-name",
                                "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _SUBDOMAIN_RE.match(value):
        errs.append(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                                "'-' or '.', and must start and end with an alphanumeric character", _SUBDOMAIN_FMT,
                                "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _DNS1035_RE.match(value):
        errs.append(regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
                                "with an alphabetic character, and end with an alphanumeric character", _DNS1035_FMT,
                                "my-name", "abc-123"))
    return errs


_QNAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric " \
             "character"


def is_qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return ["a qualified name " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(parts[0]))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QNAME_RE.match(name):
        errs.append("name part " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


_LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")


def is_label_value(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_VALUE_RE.match(value):
        errs.append(regex_error("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                                "'_' or '.', and must start and end with an alphanumeric character", _LABEL_VALUE_FMT,
                                "MyValue", "my_value", "12345"))
    return errs


def is_relaxed_env_var_name(value: str) -> list[str]:
    """RelaxedEnvironmentVariableValidation is on by default from Kubernetes 1.32 (beta): the release the sandbox
    reports checks this."""
    errs = ["environment variable name must be non-empty"] if not value else []
    if any(ord(ch) > 126 or ord(ch) < 32 or ch == "=" for ch in value):
        errs.append("a valid environment variable name must consist only of printable ASCII characters other than "
                    "'='")
    return errs


# pkg/apis/core/helper standardFinalizers: the finalizers a built-in object may name without a domain.
STANDARD_FINALIZERS = {"kubernetes", "orphan", "foregroundDeletion"}


def render(value) -> str:
    """A value as Go's field.Error prints it: strings quoted, numbers bare, structures by type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    return '"object"' if isinstance(value, dict) else '"array"'


def cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict:
    return {"reason": reason, "message": message, "field": field}


def invalid(field: str, value, detail: str) -> dict:
    return cause(field, f"Invalid value: {render(value)}: {detail}")


def required(field: str, detail: str = "") -> dict:
    return cause(field, "Required value" + (f": {detail}" if detail else ""), "FieldValueRequired")


def duplicate(field: str, value) -> dict:
    return cause(field, f"Duplicate value: {render(value)}", "FieldValueDuplicate")


def forbidden(field: str, detail: str) -> dict:
    return cause(field, f"Forbidden: {detail}", "FieldValueForbidden")


def not_supported(field: str, value, supported) -> dict:
    listed = ", ".join(json.dumps(s) for s in supported)
    suffix = f": supported values: {listed}" if listed else ""
    return cause(field, f"Unsupported value: {render(value)}{suffix}", "FieldValueNotSupported")


def aggregate(causes: list[dict]) -> str:
    """ErrorList.ToAggregate().Error(): one error as is, several in brackets, repeated messages once."""
    seen: list[str] = []
    for c in causes:
        text = f"{c['field']}: {c['message']}" if c.get("field") else c["message"]
        if text not in seen:
            seen.append(text)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def denied(webhook: str, message: str, code: int = 400, reason: str = "") -> ApiError:
    """A webhook's refusal as kube-apiserver relays it (k8s.io/apiserver pkg/admission/plugin/webhook/errors:
    ToStatusErr): the webhook's status with its code raised to at least 400 and the message prefixed."""
    return ApiError(code, reason, f'admission webhook "{webhook}" denied the request: {message}')


def forbidden_by_webhook(webhook: str, causes: list[dict]) -> ApiError:
    """controller-runtime's validator answers `Denied(err.Error())`: 403 Forbidden (Kueue's webhooks)."""
    return denied(webhook, aggregate(causes), 403, "Forbidden")


def not_found(field: str, value) -> dict:
    return cause(field, f"Not found: {render(value)}", "FieldValueNotFound")


def label_name_causes(field: str, name: str) -> list[dict]:
    """apimachinery metav1 validation ValidateLabelName: a label key is a qualified name."""
    return [invalid(field, name, m) for m in is_qualified_name(name)]
