"""The upstream releases the sandbox emulates: one table.

A rule a module transcribes names the upstream file it comes from (`kubernetes pkg/apis/core/validation/...`,
`kueue pkg/webhooks/...`, `volcano pkg/webhooks/...`); the file is read at the release below. The sandbox reports
KUBERNETES from /version and its OpenAPI documents, and validates built-in kinds against that release's schemas.
The portal names the same releases in its own table (portal/upstream.py); a test keeps the two equal.
"""

KUBERNETES = "v1.34.0"
KUEUE = "v0.19.2"
VOLCANO = "v1.15.1"
KUBERAY = "v1.7.0"
