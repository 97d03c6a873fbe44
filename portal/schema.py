"""The OpenAPI schema's view of input fields: drf-spectacular states types, lengths, ranges and validators' patterns;
this adds the text rules DRF enforces on every string but does not describe (no NUL character; not only whitespace
where blanks are refused), so generated clients and fuzzers learn them from the schema rather than from 400s."""

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from portal.limits import NO_NUL, NOT_BLANK

_TEXT_RULE = "x-portal-text-rule"  # carried from field mapping (which knows the direction) to validator insertion


class PortalAutoSchema(AutoSchema):
    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (direction == "request" and isinstance(field, serializers.CharField) and schema.get("type") == "string"
                and not {"enum", "format"} & set(schema)):
            schema[_TEXT_RULE] = NOT_BLANK if field.trim_whitespace and not field.allow_blank else NO_NUL
        return schema

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        rule = schema.pop(_TEXT_RULE, None)
        if rule and "pattern" not in schema:  # a validator's own pattern already excludes NUL and blanks
            schema["pattern"] = rule
